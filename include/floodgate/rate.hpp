// floodgate/rate.hpp — a rate limit ("10/minute") and the parser of the `limits` notation.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "floodgate/clock.hpp"

namespace floodgate {

/// The largest amount, burst or cost accepted: 2^53, the largest integer a double (and so a Redis
/// Lua number) holds exactly. Larger values are rejected when parsed, never rounded.
inline constexpr std::int64_t kMaxAmount = std::int64_t{1} << 53;

/// The longest period accepted: 2^53 µs (about 285 years).
inline constexpr Micros kMaxPeriod = Micros{1} << 53;

/// The unit of a calendar period.
enum class CalendarUnit : std::uint8_t {
  kNone,   ///< not a calendar limit: windows of `Limit::period` aligned to the Unix epoch
  kDay,    ///< from 00:00 local time to the next day's 00:00 (23, 24 or 25 hours across DST)
  kWeek,   ///< ISO week: from Monday 00:00 local time to the next Monday's
  kMonth,  ///< from the anchor day 00:00 of a month to the anchor day of the next
  kYear,   ///< from January 1st 00:00 local time to the next January 1st
};

/// The nominal length of a calendar unit: day 24 h, week 7 days, month 30 days, year 365 days
/// (0 for kNone). Calendar::nominal_period, and Envoy's units of the same names.
Micros nominal_period(CalendarUnit unit) noexcept;

/// Half-open interval of time [start, end) in µs since the Unix epoch.
struct Period {
  Micros start = 0;
  Micros end = 0;
  friend bool operator==(const Period&, const Period&) = default;
};

/// Periods aligned to a calendar in an IANA time zone (docs/algorithms.md, "Calendar periods").
/// Period k starts at the first instant whose local civil time is at or past its first day's
/// 00:00: when that midnight does not exist (a DST gap), at the end of the gap; when it occurs
/// twice, at its first occurrence. A month starts on `anchor_day` (1–31) or, in a month with
/// fewer days, on its last day (anchor 31: Jan 31, Feb 28/29, Mar 31, Apr 30, …).
///
/// A value type: 16 bytes, cheap to copy (the zone is a pointer into abseil's process-wide
/// cache of loaded zones, never freed), thread-safe to share. Build it with `make`.
struct Calendar {
  CalendarUnit unit = CalendarUnit::kNone;
  /// Months only: the day of the month periods start on, 1–31 (1 for every other unit).
  std::uint8_t anchor_day = 1;
  /// The zone whose local time the periods follow (UTC unless set).
  absl::TimeZone zone = absl::UTCTimeZone();

  /// Whether this is a calendar at all (unit ≠ kNone).
  explicit operator bool() const noexcept { return unit != CalendarUnit::kNone; }

  /// Loads `zone` (an IANA name such as "Europe/Berlin", or "UTC") from the system's zoneinfo
  /// (Debian's tzdata) and builds the calendar. Errors (InvalidArgument, naming the value): unit
  /// kNone, an unknown zone or "localtime" (which would differ between machines), an anchor day
  /// outside 1–31, an anchor day other than 1 for a unit that is not kMonth.
  static absl::StatusOr<Calendar> make(CalendarUnit unit, std::string_view zone, int anchor_day = 1);

  /// The nominal length of a period, reported as the limit's window in headers: day 24 h,
  /// week 7 days, month 30 days, year 365 days (0 for kNone). The periods themselves come from
  /// the calendar and may be longer or shorter.
  [[nodiscard]] Micros nominal_period() const noexcept;

  /// The period that holds `t`: start ≤ t < end, both instants being period starts as defined
  /// above. Precondition: *this (unit ≠ kNone), |t| ≤ 2^53 µs. Pure, no allocation, thread-safe;
  /// a few zone lookups: about 0.15 µs for a day, 0.5 µs for a month (-O2, one core).
  [[nodiscard]] Period period_at(Micros t) const noexcept;

  friend bool operator==(const Calendar&, const Calendar&) = default;
};

/// "day", "week", "month", "year" ("" for kNone).
const char* to_string(CalendarUnit unit) noexcept;

/// One limit: `amount` units per `period`, and for the bucket algorithms (token bucket, leaky
/// bucket, GCRA) a `burst` capacity. Invariants (checked by `parse_limits` and `Limit::make`):
/// 1 ≤ amount ≤ kMaxAmount, 1 µs ≤ period ≤ kMaxPeriod, 0 ≤ burst ≤ kMaxAmount (0 = "amount").
///
/// A calendar limit ("1000 per calendar month in Europe/Berlin") sets `calendar`; its windows are
/// the calendar's periods and `period` is the calendar's nominal length (for headers and
/// messages). Only the clock-aligned fixed window runs calendar limits (Policy::make refuses
/// them elsewhere).
struct Limit {
  /// One unit per second.
  Limit() = default;
  /// The fields as given, unchecked (`make` checks them).
  Limit(std::int64_t amount_, Micros period_, std::int64_t burst_ = 0, Calendar calendar_ = {}) noexcept
      : amount(amount_), period(period_), burst(burst_), calendar(calendar_) {}

