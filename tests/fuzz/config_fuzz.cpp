// libFuzzer target for the service's configuration loader (parse_config, in-process from a
// string): never crashes, every error explains itself with file:line:column, and whatever it
// accepts is within the schema's bounds and loads again the same.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "server/config/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace s = floodgate::server;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto c = s::parse_config(text, "fuzz.yaml");
  if (!c.ok()) {
    if (c.status().message().rfind("fuzz.yaml:", 0) != 0) std::abort();  // names the file
    return 0;
  }
  if (c->threads > static_cast<unsigned>(s::limits::kMaxThreads)) std::abort();
  if (c->http.idle_timeout.count() > s::limits::kMaxTimeoutMs ||
      c->http.drain_timeout.count() > s::limits::kMaxTimeoutMs ||
      c->http.max_header_bytes > static_cast<std::size_t>(s::limits::kMaxHeaderBytes)) {
    std::abort();
  }
  for (const s::ServicePolicy& p : c->policies) {
    if (!s::check_policy_name(p.policy->name()).ok()) std::abort();
    if (p.key_source.kind == s::KeySource::Kind::kHeader && !s::is_http_token(p.key_source.name)) std::abort();
    for (const auto& [key, o] : p.overrides) {
      if (o->fingerprint() == p.policy->fingerprint()) std::abort();  // an override has its own state
    }
  }
  (void)s::check_startup(*c);  // parses the storage URL, never connects
  auto again = s::parse_config(text, "fuzz.yaml");
  if (!again.ok() || again->policies.size() != c->policies.size()) std::abort();
  return 0;
}
