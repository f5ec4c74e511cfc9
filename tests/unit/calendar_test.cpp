// Calendar periods (rate.hpp's Calendar): where each period starts, in UTC and in local time,
// across DST changes, short months, ISO weeks and years; the fixed window's decisions on them; the
// notation and its errors; the strategies that refuse them. The worked examples of
// docs/algorithms.md, "Calendar periods", are the tests marked "docs".
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "floodgate/algorithms.hpp"
#include "floodgate/memory_storage.hpp"
#include "floodgate/policy.hpp"
#include "floodgate/rate.hpp"

namespace floodgate {
namespace {

constexpr Micros kHour = 3600 * kMicrosPerSecond;
constexpr Micros kDay = 24 * kHour;

// An instant written in UTC.
Micros utc(int y, int mo, int d, int h = 0, int mi = 0) {
  return absl::ToUnixMicros(absl::FromCivil(absl::CivilSecond(y, mo, d, h, mi, 0), absl::UTCTimeZone()));
}

Calendar calendar(CalendarUnit unit, std::string_view zone, int anchor = 1) {
  auto c = Calendar::make(unit, zone, anchor);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : Calendar{};
}

// The local civil time of `t` in the calendar's zone, and its UTC offset in hours.
std::string local(const Calendar& c, Micros t) {
  const auto info = c.zone.At(absl::FromUnixMicros(t));
  return absl::FormatCivilTime(info.cs) + (info.offset == 3600 ? " +01" : info.offset == 7200 ? " +02" : " other");
}

Limit one(std::string_view text) {
  auto parsed = parse_limits(text);
  EXPECT_TRUE(parsed.ok()) << text << ": " << parsed.status();
  if (!parsed.ok() || parsed->size() != 1) return {};
  return parsed->front();
}

std::string error_of(std::string_view text) {
  auto parsed = parse_limits(text);
  EXPECT_FALSE(parsed.ok()) << text << " parsed as " << (parsed.ok() ? to_string(*parsed) : "");
  return parsed.ok() ? "" : std::string(parsed.status().message());
}

// A month of simulated traffic across a DST change in Europe/Berlin with a billing anchor of the
// 31st: one request an hour from 2027-01-30 to 2027-05-02 through the fixed window; every period
// start it meets, as an instant and as local time (docs).
TEST(CalendarPeriods, BerlinBillingMonthAnchoredOn31stAcrossDst) {
  const Limit limit = one("1000000 per calendar month in Europe/Berlin anchored 31");
  ASSERT_TRUE(limit.calendar);
  const auto policy = Policy::make("billing", Strategy::kFixedWindow, std::vector<Limit>{limit}).value();
  MemoryStorage storage;
  std::vector<Micros> starts;
  std::vector<Micros> ends;
  std::int64_t in_period = 0;
  for (Micros t = utc(2027, 1, 30); t <= utc(2027, 5, 2); t += kHour) {
    const Period p = limit.window_at(t);
    ASSERT_LE(p.start, t);
    ASSERT_LT(t, p.end);
    if (starts.empty() || starts.back() != p.start) {
      starts.push_back(p.start);
      ends.push_back(p.end);
      in_period = 0;
    }
    const Decision d = storage.apply(policy, "tenant", 1, Effect::kHit, t).value();
    ++in_period;
    ASSERT_TRUE(d.allowed);
    ASSERT_EQ(d.remaining, 1000000 - in_period) << local(limit.calendar, t);  // counts restart at each start
    ASSERT_EQ(d.reset_after, p.end - t);
    ASSERT_EQ(d.period, 30 * kDay);  // the nominal length, for headers
  }
  const std::vector<Micros> want{utc(2026, 12, 30, 23), utc(2027, 1, 30, 23), utc(2027, 2, 27, 23),
                                 utc(2027, 3, 30, 22), utc(2027, 4, 29, 22)};
  EXPECT_EQ(starts, want);
  const std::vector<std::string> local_starts{"2026-12-31T00:00:00 +01", "2027-01-31T00:00:00 +01",
                                              "2027-02-28T00:00:00 +01", "2027-03-31T00:00:00 +02",
                                              "2027-04-30T00:00:00 +02"};
  for (std::size_t i = 0; i < starts.size() && i < local_starts.size(); ++i) {
    EXPECT_EQ(local(limit.calendar, starts[i]), local_starts[i]);
    if (i + 1 < starts.size()) {
      EXPECT_EQ(ends[i], starts[i + 1]);
    }
  }
  EXPECT_EQ(ends.back(), utc(2027, 5, 30, 22));  // May 31 00:00 +02
  // Feb 28 → Mar 31 holds the change to summer time (Mar 28): 31 days less an hour.
  EXPECT_EQ(starts[3] - starts[2], 31 * kDay - kHour);
}

TEST(CalendarPeriods, DaysAcrossDstAre23And25Hours) {
  const Calendar day = calendar(CalendarUnit::kDay, "Europe/Berlin");
  const Period spring = day.period_at(utc(2027, 3, 28, 12));
  EXPECT_EQ(spring.start, utc(2027, 3, 27, 23));
  EXPECT_EQ(spring.end, utc(2027, 3, 28, 22));
  EXPECT_EQ(spring.end - spring.start, 23 * kHour);
  const Period autumn = day.period_at(utc(2027, 10, 31, 12));
  EXPECT_EQ(autumn.start, utc(2027, 10, 30, 22));
  EXPECT_EQ(autumn.end, utc(2027, 10, 31, 23));
  EXPECT_EQ(autumn.end - autumn.start, 25 * kHour);
  EXPECT_EQ(local(day, autumn.end), "2027-11-01T00:00:00 +01");
  // Both ends are inclusive-exclusive: the last microsecond of a day is in it, its end is not.
  EXPECT_EQ(day.period_at(spring.end - 1), spring);
  EXPECT_EQ(day.period_at(spring.end).start, spring.end);
  EXPECT_EQ(day.period_at(spring.start), spring);
}

TEST(CalendarPeriods, MidnightInAGapStartsTheDayAtTheGapsEnd) {
  // Asia/Beirut moves its clocks from 00:00 to 01:00 on the last Sunday of March: 2027-03-28
  // has no midnight, and its day starts at 01:00 local (22:00 UTC the day before).
  const Calendar beirut = calendar(CalendarUnit::kDay, "Asia/Beirut");
  const Period p = beirut.period_at(utc(2027, 3, 28, 6));
  EXPECT_EQ(p.start, utc(2027, 3, 27, 22));
  EXPECT_EQ(p.end - p.start, 23 * kHour);
  EXPECT_EQ(absl::FormatCivilTime(beirut.zone.At(absl::FromUnixMicros(p.start)).cs), "2027-03-28T01:00:00");
}

TEST(CalendarPeriods, MidnightTwiceStartsTheDayAtItsFirstOccurrence) {
  // America/Havana sets its clocks back from 01:00 to 00:00 on the first Sunday of November:
  // 2027-11-07 00:00 happens twice, first at -04:00 (04:00 UTC); the day lasts 25 hours.
  const Calendar havana = calendar(CalendarUnit::kDay, "America/Havana");
  const Period p = havana.period_at(utc(2027, 11, 7, 4, 30));
  EXPECT_EQ(p.start, utc(2027, 11, 7, 4));
  EXPECT_EQ(p.end, utc(2027, 11, 8, 5));
  EXPECT_EQ(havana.period_at(utc(2027, 11, 7, 5, 30)), p);  // 00:30 again, same day
}

TEST(CalendarPeriods, ADayTheZoneSkipsHasNoPeriod) {
  // Pacific/Apia went from 2011-12-29 23:59:59 -10:00 to 2011-12-31 00:00:00 +14:00: Dec 29 runs
  // into Dec 31, and no instant is in a period of Dec 30.
  const Calendar apia = calendar(CalendarUnit::kDay, "Pacific/Apia");
  EXPECT_EQ(apia.period_at(utc(2011, 12, 30, 9, 59)), (Period{utc(2011, 12, 29, 10), utc(2011, 12, 30, 10)}));
  EXPECT_EQ(apia.period_at(utc(2011, 12, 30, 10)), (Period{utc(2011, 12, 30, 10), utc(2011, 12, 31, 10)}));
  EXPECT_EQ(absl::FormatCivilTime(apia.zone.At(absl::FromUnixMicros(utc(2011, 12, 30, 10))).cs), "2011-12-31T00:00:00");
}

TEST(CalendarPeriods, IsoWeeksAcrossAYearBoundary) {
  const Calendar week = calendar(CalendarUnit::kWeek, "Europe/Berlin");
  // 2027-01-01 is a Friday: its ISO week runs from Monday 2026-12-28 to Monday 2027-01-04.
  const Period p = week.period_at(utc(2027, 1, 1, 11));
  EXPECT_EQ(p.start, utc(2026, 12, 27, 23));
  EXPECT_EQ(p.end, utc(2027, 1, 3, 23));
  EXPECT_EQ(local(week, p.start), "2026-12-28T00:00:00 +01");
  EXPECT_EQ(week.period_at(utc(2026, 12, 27, 22, 59)).end, p.start);  // Sunday 23:59 local
  // The week of the change to summer time is 7 days less an hour.
  const Period dst = week.period_at(utc(2027, 3, 28, 12));
  EXPECT_EQ(local(week, dst.start), "2027-03-22T00:00:00 +01");
  EXPECT_EQ(dst.end - dst.start, 7 * kDay - kHour);
}

TEST(CalendarPeriods, YearsAndLeapYears) {
  const Calendar year = calendar(CalendarUnit::kYear, "Europe/Berlin");
  const Period y2027 = year.period_at(utc(2027, 6, 1));
  EXPECT_EQ(y2027.start, utc(2026, 12, 31, 23));
  EXPECT_EQ(y2027.end, utc(2027, 12, 31, 23));
  const Period y2028 = year.period_at(y2027.end);
  EXPECT_EQ(y2028.end - y2028.start, 366 * kDay);
  const Calendar utc_year = calendar(CalendarUnit::kYear, "UTC");
  EXPECT_EQ(utc_year.period_at(utc(2027, 12, 31, 23, 59)), (Period{utc(2027, 1, 1), utc(2028, 1, 1)}));
}

TEST(CalendarPeriods, AnchorDayIsClampedToShortMonths) {
  // Anchor 30 in UTC: Jan 30, Feb 29 (2028 is a leap year), Mar 30; anchor 29 in 2027: Feb 28.
  const Calendar a30 = calendar(CalendarUnit::kMonth, "UTC", 30);
  EXPECT_EQ(a30.period_at(utc(2028, 2, 15)), (Period{utc(2028, 1, 30), utc(2028, 2, 29)}));
  EXPECT_EQ(a30.period_at(utc(2028, 3, 1)), (Period{utc(2028, 2, 29), utc(2028, 3, 30)}));
  const Calendar a29 = calendar(CalendarUnit::kMonth, "UTC", 29);
  EXPECT_EQ(a29.period_at(utc(2027, 3, 28)), (Period{utc(2027, 2, 28), utc(2027, 3, 29)}));
  // Anchor 1 is the calendar month.
  const Calendar a1 = calendar(CalendarUnit::kMonth, "UTC");
  EXPECT_EQ(a1.period_at(utc(2027, 2, 14)), (Period{utc(2027, 2, 1), utc(2027, 3, 1)}));
  // Anchor 15: a day before the anchor belongs to the period that started in the month before.
  const Calendar a15 = calendar(CalendarUnit::kMonth, "UTC", 15);
  EXPECT_EQ(a15.period_at(utc(2027, 1, 14, 23, 59)), (Period{utc(2026, 12, 15), utc(2027, 1, 15)}));
}

// Random instants from 1970 to 2100 in zones with odd rules (a skipped day, 30-minute DST,
// midnight in a gap or twice, half-hour offsets): periods tile the time line, and each starts at
// the first instant at or past local midnight of a first day of its unit.
TEST(CalendarPeriods, PeriodsTileTheTimeLineInZonesWithOddRules) {
  std::mt19937_64 rng(38);
  const Micros to = utc(2100, 1, 1);
  for (const char* zone : {"Europe/Berlin", "America/Havana", "Asia/Beirut", "Pacific/Apia", "Australia/Lord_Howe",
                           "America/Sao_Paulo", "Asia/Kolkata", "America/St_Johns", "UTC"}) {
    for (CalendarUnit unit : {CalendarUnit::kDay, CalendarUnit::kWeek, CalendarUnit::kMonth, CalendarUnit::kYear}) {
      const int anchor = unit == CalendarUnit::kMonth ? 1 + static_cast<int>(rng() % 31) : 1;
      const Calendar c = calendar(unit, zone, anchor);
      for (int i = 0; i < 300; ++i) {
        const Micros t = static_cast<Micros>(rng() % static_cast<std::uint64_t>(to));
        const Period p = c.period_at(t);
        const std::string where = std::string(zone) + " " + to_string(unit) + " anchor " + std::to_string(anchor) +
                                  " t " + std::to_string(t);
        ASSERT_LE(p.start, t) << where;
        ASSERT_LT(t, p.end) << where;
        ASSERT_EQ(c.period_at(p.start), p) << where;
        ASSERT_EQ(c.period_at(p.end - 1), p) << where;
        ASSERT_EQ(c.period_at(p.end).start, p.end) << where;
        const absl::CivilSecond at = c.zone.At(absl::FromUnixMicros(p.start)).cs;
        const absl::CivilDay d(at);
        ASSERT_GE(at, absl::CivilSecond(d)) << where;
        ASSERT_LT(c.zone.At(absl::FromUnixMicros(p.start - 1)).cs, absl::CivilSecond(d)) << where;
        switch (unit) {
          case CalendarUnit::kWeek:
            ASSERT_EQ(absl::GetWeekday(d), absl::Weekday::monday) << where;
            break;
          case CalendarUnit::kMonth: {
            const int last = (absl::CivilDay(absl::CivilMonth(d) + 1) - 1).day();
            ASSERT_EQ(d.day(), std::min(anchor, last)) << where;
            break;
          }
          case CalendarUnit::kYear:
            ASSERT_TRUE(d.month() == 1 && d.day() == 1) << where;
            break;
          default:
            break;
        }
      }
    }
  }
}

// docs: "3 per calendar month in Europe/Berlin anchored 31" on the fixed window, an hour before
// the period that starts Mar 31 00:00 CEST.
TEST(CalendarFixedWindow, DecisionsResetAtTheRealPeriodStart) {
  const Limit l = one("3 per calendar month in Europe/Berlin anchored 31");
  fixed_window::State s;
  const Micros t = utc(2027, 3, 30, 21);  // 23:00 local
  for (int i = 0; i < 3; ++i) {
    const Decision d = fixed_window::evaluate(s, l, t, 1);
    ASSERT_TRUE(d.allowed);
    EXPECT_EQ(d.remaining, 2 - i);
    EXPECT_EQ(d.reset_after, kHour);
    fixed_window::commit(s, l, t, 1);
  }
  EXPECT_EQ(s.start, utc(2027, 2, 27, 23));
  EXPECT_EQ(fixed_window::expires_at(s, l), utc(2027, 3, 30, 22));
  const Decision denied = fixed_window::evaluate(s, l, t, 1);
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.retry_after, kHour);
  EXPECT_EQ(denied.reset_after, kHour);
  EXPECT_EQ(fixed_window::evaluate(s, l, t, 4).retry_after, kNever);
  // At the period start the count is back to zero; the next reset is Apr 30 00:00 CEST.
  const Micros start = utc(2027, 3, 30, 22);
  const Decision d = fixed_window::evaluate(s, l, start, 1);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 2);
  EXPECT_EQ(d.reset_after, 30 * kDay);
  fixed_window::commit(s, l, start, 1);
  EXPECT_EQ(s.start, start);
  EXPECT_EQ(s.count, 1);
  EXPECT_EQ(fixed_window::expires_at(s, l), utc(2027, 4, 29, 22));
  // A clock stepped back into the earlier period: the key stays in its later one.
  const Decision back = fixed_window::evaluate(s, l, t, 1);
  EXPECT_TRUE(back.allowed);
  EXPECT_EQ(back.remaining, 1);
  EXPECT_EQ(back.reset_after, utc(2027, 4, 29, 22) - t);
}

