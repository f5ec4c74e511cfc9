// libFuzzer target for the rate notation parser: never crashes, and whatever it accepts is valid
// and survives a round trip through to_string.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "floodgate/rate.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = floodgate::parse_limits(text);
  if (!parsed.ok()) {
    if (parsed.status().message().empty()) std::abort();  // every error explains itself
    return 0;
  }
  if (parsed->empty()) std::abort();
  for (const floodgate::Limit& l : *parsed) {
    if (!floodgate::Limit::make(l.amount, l.period, l.burst).ok()) std::abort();
  }
  auto again = floodgate::parse_limits(floodgate::to_string(*parsed));
  if (!again.ok() || *again != *parsed) std::abort();
  return 0;
}
