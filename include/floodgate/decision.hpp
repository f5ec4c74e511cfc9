// floodgate/decision.hpp — what a rate limiter answers.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "floodgate/clock.hpp"

namespace floodgate {

/// What a settle did with its reservation id (Storage::settle, Limiter::settle and release, and a
/// reserve-or-settle that settled). Every storage reports it from inside the same atomic step.
enum class SettleOutcome : std::uint8_t {
  kNone = 0,            ///< the decision is not a settle's
  kSettled = 1,         ///< the id was outstanding: the state is what the actual usage makes it
  kUnknown = 2,         ///< the id is not known (never reserved, mistyped, or expired): the actual
                        ///< usage was charged now (a lease: nothing freed)
  kAlreadySettled = 3,  ///< the id was settled before: nothing changed, whatever this actual
};

/// The most limits a decision reports one by one (a policy's limit count, kMaxLimitsPerPolicy).
inline constexpr std::size_t kMaxLimitBalances = 16;

/// One limit's own figures within a decision of a policy with several limits.
struct LimitBalance {
  std::int64_t remaining = 0;  ///< as Decision::remaining, for this limit alone
  Micros reset_after = 0;      ///< as Decision::reset_after, for this limit alone
};

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
  /// For a policy with several limits: each limit's own remaining and reset, in the policy's
  /// order (`balance_count` of them, filled by `combine`). 0 for a policy with one limit (the
  /// decision's own figures are its), and for a decision the storage did not make (a fail mode's).
  std::uint8_t balance_count = 0;
  std::array<LimitBalance, kMaxLimitBalances> balances{};
  /// A settle's: what happened to the reservation id. kNone for every other decision.
  SettleOutcome settle = SettleOutcome::kNone;

  /// True when `retry_after` is finite.
  [[nodiscard]] bool can_retry() const noexcept { return retry_after != kNever; }
};

/// Combines the decision for one more limit of a multi-limit policy into `into` (see Decision),
/// and records each limit's own figures in `balances` (the first's at the second's combine).
/// `first` is true for the first limit. For a later limit, `into.limit_reset_after` must already
/// hold the reset of the limit `into` names (the first limit's: its `reset_after`).
void combine(Decision& into, const Decision& one, bool first) noexcept;

}  // namespace floodgate