TEST(CalendarNotation, ParsesAndPrintsBack) {
  const Limit l = one("1000000 per calendar month in Europe/Berlin anchored 31");
  EXPECT_EQ(l.amount, 1000000);
  EXPECT_EQ(l.period, 30 * kDay);
  EXPECT_EQ(l.calendar.unit, CalendarUnit::kMonth);
  EXPECT_EQ(l.calendar.anchor_day, 31);
  EXPECT_EQ(l.calendar.zone.name(), "Europe/Berlin");
  EXPECT_EQ(to_string(l), "1000000/calendar month in Europe/Berlin anchored 31");
  for (const char* text :
       {"1000000 per calendar month in Europe/Berlin anchored 31", "500/calendar day", "500/calendar day in UTC",
        "10 PER Calendar Week IN America/New_York", "1 / calendar year in Asia/Kolkata",
        "7/calendar month anchored 15", "7/calendar months in Etc/GMT+5", "10/second; 1000/calendar day in Europe/Berlin",
        "3/calendar day in America/Port-au-Prince burst 9"}) {
    auto parsed = parse_limits(text);
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.status();
    const std::string printed = to_string(*parsed);
    auto again = parse_limits(printed);
    ASSERT_TRUE(again.ok()) << printed << ": " << again.status();
    EXPECT_EQ(*again, *parsed) << text << " → " << printed;
    EXPECT_EQ(to_string(*again), printed);
  }
  EXPECT_EQ(to_string(one("500/calendar day")), "500/calendar day in UTC");
  EXPECT_EQ(one("1/calendar month anchored 31 in Europe/Berlin"), one("1/calendar month in Europe/Berlin anchored 31"));
  EXPECT_FALSE(one("1/calendar month in Europe/Berlin") == one("1/calendar month in Europe/Paris"));
  EXPECT_FALSE(one("1/calendar month") == one("1/month"));
  EXPECT_EQ(one("1/month").calendar.unit, CalendarUnit::kNone);  // the 30-day month stays
  EXPECT_EQ(one("1/month").period, 30 * kDay);
}

