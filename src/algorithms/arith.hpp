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

/// A non-negative 128-bit duration narrowed to Micros, saturating at kNever - 1 (a finite time).
constexpr Micros clamp_micros(i128 d) noexcept {
  if (d <= 0) return 0;
  if (d >= static_cast<i128>(kNever - 1)) return kNever - 1;
  return static_cast<Micros>(d);
}

}  // namespace floodgate::detail
