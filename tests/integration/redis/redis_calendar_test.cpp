// Calendar limits through Redis (scripts/fixed_window_calendar.lua): the same decisions as the
// memory store across a billing month and a change to summer time, alone, beside an epoch-aligned
// limit and in the group script; on the server's clock, clients whose clocks differ by less than
// a period share one period and those a period apart get an error, never an admission.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "conformance_support.hpp"
#include "floodgate/memory_storage.hpp"
#include "test_support.hpp"

namespace floodgate::redis {
namespace {

using namespace floodgate::redis::testing;

constexpr Micros kHour = 3600 * kMicrosPerSecond;
constexpr Micros kDay = 24 * kHour;
constexpr Micros kFeb27_2027 = 1'803'686'400'000'000;  // 2027-02-27T00:00:00Z

TEST(RedisCalendar, BillingMonthAcrossDstDecidesAsTheMemoryStore) {
  auto redis = open_url(single_url("timeout_ms=2000&clock=client&prefix=" + unique_prefix("calendar")));
  ASSERT_NE(redis, nullptr);
  MemoryStorage memory;
  const std::vector<Policy> policies = {
      Policy::make("bill", Strategy::kFixedWindow, "40 per calendar month in Europe/Berlin anchored 31").value(),
      Policy::make("mixed", Strategy::kFixedWindow, "3/hour; 20/calendar day in Europe/Berlin; 60/calendar week in Europe/Berlin")
          .value()};
  int allowed = 0, denied = 0;
  // Every 5 hours from Feb 27 to Apr 30 2027: the periods starting Feb 28 00:00 +01, Mar 31
  // 00:00 +02 (summer time from Mar 28), Apr 30 00:00 +02, days of 23 hours, weeks.
  for (Micros t = kFeb27_2027; t < kFeb27_2027 + 63 * kDay; t += 5 * kHour) {
    for (const Policy& p : policies) {
      for (std::int64_t cost : {std::int64_t{1}, std::int64_t{2}, std::int64_t{0}}) {
        const auto want = memory.apply(p, "tenant", cost, Effect::kHit, t);
        const auto got = redis->apply(p, "tenant", cost, Effect::kHit, t);
        ASSERT_TRUE(want.ok() && got.ok()) << got.status();
        ASSERT_TRUE(same(*want, *got)) << p.describe() << " at " << t << "\n memory: " << describe(*want)
                                       << "\n redis:  " << describe(*got);
        (got->allowed ? allowed : denied) += 1;
      }
    }
  }
  EXPECT_GT(allowed, 100);  // both outcomes were exercised
  EXPECT_GT(denied, 100);
}

TEST(RedisCalendar, TheGroupScriptRunsCalendarLimits) {
  auto redis = open_url(single_url("timeout_ms=2000&clock=client&prefix=" + unique_prefix("calgroup")));
  ASSERT_NE(redis, nullptr);
  MemoryStorage memory;
  const Policy month = Policy::make("gm", Strategy::kFixedWindow, "5 per calendar month in Europe/Berlin anchored 31").value();
  const Policy plain = Policy::make("gp", Strategy::kFixedWindow, "4/hour").value();
  const Policy gcra = Policy::make("gg", Strategy::kGcra, "10/hour").value();
  int committed = 0, refused = 0;
  for (Micros t = kFeb27_2027 + 20 * kHour; t < kFeb27_2027 + 40 * kDay; t += 7 * kHour) {
    const std::vector<Storage::BatchItem> items = {
        {&month, "a", 1, Effect::kHit}, {&plain, "a", 1, Effect::kHit}, {&gcra, "b", 2, Effect::kHit}};
    std::vector<absl::StatusOr<Decision>> want(items.size()), got(items.size());
    const bool want_committed = memory.apply_group(items, t, want);
    const bool got_committed = redis->apply_group(items, t, got);
    ASSERT_EQ(got_committed, want_committed) << t;
    (got_committed ? committed : refused) += 1;
    for (std::size_t i = 0; i < items.size(); ++i) {
      ASSERT_TRUE(got[i].ok()) << got[i].status();
      ASSERT_TRUE(same(*want[i], *got[i])) << t << " item " << i << "\n memory: " << describe(*want[i])
                                           << "\n redis:  " << describe(*got[i]);
    }
  }
  EXPECT_GT(committed, 5);
  EXPECT_GT(refused, 5);
}

TEST(RedisCalendar, OnTheServerClockSkewWithinAPeriodSharesOnePeriodAndADayBeyondIsAnError) {
  const std::string prefix = unique_prefix("calskew");
  auto a = open_url(single_url("timeout_ms=2000&prefix=" + prefix));
  auto b = open_url(single_url("timeout_ms=2000&prefix=" + prefix));
  ASSERT_TRUE(a && b);
  const auto p = Policy::make("skew", Strategy::kFixedWindow, "10 per calendar month in Pacific/Kiritimati").value();
  const Micros real = SystemClock::instance()->now();
  int admitted = 0;
  Micros reset_at = 0;
  for (int i = 0; i < 20; ++i) {
    auto& storage = i % 2 ? *a : *b;
    const Micros skewed = real + (i % 2 ? 10 * 60 * kMicrosPerSecond : -10 * 60 * kMicrosPerSecond);
    const auto d = storage.apply(p, "shared", 1, Effect::kHit, skewed);
    ASSERT_TRUE(d.ok()) << d.status();
    admitted += d->allowed ? 1 : 0;
    reset_at = SystemClock::instance()->now() + d->reset_after;
  }
  EXPECT_EQ(admitted, 10);
  // The reset is at the end of the server's period (the server runs on this machine's clock).
  const Micros end = p.limits()[0].window_at(SystemClock::instance()->now()).end;
  EXPECT_NEAR(static_cast<double>(reset_at), static_cast<double>(end), 5e6);
  // A client a whole period (here 40 days) ahead sends periods that do not hold the server's
  // time: an error, which the fail mode turns into a degraded decision, never an admission.
  const auto far = a->apply(p, "other", 1, Effect::kHit, real + 40 * kDay);
  ASSERT_FALSE(far.ok());
  EXPECT_NE(far.status().message().find("disagree by more than a period"), std::string::npos) << far.status();
}

TEST(RedisCalendar, AKeyExpiresAtTheRealPeriodEnd) {
  const std::string prefix = unique_prefix("calttl");
  auto redis = open_url(single_url("timeout_ms=2000&prefix=" + prefix));
  ASSERT_NE(redis, nullptr);
  const auto p = Policy::make("ttl", Strategy::kFixedWindow, "5/calendar day in Asia/Tokyo").value();
  const Micros end = p.limits()[0].window_at(SystemClock::instance()->now()).end;
  const auto d = redis->apply(p, "k", 1, Effect::kHit, SystemClock::instance()->now());
  ASSERT_TRUE(d.ok()) << d.status();
  if (p.limits()[0].window_at(SystemClock::instance()->now()).end != end) GTEST_SKIP() << "ran across midnight in Tokyo";
  Raw raw(single_port());
  const std::string key = state_key(prefix, "k", p, 0);
  const std::int64_t pttl = std::stoll(raw.cmd({"PTTL", key}));
  EXPECT_NEAR(static_cast<double>(pttl) * 1000, static_cast<double>(end - SystemClock::instance()->now()), 5e6);
  EXPECT_EQ(raw.cmd({"GET", key}).find(' ') != std::string::npos, true);  // the text form, never packed
}

}  // namespace
}  // namespace floodgate::redis
