// The policies of inline limits ({"limit": "10/minute"} in a request body), compiled once each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "floodgate/policy.hpp"
#include "server/common/policy_cache.hpp"

namespace floodgate::server {

/// A cache of compiled inline policies by (strategy, limit, burst), at most `max` of them: past
/// that the one used least recently is dropped (compiled again if it comes back; its state lives
/// in the storage, which bounds and frees it). Never refuses a valid limit.
///
/// Thread-safety: `get` may be called from any thread.
class InlinePolicies {
 public:
  /// The policy of an inline limit. Errors: InvalidArgument (bad strategy, limit or burst).
  absl::StatusOr<std::shared_ptr<const Policy>> get(std::string_view limit, std::string_view strategy,
                                                    std::int64_t burst, std::size_t max);
  /// Compiled inline policies held now.
  [[nodiscard]] std::size_t size() const { return policies_.size(); }
  /// Drops the policies not used since the previous call (PolicyCache::drop_unused).
  std::size_t drop_unused() { return policies_.drop_unused(); }

 private:
  PolicyCache policies_{1024};
};

}  // namespace floodgate::server
