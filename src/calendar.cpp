// Calendar periods in an IANA time zone (rate.hpp, docs/algorithms.md "Calendar periods").
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "absl/status/status.h"
#include "absl/time/civil_time.h"
#include "floodgate/rate.hpp"

namespace floodgate {

namespace {

constexpr Micros kDay = 24 * 3600 * kMicrosPerSecond;

// The civil day a month's period starts on: its anchor day, or its last day if it has fewer.
absl::CivilDay month_start(absl::CivilMonth m, int anchor) {
  const absl::CivilDay last = absl::CivilDay(m + 1) - 1;
  return absl::CivilDay(m.year(), m.month(), std::min(anchor, last.day()));
}

// The first civil day of the period whose days include `d`.
absl::CivilDay first_day(const Calendar& c, absl::CivilDay d) {
  switch (c.unit) {
    case CalendarUnit::kDay:
      return d;
    case CalendarUnit::kWeek:
      return absl::GetWeekday(d) == absl::Weekday::monday ? d
                                                          : absl::PrevWeekday(d, absl::Weekday::monday);
    case CalendarUnit::kMonth: {
      const absl::CivilMonth m(d);
      const absl::CivilDay s = month_start(m, c.anchor_day);
      return d >= s ? s : month_start(m - 1, c.anchor_day);
    }
    case CalendarUnit::kYear:
    case CalendarUnit::kNone:
      break;
  }
  return absl::CivilDay(absl::CivilYear(d));
}

// The first civil day of the period after the one starting on `s` (a period's first day).
absl::CivilDay next_day(const Calendar& c, absl::CivilDay s) {
  switch (c.unit) {
    case CalendarUnit::kDay:
      return s + 1;
    case CalendarUnit::kWeek:
      return s + 7;
    case CalendarUnit::kMonth:
      return month_start(absl::CivilMonth(s) + 1, c.anchor_day);
    case CalendarUnit::kYear:
    case CalendarUnit::kNone:
      break;
  }
  return absl::CivilDay(absl::CivilYear(s) + 1);
}

absl::CivilDay prev_day(const Calendar& c, absl::CivilDay s) { return first_day(c, s - 1); }

// The instant a period starting on civil day `d` starts: the first instant whose local time is
// at or past d 00:00. Midnight in a DST gap: the gap's end (`trans`); midnight twice: the first.
Micros instant(const Calendar& c, absl::CivilDay d) {
  const absl::TimeZone::TimeInfo ti = c.zone.At(absl::CivilSecond(d));
  const absl::Time t = ti.kind == absl::TimeZone::TimeInfo::SKIPPED ? ti.trans : std::min(ti.pre, ti.post);
  return absl::ToUnixMicros(t);
}

// Whether `name` is spelt as an IANA zone (letters, digits, '_', '+', '-', non-empty parts
// joined by '/', at most 64 bytes) and is a file of the zoneinfo directory ($TZDIR, else
// /usr/share/zoneinfo); "UTC" needs no file. Checked before abseil loads a zone: abseil keeps
// every name it was asked for in a process-wide cache, also names it could not load, so a name
// from a request (an inline limit) must not reach it unless it is one of the system's few
// thousand zones; and a path ("/dev/stdin", "../x") must never be opened.
bool zone_file_exists(std::string_view name) {
  if (name == "UTC") return true;
  if (name.empty() || name.size() > 64 || name.front() == '/' || name.back() == '/') return false;
  char prev = '/';
  for (const char ch : name) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                    ch == '_' || ch == '+' || ch == '-' || ch == '/';
    if (!ok || (ch == '/' && prev == '/')) return false;
    prev = ch;
  }
  const char* dir = std::getenv("TZDIR");
  std::error_code ec;
  const auto path = std::filesystem::path(dir != nullptr && *dir != '\0' ? dir : "/usr/share/zoneinfo") / name;
  return std::filesystem::is_regular_file(path, ec);
}

}  // namespace

const char* to_string(CalendarUnit unit) noexcept {
  switch (unit) {
    case CalendarUnit::kDay: return "day";
    case CalendarUnit::kWeek: return "week";
    case CalendarUnit::kMonth: return "month";
    case CalendarUnit::kYear: return "year";
    case CalendarUnit::kNone: break;
  }
  return "";
}

absl::StatusOr<Calendar> Calendar::make(CalendarUnit unit, std::string_view zone, int anchor_day) {
  if (unit == CalendarUnit::kNone) {
    return absl::InvalidArgumentError("a calendar needs a unit: day, week, month or year");
  }
  if (anchor_day < 1 || anchor_day > 31) {
    return absl::InvalidArgumentError(
        fmt::format("anchor day {} is out of range: expected a day of the month from 1 to 31", anchor_day));
  }
  if (anchor_day != 1 && unit != CalendarUnit::kMonth) {
    return absl::InvalidArgumentError(fmt::format(
        "anchor day {} applies to calendar months only, not to a calendar {}", anchor_day, to_string(unit)));
  }
  if (zone == "localtime") {
    return absl::InvalidArgumentError(
        "time zone \"localtime\" depends on the machine: name an IANA zone such as Europe/Berlin, or UTC");
  }
  Calendar c;
  c.unit = unit;
  c.anchor_day = static_cast<std::uint8_t>(anchor_day);
  if (!zone_file_exists(zone) || !absl::LoadTimeZone(std::string(zone), &c.zone)) {
    return absl::InvalidArgumentError(fmt::format(
        "unknown time zone \"{}\": expected an IANA name such as Europe/Berlin or UTC, found in the system's "
        "zoneinfo (/usr/share/zoneinfo, Debian's tzdata)",
        zone));
  }
  return c;
}

Micros Calendar::nominal_period() const noexcept { return floodgate::nominal_period(unit); }

Micros nominal_period(CalendarUnit unit) noexcept {
  switch (unit) {
    case CalendarUnit::kDay: return kDay;
    case CalendarUnit::kWeek: return 7 * kDay;
    case CalendarUnit::kMonth: return 30 * kDay;
    case CalendarUnit::kYear: return 365 * kDay;
    case CalendarUnit::kNone: break;
  }
  return 0;
}

Period Calendar::period_at(Micros t) const noexcept {
  // The period whose days hold t's local date, then corrected by at most a step either way: a
  // clock set back across midnight shows an earlier date after the next period has started, and
  // a period's start is defined by instants, not by dates.
  absl::CivilDay d = first_day(*this, absl::CivilDay(zone.At(absl::FromUnixMicros(t)).cs));
  Micros start = instant(*this, d);
  for (int i = 0; i < 4 && start > t; ++i) {
    d = prev_day(*this, d);
    start = instant(*this, d);
  }
  absl::CivilDay n = next_day(*this, d);
  Micros end = instant(*this, n);
  for (int i = 0; i < 4 && end <= t; ++i) {
    start = end;
    n = next_day(*this, n);
    end = instant(*this, n);
  }
  return {start, end};
}

}  // namespace floodgate
