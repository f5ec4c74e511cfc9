// libFuzzer target for `floodgate simulate --traffic` specs (generated traffic only: a file path
// would make the fuzzer read arbitrary files). Never crashes; every error explains itself; what it
// accepts is sorted, well-formed and the same for the same seed.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "floodgate/sim/simulate.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  // The first byte picks the kind, so that the fuzzer never names a file.
  std::string spec = (data[0] & 1) ? "poisson:" : "burst:";
  spec.append(reinterpret_cast<const char*>(data + 1), size - 1);
  auto traffic = floodgate::make_traffic(spec, data[0]);
  if (!traffic.ok()) {
    if (traffic.status().message().empty()) std::abort();
    return 0;
  }
  for (std::size_t i = 0; i < traffic->size(); ++i) {
    const floodgate::TraceEvent& e = (*traffic)[i];
    if (e.t < 0 || e.key.empty() || e.cost != 1) std::abort();
    if (i > 0 && (*traffic)[i - 1].t > e.t) std::abort();
  }
  auto again = floodgate::make_traffic(spec, data[0]);
  if (!again.ok() || *again != *traffic) std::abort();
  return 0;
}