TEST(CalendarNotation, ErrorsNameTheText) {
  std::string e = error_of("1/calendar month in Europe/Berlim");
  EXPECT_NE(e.find("unknown time zone \"Europe/Berlim\""), std::string::npos) << e;
  EXPECT_NE(e.find("1/calendar month in Europe/Berlim"), std::string::npos) << e;
  e = error_of("1/calendar month anchored 32");
  EXPECT_NE(e.find("from 1 to 31 at \"32\""), std::string::npos) << e;
  e = error_of("1/calendar month anchored 0");
  EXPECT_NE(e.find("the anchor day must be at least 1"), std::string::npos) << e;
  e = error_of("1/calendar month anchored -1");  // the anchor's own range, not an amount's
  EXPECT_NE(e.find("the anchor day must be a whole number from 1 to 31 at \"-1\""), std::string::npos) << e;
  EXPECT_EQ(e.find("2^53"), std::string::npos) << e;
  e = error_of("1/calendar month anchored 99999999999999999999");
  EXPECT_NE(e.find("from 1 to 31"), std::string::npos) << e;
  e = error_of("1/calendar day in UTC anchored 5");
  EXPECT_NE(e.find("calendar months only, not to a calendar day at \"anchored\""), std::string::npos) << e;
  e = error_of("1/calendar fortnight");
  EXPECT_NE(e.find("unknown calendar unit"), std::string::npos) << e;
  EXPECT_NE(e.find("\"fortnight\""), std::string::npos) << e;
  e = error_of("1 per 2 calendar months");
  EXPECT_NE(e.find("one unit"), std::string::npos) << e;
  EXPECT_NE(e.find("at \"2\""), std::string::npos) << e;
  e = error_of("1/calendar month in");
  EXPECT_NE(e.find("expected a time zone after \"in\""), std::string::npos) << e;
  e = error_of("1/calendar month in localtime");
  EXPECT_NE(e.find("\"localtime\" depends on the machine"), std::string::npos) << e;
  e = error_of("1/calendar month in UTC in UTC");
  EXPECT_NE(e.find("each once"), std::string::npos) << e;
  e = error_of("1/calendar month by Friday");
  EXPECT_NE(e.find("at \"by\""), std::string::npos) << e;
  EXPECT_FALSE(Calendar::make(CalendarUnit::kWeek, "UTC", 3).ok());
  EXPECT_FALSE(Calendar::make(CalendarUnit::kNone, "UTC").ok());
}

