// envoyproxy/ratelimit's Redis key layout (docs/envoy.md, "Rolling migration"): which states a
// storage opened with `key_layout=envoyproxy` keeps in that service's keys. The gRPC rule service
// (server/rls/service.cpp) and the Redis storage (storage/redis/envoyproxy.cpp) both ask this one
// predicate, so the service builds envoyproxy's key exactly for the policies the storage treats so.
//
// The key of such a state, as envoyproxy/ratelimit writes it (its limiter/cache_key.go):
//     CACHE_KEY_PREFIX + domain + "_" + (entry key + "_" + entry value + "_") per entry
//                      + window start (unix seconds, floored to the unit)
// holding a plain decimal count (INCRBY) with a TTL of one unit (EXPIRE). A share_threshold
// entry contributes the configured wildcard pattern instead of the request's value. The service
// passes everything between the prefix and the window start as the user key; the storage adds
// the prefix and the window start. The layout is envoyproxy's, so it is not injective (a '_' in a
// domain, key or value can make two descriptors meet): exactly as under envoyproxy/ratelimit.
#pragma once

#include "floodgate/policy.hpp"

namespace floodgate {

/// Whether `policy` counts in envoyproxy/ratelimit's keys when the storage uses that layout: a
/// rule of the gRPC service (or a request's override of one), fixed window aligned to the clock,
/// one limit whose period is a whole number of seconds (envoyproxy's units always are). Every
/// other policy (HTTP policies, other algorithms, first-hit windows, multi-limits, calendar
/// periods, which envoyproxy/ratelimit does not have) keeps floodgate's own keys.
[[nodiscard]] inline bool envoyproxy_window(const Policy& policy) noexcept {
  return (policy.kind() == PolicyKind::kRule || policy.kind() == PolicyKind::kRuleOverride) &&
         policy.strategy() == Strategy::kFixedWindow && policy.anchor() == Anchor::kClock &&
         policy.limits().size() == 1 && policy.limits()[0].period % kMicrosPerSecond == 0 &&
         !policy.limits()[0].calendar;
}

}  // namespace floodgate
