// The policies of inline limits ({"limit": "10/minute"} in a request body), compiled once each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "floodgate/policy.hpp"

namespace floodgate::server {

/// A cache of compiled inline policies by (strategy, limit, burst), at most `max` of them: past
/// that a new one is refused (ResourceExhausted) and the ones in use keep working.
///
/// Thread-safety: `get` may be called from any thread.
class InlinePolicies {
 public:
  /// The policy of an inline limit. Errors: InvalidArgument (bad strategy, limit or burst),
  /// ResourceExhausted (more than `max` distinct inline limits).
  absl::StatusOr<std::shared_ptr<const Policy>> get(std::string_view limit, std::string_view strategy,
                                                    std::int64_t burst, std::size_t max);

 private:
  std::mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<const Policy>> policies_;  // guarded by mu_
};

}  // namespace floodgate::server
