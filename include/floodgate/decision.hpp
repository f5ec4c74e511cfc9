// floodgate/decision.hpp — what a rate limiter answers.
#pragma once

#include <cstdint>

#include "floodgate/clock.hpp"

namespace floodgate {

/// The answer to one request against one key of a policy.
///
/// All durations are microseconds from the time of the decision. For a policy with several limits
/// the figures are combined: `remaining` is the minimum over the limits, `retry_after` the maximum
/// over the limits that denied, `reset_after` and `delay` the maximum over all limits; `limit` and
/// `period` name the most constraining limit (the first with the least remaining), and
/// `limit_reset_after` is that limit's own reset.
struct Decision {
  /// Whether the request is admitted. A denied request consumed nothing.
  bool allowed = false;
  /// The amount of the most constraining limit (for headers such as X-RateLimit-Limit).
  std::int64_t limit = 0;
  /// The period of the most constraining limit.
  Micros period = 0;
  /// How many more unit-cost requests would be admitted now, after this decision.
  std::int64_t remaining = 0;
  /// Time until the key is back to full capacity (0 if it already is).
  Micros reset_after = 0;
  /// For a policy with several limits: the `reset_after` of the limit that `limit` and `period`
  /// name (the RateLimit header's `t` is that limit's). 0 for a policy with one limit, whose
  /// `reset_after` it is.
  Micros limit_reset_after = 0;
  /// 0 when allowed. When denied: the shortest wait after which the same request would be allowed
  /// if nothing else happened (never early); `kNever` if its cost exceeds a limit's capacity.
  Micros retry_after = 0;
  /// Leaky bucket as a shaper: how long the caller should wait before acting, so that admitted
  /// requests leave at a constant rate. 0 for every other strategy and for denied requests.
  Micros delay = 0;
  /// The storage failed and the policy's failure mode decided instead of the algorithm.
  bool degraded = false;

  /// True when `retry_after` is finite.
  [[nodiscard]] bool can_retry() const noexcept { return retry_after != kNever; }
};

/// Combines the decision for one more limit of a multi-limit policy into `into` (see Decision).
/// `first` is true for the first limit. For a later limit, `into.limit_reset_after` must already
/// hold the reset of the limit `into` names (the first limit's: its `reset_after`).
void combine(Decision& into, const Decision& one, bool first) noexcept;

}  // namespace floodgate
