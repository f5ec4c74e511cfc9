// libFuzzer target for the envoyproxy/ratelimit rule loader (parse_rls_file, in-process from a
// string): never crashes, every error names the file, and every accepted rule has a policy of its
// own (no two rules of a file share a fingerprint).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>

#include "server/rls/rules.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace s = floodgate::server;
  const std::string text(reinterpret_cast<const char*>(data), size);
  s::RlsConfig config;
  const absl::Status st = s::parse_rls_file(text, "fuzz.yaml", config);
  if (!st.ok()) {
    if (st.message().rfind("fuzz.yaml:", 0) != 0) std::abort();
    return 0;
  }
  std::set<std::string> fingerprints;
  for (const s::RlsRule* r : config.rules) {
    if (r->policy == nullptr) continue;
    if (!fingerprints.insert(r->policy->fingerprint()).second) std::abort();
  }
  (void)s::check_rules_storage(config, "redis://127.0.0.1:6379");
  return 0;
}