  std::int64_t amount = 1;
  Micros period = kMicrosPerSecond;
  /// Bucket capacity; 0 means "the amount". Ignored by the window algorithms.
  std::int64_t burst = 0;
  /// Calendar periods instead of epoch-aligned ones (unit kNone: none, the default).
  Calendar calendar;
  /// A concurrency limit ("20 concurrent for 5 minutes"): at most `amount` leases outstanding at
  /// once, each freeing itself `period` after it was taken (or last renewed) unless released
  /// first. Only the concurrency strategy runs it, and runs nothing else (Policy::make).
  bool concurrent = false;

  /// The bucket capacity in use: `burst` if set, else `amount`.
  [[nodiscard]] std::int64_t capacity() const noexcept { return burst > 0 ? burst : amount; }

  /// The fixed window holding `t`: the calendar's period, or [k·period, (k+1)·period) aligned
  /// to the Unix epoch. Precondition: a valid limit, 0 ≤ t ≤ 2^53 µs.
  [[nodiscard]] Period window_at(Micros t) const noexcept {
    if (calendar) return calendar.period_at(t);
    const Micros start = (t / period - (t % period < 0 ? 1 : 0)) * period;  // ⌊t / period⌋·period
    return {start, start + period};
  }

  /// Validates and builds a limit; the error names the offending value.
  static absl::StatusOr<Limit> make(std::int64_t amount, Micros period, std::int64_t burst = 0);
  /// A calendar limit: `period` is the calendar's nominal period. Precondition: a calendar made
  /// by Calendar::make.
  static absl::StatusOr<Limit> make(std::int64_t amount, const Calendar& calendar,
                                    std::int64_t burst = 0);
  /// A concurrency limit: at most `amount` leases at once, each living `lease_ttl` (1 µs to 2^53
  /// µs; kDefaultLeaseTtl unless given).
  static absl::StatusOr<Limit> concurrency(std::int64_t amount, Micros lease_ttl);

  friend bool operator==(const Limit&, const Limit&) = default;
};

/// The time to live of a lease when a concurrency limit does not give one ("20 concurrent").
inline constexpr Micros kDefaultLeaseTtl = 60 * kMicrosPerSecond;
/// The longest time to live of a lease (`N concurrent for 1 day`), as of a reservation.
inline constexpr Micros kMaxLeaseTtl = Micros{24} * 3600 * kMicrosPerSecond;

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
/// Calendar periods (Calendar) are written with the word `calendar` before the unit, one of day,
/// week, month, year (one unit: no count), then optionally, in any order, `in <IANA zone>`
/// (default UTC; the zone name is case-sensitive) and, for months, `anchored <day 1–31>`
/// (default 1):
///
///     1000000 per calendar month in Europe/Berlin anchored 31     500/calendar day in UTC
///
/// A concurrency limit (Limit::concurrent) is written `N concurrent`, optionally followed by
/// `for [count] <unit>`, the time to live of a lease (default kDefaultLeaseTtl, one minute; at most
/// kMaxLeaseTtl, one day; units from microsecond to day):
///
///     20 concurrent     20 concurrent for 5 minutes     4 concurrent for 90 seconds
///
/// Errors: InvalidArgument with a message that quotes the offending text and says what was
/// expected. The amount, the count of periods and the burst must be integers in [1, 2^53]; the
/// resulting period must be at most 2^53 µs. An empty string is an error.
absl::StatusOr<std::vector<Limit>> parse_limits(std::string_view text);

/// Renders a limit back into the notation, e.g. "10/minute", "5 per 2 seconds", "3/second burst 5",
/// "1000/calendar month in Europe/Berlin anchored 31" (a calendar limit always names its zone,
/// and its anchor when not 1), "20 concurrent for 5 minutes" (always with its time to live). parse_limits(to_string(l)) gives back `l`.
std::string to_string(const Limit& limit);

/// Renders several limits joined by "; ".
std::string to_string(const std::vector<Limit>& limits);

}  // namespace floodgate
