// Exact integer helpers shared by the algorithms.
#pragma once

#include <cstdint>
#include <limits>

#include "floodgate/algorithms.hpp"

namespace floodgate::detail {

using i128 = int128;

/// a / b (truncating) for a ≥ 0, b > 0; 64-bit division when both fit, which is the common case
/// and several times faster than a 128-bit division.
constexpr i128 div(i128 a, i128 b) noexcept {
  constexpr i128 kMax64 = static_cast<i128>(INT64_MAX);
  if (a <= kMax64 && b <= kMax64) {
    return static_cast<std::int64_t>(a) / static_cast<std::int64_t>(b);
  }
  return a / b;
}

/// ⌈a / b⌉ for a ≥ 0, b > 0.
constexpr i128 ceil_div(i128 a, i128 b) noexcept {
  const i128 q = div(a, b);
  return q * b == a ? q : q + 1;
}

/// ⌊a / b⌋ for any a, b > 0.
constexpr std::int64_t floor_div(std::int64_t a, std::int64_t b) noexcept {
  const std::int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

/// Start of the epoch-aligned window of length `period` that contains `t`.
constexpr Micros window_start(Micros t, Micros period) noexcept {
  return floor_div(t, period) * period;
}

/// The ceiling of every count of units an algorithm keeps (a fixed window's count, a sliding
/// window's buckets, a moving window's total): 2^53, the largest amount. Each amount from outside
/// (a cost, a settle's delta) is at most 2^53, but their sum is not: 1,024 settles of 2^53 would
/// pass 2^63. A count saturates here instead, which is still past every limit's amount (a key that
/// holds it is denied until its window passes) and which the Redis scripts' doubles hold exactly
/// (common.lua's sat_add mirrors sat_add; docs/algorithms.md §4).
inline constexpr std::int64_t kMaxCount = kMaxAmount;

/// count + delta clamped to [0, kMaxCount], for any 64-bit operands (no overflow). With
/// 0 ≤ count ≤ kMaxCount and |delta| ≤ kMaxAmount, as the algorithms call it, the sum is exact
/// below the ceiling.
constexpr std::int64_t sat_add(std::int64_t count, std::int64_t delta) noexcept {
  std::int64_t sum = 0;
  if (__builtin_add_overflow(count, delta, &sum)) return delta > 0 ? kMaxCount : 0;
  return sum < 0 ? 0 : (sum > kMaxCount ? kMaxCount : sum);
}

/// A non-negative 128-bit duration narrowed to Micros, saturating at kNever - 1 (a finite time).
constexpr Micros clamp_micros(i128 d) noexcept {
  if (d <= 0) return 0;
  if (d >= static_cast<i128>(kNever - 1)) return kNever - 1;
  return static_cast<Micros>(d);
}

}  // namespace floodgate::detail
