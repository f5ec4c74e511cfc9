// floodgate/budget.hpp — the options and the counters of budget slices (docs/algorithms.md).
#pragma once

#include <cstdint>

#include "floodgate/clock.hpp"

namespace floodgate {

/// Budget slices (docs/algorithms.md, "Budget slices"): a Limiter takes a slice of a key's
/// budget from the storage in one call (a reservation of the slice's units, charged in full) and
/// admits requests against it locally until it is spent, then takes the next; what it did not use
/// goes back (a settle of the units used) when the slice ends. For a key hotter than one store
/// shard can decide, shared by several processes. Off by default (`max_slice` 0).
///
/// The slice is about what this Limiter used of the key in one `interval`, at most `max_slice`
/// and at most the key's remaining budget / `share` (so near the limit the instances share what
/// is left); when that is under two requests' cost no slice is taken: the request takes the exact
/// path (one storage call, as without slices). Fixed window (clock-aligned, calendar periods too),
/// sliding window counter, token bucket and GCRA only; Policy::make refuses the others.
/// The bounds of BudgetOptions (Policy::make and the configuration's budget_slice check them).
inline constexpr Micros kMinBudgetInterval = 1000;                       ///< 1 ms
inline constexpr Micros kMaxBudgetInterval = 3600 * kMicrosPerSecond;  ///< 1 hour
inline constexpr std::int64_t kMaxBudgetShare = 1000;

struct BudgetOptions {
  /// The most units one slice may hold (1 to 2^53; 0 = slices off). Bounds what slices hold back
  /// from other instances: at most instances × max_slice units.
  std::int64_t max_slice = 0;
  /// A slice ends at most this long after it was taken (and at the end of its window), and the
  /// slice is sized on the demand seen in one interval. 1 ms to 1 hour.
  Micros interval = kMicrosPerSecond / 10;
  /// A slice is at most the remaining budget / share (1 to 1000).
  std::int64_t share = 4;
};

/// What a Limiter's budget slices did since its construction (PolicyOptions::budget).
struct BudgetStats {
  std::uint64_t local = 0;        ///< hits admitted against a slice, without a storage call
  std::uint64_t store_calls = 0;  ///< storage calls made for slices (take the next, settle)
  std::uint64_t slices = 0;       ///< slices taken
  std::int64_t held = 0;          ///< units now in this Limiter's slices, unused (a gauge)
};

}  // namespace floodgate
