// The service's configuration: YAML, validated once, immutable afterwards.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "floodgate/policy.hpp"

namespace floodgate::server {

/// Where `GET /v1/auth` takes a policy's key from.
struct KeySource {
  enum class Kind : std::uint8_t { kHeader, kQuery };
  Kind kind = Kind::kHeader;
  std::string name = "X-Real-IP";  ///< header or query parameter name
};

/// A configured policy and what the service does around it.
struct ServicePolicy {
  std::shared_ptr<const Policy> policy;
  KeySource key_source;
  /// Decide and count, but always allow (HTTP 200/204).
  bool shadow = false;
  /// Keys with limits of their own ("vip-1: 1000/minute"): same strategy, own state.
  absl::flat_hash_map<std::string, std::shared_ptr<const Policy>> overrides;
  /// Keys that are always allowed without a decision.
  absl::flat_hash_set<std::string> allow;

  /// The policy that applies to `key`: its override, or the policy.
  [[nodiscard]] const Policy& for_key(std::string_view key) const {
    const auto it = overrides.find(absl::string_view(key.data(), key.size()));
    return it == overrides.end() ? *policy : *it->second;
  }
};

/// Limits of the HTTP server. All durations and sizes are non-zero.
struct HttpLimits {
  std::size_t max_header_bytes = 8 * 1024;     ///< larger → 431
  std::size_t max_body_bytes = 16 * 1024;      ///< larger → 413
  /// The body limit of POST /v1/simulate alone (a trace of up to 10,000 requests), read only
  /// when the request line names that path. Larger → 413.
  std::size_t max_simulate_body_bytes = 1024 * 1024;
  std::chrono::milliseconds idle_timeout{60'000};     ///< keep-alive wait for the next request
  std::chrono::milliseconds request_timeout{10'000};  ///< from its first byte to the whole request
  std::chrono::milliseconds write_timeout{10'000};
  std::size_t max_connections = 10'000;
  std::size_t max_pipelined = 16;              ///< requests buffered ahead on one connection
  std::chrono::milliseconds drain_timeout{4'000};  ///< SIGTERM: in-flight requests get this long
};

/// Envoy's rate-limit service over gRPC (docs/envoy.md). Served only when `config_dir` is set.
struct RlsSettings {
  std::string config_dir;  ///< a directory of envoyproxy/ratelimit YAML files; empty: no gRPC
  std::string listen_host = "127.0.0.1";
  std::uint16_t listen_port = 8081;
  bool response_headers = false;  ///< RateLimit / X-RateLimit-* in response_headers_to_add
  std::size_t max_message_bytes = 64 * 1024;
  std::size_t max_descriptors = 64;
  std::size_t max_entries = 16;
  std::size_t max_string_bytes = 1024;
};

/// The whole configuration. `floodgate serve` with no file: 127.0.0.1:8080, memory store, no
/// policies, inline limits allowed.
struct Config {
  std::string source = "<defaults>";  ///< the file it came from, for messages
  std::string listen_host = "127.0.0.1";
  std::uint16_t listen_port = 8080;
  unsigned threads = 0;               ///< 0 = one per core
  std::string storage = "memory";
  /// Coalesce concurrent decisions into one storage round trip: "auto" (for networked storages),
  /// "on" or "off".
  std::string batching = "auto";
  std::string log_level = "info";
  bool allow_inline = true;           ///< /v1/hit with {"limit": …} and no configured policy
  std::size_t max_inline_policies = 1024;
  int auth_denied_status = 429;       ///< nginx auth_request passes only 401/403 through
  HttpLimits http;
  RlsSettings rls;
  std::vector<ServicePolicy> policies;

  [[nodiscard]] const ServicePolicy* find(std::string_view name) const;
};

/// Parses and validates a YAML configuration. Errors (InvalidArgument) name the file, the line and
/// the reason: `floodgate.yaml:12: policy "api": invalid limit "10/fortnight": …`.
absl::StatusOr<Config> load_config(const std::string& path);
absl::StatusOr<Config> parse_config(const std::string& yaml, const std::string& source);

/// "host:port" → host, port. Errors name the text.
absl::Status parse_listen(std::string_view text, std::string& host, std::uint16_t& port);

}  // namespace floodgate::server