TEST(CalendarPolicy, OnlyTheClockAlignedFixedWindowAcceptsCalendarLimits) {
  const std::string limits = "100/calendar day in Europe/Berlin";
  EXPECT_TRUE(Policy::make("p", Strategy::kFixedWindow, limits).ok());
  for (Strategy s : {Strategy::kMovingWindow, Strategy::kSlidingWindowCounter, Strategy::kTokenBucket,
                     Strategy::kLeakyBucket, Strategy::kGcra}) {
    auto p = Policy::make("p", s, limits);
    ASSERT_FALSE(p.ok()) << to_string(s);
    const std::string m(p.status().message());
    EXPECT_NE(m.find("calendar periods apply to the fixed window aligned to the clock only"), std::string::npos) << m;
    EXPECT_NE(m.find(to_string(s)), std::string::npos) << m;
  }
  PolicyOptions first_hit;
  first_hit.anchor = Anchor::kFirstHit;
  auto p = Policy::make("p", Strategy::kFixedWindow, limits, first_hit);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("anchored at the first hit"), std::string::npos) << p.status();
  // A calendar limit built by hand must carry its nominal period.
  Limit wrong = one(limits);
  wrong.period = kDay + 1;
  EXPECT_FALSE(Policy::make("p", Strategy::kFixedWindow, std::vector<Limit>{wrong}).ok());
}

TEST(CalendarPolicy, TheCalendarIsPartOfTheStateId) {
  const auto id = [](std::string_view limits) {
    return Policy::make("p", Strategy::kFixedWindow, limits).value().state_id();
  };
  EXPECT_NE(id("1/calendar month"), id("1/month"));
  EXPECT_NE(id("1/calendar month in Europe/Berlin"), id("1/calendar month in Europe/Paris"));
  EXPECT_NE(id("1/calendar month anchored 2"), id("1/calendar month anchored 3"));
  EXPECT_NE(id("1/calendar day"), id("1/day"));
  EXPECT_EQ(id("1/calendar month in Europe/Berlin"), id("5/calendar month in Europe/Berlin"));  // amounts keep state
}

}  // namespace
}  // namespace floodgate
