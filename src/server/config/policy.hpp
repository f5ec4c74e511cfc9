// A configured policy of the service and its `policies:` entry in the configuration file
// (config/config.cpp reads the rest of the file).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
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

/// A policy name the configuration accepts: 1 to kMaxNameBytes bytes, no control characters,
/// none of the names the service uses itself ("inline", "other", or starting with "inline ").
/// Errors: InvalidArgument with the reason.
absl::Status check_policy_name(std::string_view name);

/// An HTTP field name (RFC 9110 token: 1*tchar).
bool is_http_token(std::string_view name) noexcept;

/// One entry of `policies:`. Throws yaml::Error naming file:line:column and the field. Appends to
/// `warnings` (when given) one line per deprecated spelling it accepted.
ServicePolicy parse_policy(const std::string& source, const YAML::Node& node,
                           std::vector<std::string>* warnings = nullptr);

}  // namespace floodgate::server
