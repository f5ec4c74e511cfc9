// libFuzzer target for the HTTP API in process: the input is a stream of pipelined HTTP/1.1
// requests, read by Beast's parser with the server's limits and answered by Service::handle on the
// memory store and a manual clock, exactly as an I/O thread would. Never crashes, and every
// response keeps the promises the API makes whatever the request was:
//   - a status between 200 and 599, a Content-Length equal to the body's size;
//   - header values without CR, LF or NUL (no response splitting);
//   - a JSON body (every API answer but /metrics and the dashboard's files) that parses as JSON,
//     which Boost.JSON only does for valid UTF-8;
//   - remaining ≤ limit in the body and in X-RateLimit-*, and every integer header within RFC
//     8941's 15 digits.
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include "floodgate/memory_storage.hpp"
#include "server/api/service.hpp"

namespace {

namespace http = boost::beast::http;
namespace s = floodgate::server;

constexpr const char* kConfig = R"(
storage: memory
inline_limits: true
policies:
  - {name: api, strategy: gcra, limit: 5/minute, burst: 8, key: {header: X-Api-Key}, overrides: {vip: 100/minute}}
  - {name: web, strategy: fixed-window, limit: 2/minute; 3/hour, anchor: first-hit, key: {query: user}}
  - {name: tb, strategy: token-bucket, limit: 10/second, burst: 1000000000000000, allow: [trusted]}
  - {name: mw, strategy: moving-window, limit: 3/second, shadow: true}
  - {name: sw, strategy: sliding-window-counter, limit: 4/minute, fail: closed, blocked_cache: 10}
  - {name: lb, strategy: leaky-bucket, limit: 9007199254740992/day}
)";

s::Service& service() {
  static const auto clock = std::make_shared<floodgate::ManualClock>(1'700'000'000 * floodgate::kMicrosPerSecond);
  static s::Service instance = [] {
    auto config = s::parse_config(kConfig, "fuzz.yaml");
    if (!config.ok()) {
      std::fprintf(stderr, "%s\n", config.status().ToString().c_str());
      std::abort();
    }
    return s::Service(std::make_shared<const s::Config>(*std::move(config)),
                      std::make_shared<floodgate::MemoryStorage>(), clock);
  }();
  clock->advance(250'000);  // time moves between inputs: windows end, buckets refill
  return instance;
}

std::int64_t header_int(const s::Response& res, std::string_view name) {
  const auto v = res[boost::beast::string_view(name.data(), name.size())];
  std::int64_t n = -1;
  if (v.empty()) return n;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size() || v.size() > 15) std::abort();
  return n;
}

void check(const s::Request& req, const s::Response& res) {
  if (res.result_int() < 200 || res.result_int() > 599) std::abort();
  for (const auto& field : res) {
    const auto v = field.value();
    if (v.find_first_of(std::string_view("\r\n\0", 3)) != boost::beast::string_view::npos) std::abort();
  }
  if (req.method() == http::verb::head) {  // the GET's Content-Length, no body
    if (!res.body().empty()) std::abort();
  } else if (res.result_int() == 204) {
    if (!res.body().empty()) std::abort();
  } else if (res[http::field::content_length] != std::to_string(res.body().size())) {
    std::abort();
  }
  const std::int64_t limit = header_int(res, "X-RateLimit-Limit");
  const std::int64_t remaining = header_int(res, "X-RateLimit-Remaining");
  (void)header_int(res, "Retry-After");
  if (remaining > limit) std::abort();
  if (res[http::field::content_type] != "application/json" || req.method() == http::verb::head) return;
  boost::system::error_code ec;
  const boost::json::value v = boost::json::parse(res.body(), ec);
  if (ec) std::abort();
  const auto* o = v.if_object();
  if (o == nullptr) std::abort();
  const auto* l = o->if_contains("limit");
  const auto* r = o->if_contains("remaining");
  if (l != nullptr && r != nullptr && l->is_int64() && r->is_int64() && r->as_int64() > l->as_int64()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  s::Service& svc = service();
  boost::beast::flat_buffer buffer;
  if (size == 0) return 0;
  auto in = buffer.prepare(size);
  std::memcpy(in.data(), data, size);
  buffer.commit(size);
  for (int n = 0; n < 8 && buffer.size() > 0; ++n) {  // pipelined requests, as the server reads them
    http::request_parser<http::string_body> parser;
    parser.header_limit(8192);
    parser.body_limit(64 * 1024);
    parser.eager(true);
    boost::beast::error_code ec;
    const std::size_t used = parser.put(buffer.cdata(), ec);
    if (ec || !parser.is_done()) return 0;
    buffer.consume(used);
    s::Response res;
    svc.handle(parser.get(), res);
    check(parser.get(), res);
  }
  return 0;
}
