// floodgate/rate.hpp — a rate limit ("10/minute") and the parser of the `limits` notation.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "floodgate/clock.hpp"

namespace floodgate {

/// The largest amount, burst or cost accepted: 2^53, the largest integer a double (and so a Redis
/// Lua number) holds exactly. Larger values are rejected when parsed, never rounded.
inline constexpr std::int64_t kMaxAmount = std::int64_t{1} << 53;

/// The longest period accepted: 2^53 µs (about 285 years).
inline constexpr Micros kMaxPeriod = Micros{1} << 53;

/// One limit: `amount` units per `period`, and for the bucket algorithms (token bucket, leaky
/// bucket, GCRA) a `burst` capacity. Invariants (checked by `parse_limits` and `Limit::make`):
/// 1 ≤ amount ≤ kMaxAmount, 1 µs ≤ period ≤ kMaxPeriod, 0 ≤ burst ≤ kMaxAmount (0 = "amount").
struct Limit {
  std::int64_t amount = 1;
  Micros period = kMicrosPerSecond;
  /// Bucket capacity; 0 means "the amount". Ignored by the window algorithms.
  std::int64_t burst = 0;

  /// The bucket capacity in use: `burst` if set, else `amount`.
  [[nodiscard]] std::int64_t capacity() const noexcept { return burst > 0 ? burst : amount; }

  /// Validates and builds a limit; the error names the offending value.
  static absl::StatusOr<Limit> make(std::int64_t amount, Micros period, std::int64_t burst = 0);

  friend bool operator==(const Limit&, const Limit&) = default;
};

/// Parses one or more limits in the notation of Python's `limits` library, joined by `;`, `,` or
/// `|`:
///
///     10/minute   10 per minute   5 per 2 seconds   100/hour   2/second; 10/minute
///
/// Units (singular or plural, case-insensitive): microsecond (us), millisecond (ms),
/// second (s, sec), minute (min), hour (h, hr), day (d), month (= 30 days), year (= 360 days, as
/// `limits` defines it). An optional ` burst N` after a limit sets its bucket capacity
/// ("10/second burst 50").
///
/// Errors: InvalidArgument with a message that quotes the offending text and says what was
/// expected. The amount, the count of periods and the burst must be integers in [1, 2^53]; the
/// resulting period must be at most 2^53 µs. An empty string is an error.
absl::StatusOr<std::vector<Limit>> parse_limits(std::string_view text);

/// Renders a limit back into the notation, e.g. "10/minute", "5 per 2 second", "3/second burst 5".
std::string to_string(const Limit& limit);

/// Renders several limits joined by "; ".
std::string to_string(const std::vector<Limit>& limits);

}  // namespace floodgate
