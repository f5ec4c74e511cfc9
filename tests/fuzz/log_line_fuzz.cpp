// libFuzzer target for the access-log readers of `floodgate simulate`: one line in each format
// (combined, Envoy, JSON lines, CSV with a fixed header, and a layout taken from the input), key
// specs, times, and the cost and duration fields of `--charge`. Never crashes; every rejected line
// says why; an accepted line has a key of at most 1024 bytes, a cost in [0, 2^53], a time that is
// not negative and a duration, when read, from 0 to 23 hours.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "floodgate/sim/access_log.hpp"

namespace {

void check_line(floodgate::LineParser& p, std::string_view line) {
  auto r = p.parse(line);
  if (!r.ok()) {
    if (r.status().message().empty()) std::abort();
    return;
  }
  if (r->key.empty() || r->key.size() > 1024 || r->cost < 0 || r->cost > (std::int64_t{1} << 53) || r->time < 0) {
    std::abort();
  }
  if (r->duration && (*r->duration < 0 || *r->duration > std::int64_t{23} * 3600 * 1'000'000)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::string_view line(reinterpret_cast<const char*>(data + 1), size - 1);
  static constexpr const char* kKeys[] = {"auto", "ip/64", "$http_x_api_key", "ip+$remote_user", "key", "ip/24"};
  floodgate::LogReaderOptions o;
  o.key = *floodgate::KeySpec::parse(kKeys[data[0] % 6]);
  if (data[0] & 0x40) {  // as `--charge` reads: durations (any field of the defaults), costs required
    o.duration_field = "auto";
    o.require_cost = (data[0] & 0x20) != 0;
    o.require_duration = o.require_cost;
  }
  using floodgate::LogFormat;
  const LogFormat formats[] = {LogFormat::kCombined, LogFormat::kEnvoy, LogFormat::kJsonl, LogFormat::kCsv};
  const LogFormat f = formats[(data[0] >> 3) % 4];
  auto p = floodgate::LineParser::make(f, o, "time,ip,key,cost,x-api-key,request_time");
  if (p.ok()) check_line(**p, line);
  if (data[0] & 0x80) {  // the input as a layout, and then as a line of it
    o.layout = std::string(line.substr(0, line.find('\n')));
    auto custom = floodgate::LineParser::make(LogFormat::kCombined, o);
    if (custom.ok()) check_line(**custom, line.substr(std::min(line.size(), line.find('\n') + 1)));
  }
  (void)floodgate::KeySpec::parse(line);
  (void)floodgate::parse_log_time(line);
  (void)floodgate::parse_log_duration(line, 1000);
  (void)floodgate::client_address(line, data[0] % 130);
  (void)floodgate::detect_log_format(line);
  return 0;
}
