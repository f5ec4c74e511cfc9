#include "floodgate/headers.hpp"

#include <memory>

#include <gtest/gtest.h>

#include "floodgate/limiter.hpp"
#include "floodgate/memory_storage.hpp"

namespace floodgate {
namespace {

std::string header(const std::vector<Header>& hs, std::string_view name) {
  for (const auto& [n, v] : hs) {
    if (n == name) return v;
  }
  return "<absent>";
}

TEST(Headers, AllowedSingleLimit) {
  const Policy p = Policy::make("api", Strategy::kGcra, "100/minute").value();
  Decision d;
  d.allowed = true;
  d.limit = 100;
  d.period = 60 * kMicrosPerSecond;
  d.remaining = 42;
  d.reset_after = 34'800'001;  // rounds up to 35
  const auto hs = rate_limit_headers(p, d);
  EXPECT_EQ(header(hs, "RateLimit-Policy"), "\"api\";q=100;w=60");
  EXPECT_EQ(header(hs, "RateLimit"), "\"api\";r=42;t=35");
  EXPECT_EQ(header(hs, "X-RateLimit-Limit"), "100");
  EXPECT_EQ(header(hs, "X-RateLimit-Remaining"), "42");
  EXPECT_EQ(header(hs, "X-RateLimit-Reset"), "35");
  EXPECT_EQ(header(hs, "Retry-After"), "<absent>");
}

TEST(Headers, DeniedMultiLimitNamesTheConstrainingLimit) {
  const Policy p = Policy::make("web", Strategy::kFixedWindow, "2/second; 10/minute").value();
  Decision d;
  d.allowed = false;
  d.limit = 10;
  d.period = 60 * kMicrosPerSecond;
  d.remaining = 0;
  d.reset_after = 59'000'000;
  d.limit_reset_after = 59'000'000;  // the named limit's (10/minute) own reset
  d.retry_after = 1;  // one microsecond still means "retry after 1 second"
  const auto hs = rate_limit_headers(p, d);
  EXPECT_EQ(header(hs, "RateLimit-Policy"), "\"web-0\";q=2;w=1, \"web-1\";q=10;w=60");
  EXPECT_EQ(header(hs, "RateLimit"), "\"web-1\";r=0;t=59");
  EXPECT_EQ(header(hs, "Retry-After"), "1");
}

TEST(Headers, NeverRetryHasNoRetryAfterAndSubSecondWindowsRoundUp) {
  const Policy p = Policy::make("q\"x", Strategy::kTokenBucket, "5 per 250 ms").value();
  Decision d;
  d.allowed = false;
  d.limit = 5;
  d.period = 250'000;
  d.retry_after = kNever;
  const auto hs = rate_limit_headers(p, d);
  EXPECT_EQ(header(hs, "Retry-After"), "<absent>");
  EXPECT_EQ(header(hs, "RateLimit-Policy"), "\"q\\\"x\";q=5;w=1");
}

TEST(Headers, CeilSeconds) {
  EXPECT_EQ(ceil_seconds(0), 0);
  EXPECT_EQ(ceil_seconds(1), 1);
  EXPECT_EQ(ceil_seconds(kMicrosPerSecond), 1);
  EXPECT_EQ(ceil_seconds(kMicrosPerSecond + 1), 2);
}

// RFC 8941 integers have at most 15 digits; amounts go up to 2^53.
TEST(Headers, FiguresBeyondFifteenDigitsAreClamped) {
  const Policy p = Policy::make("big", Strategy::kFixedWindow, "9007199254740992/second").value();
  Decision d;
  d.allowed = true;
  d.limit = kMaxAmount;
  d.period = kMicrosPerSecond;
  d.remaining = kMaxAmount - 1;
  d.reset_after = 1;
  const auto hs = rate_limit_headers(p, d);
  EXPECT_EQ(header(hs, "RateLimit-Policy"), "\"big\";q=999999999999999;w=1");
  EXPECT_EQ(header(hs, "RateLimit"), "\"big\";r=999999999999999;t=1");
  EXPECT_EQ(header(hs, "X-RateLimit-Limit"), "999999999999999");
  EXPECT_EQ(header(hs, "X-RateLimit-Remaining"), "999999999999999");
}

// The quota of a bucket is its capacity, over the time it takes to refill it: remaining ≤ limit.
TEST(Headers, ABucketsQuotaIsItsBurstSoRemainingNeverExceedsTheLimit) {
  const Policy p = Policy::make("b", Strategy::kTokenBucket, "10/minute", PolicyOptions{.burst = 20}).value();
  Decision d;
  d.allowed = true;
  d.limit = 10;
  d.period = 60 * kMicrosPerSecond;
  d.remaining = 19;
  d.reset_after = 6 * kMicrosPerSecond;
  const auto hs = rate_limit_headers(p, d);
  EXPECT_EQ(header(hs, "RateLimit-Policy"), "\"b\";q=20;w=120");  // 20 per 120 s: still 10/minute
  EXPECT_EQ(header(hs, "RateLimit"), "\"b\";r=19;t=6");
  EXPECT_EQ(header(hs, "X-RateLimit-Limit"), "20");
  EXPECT_EQ(header(hs, "X-RateLimit-Remaining"), "19");
  EXPECT_EQ(decision_quota(p, d), 20);  // what a response body reports as its limit
}

// Retry-After takes precedence over t (draft-11): t never promises a sooner reset than it.
TEST(Headers, ResetIsNeverSoonerThanRetryAfter) {
  const Policy p = Policy::make("r", Strategy::kGcra, "1/hour").value();
  Decision d;
  d.allowed = false;
  d.limit = 1;
  d.period = 3600 * kMicrosPerSecond;
  d.reset_after = 10 * kMicrosPerSecond;
  d.retry_after = 30 * kMicrosPerSecond;
  const auto hs = rate_limit_headers(p, d);
  EXPECT_EQ(header(hs, "Retry-After"), "30");
  EXPECT_EQ(header(hs, "RateLimit"), "\"r\";r=0;t=30");
}

// The visitor that servers write from hands over the same fields, in this order (a response's
// field order is what clients and tests see); a decision that names none of a multi-limit
// policy's limits is reported under the policy's own name.
TEST(Headers, TheFieldsComeInOrderAndADecisionOfNoLimitNamesThePolicy) {
  const Policy p = Policy::make("t\tab", Strategy::kFixedWindow, "2/second; 10/minute").value();
  Decision d;
  d.allowed = false;
  d.limit = 7;  // not one of the policy's limits
  d.period = 5 * kMicrosPerSecond;
  d.remaining = 3;
  d.reset_after = 2'500'000;
  d.retry_after = 1'000'001;
  std::vector<std::string> seen;
  for_each_rate_limit_header(p, d, [&](std::string_view name, std::string_view value) {
    seen.push_back(std::string(name) + ": " + std::string(value));
  });
  const std::vector<std::string> expected = {
      "RateLimit-Policy: \"t_ab-0\";q=2;w=1, \"t_ab-1\";q=10;w=60",
      "RateLimit: \"t_ab\";r=3;t=3",
      "X-RateLimit-Limit: 7",
      "X-RateLimit-Remaining: 3",
      "X-RateLimit-Reset: 3",
      "Retry-After: 2",
  };
  EXPECT_EQ(seen, expected);
  std::vector<std::string> from_vector;
  for (const auto& [name, value] : rate_limit_headers(p, d)) from_vector.push_back(name + ": " + value);
  EXPECT_EQ(from_vector, expected);
}

// With several limits, t is each limit's own reset, not the whole key's: one hit on
// "10/second; 1000/hour" (GCRA) leaves the second 9 of 10 (reset in 0.1 s) and the hour 999 of
// 1000 (reset in 3.6 s): RateLimit names the second first with t=1, then the hour with its own.
TEST(Headers, TheResetIsTheNamedLimitsOwn) {
  const Policy p = Policy::make("api", Strategy::kGcra, "10/second; 1000/hour").value();
  Limiter limiter(std::make_shared<MemoryStorage>(), std::make_shared<ManualClock>(1'000 * kMicrosPerSecond));
  const auto d = limiter.hit(p, "k");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->remaining, 9);
  EXPECT_EQ(d->reset_after, 3'600'000);
  EXPECT_EQ(d->limit_reset_after, 100'000);
  const auto hs = rate_limit_headers(p, *d);
  ASSERT_EQ(d->balance_count, 2);
  EXPECT_EQ(d->balances[1].remaining, 999);
  EXPECT_EQ(header(hs, "RateLimit"), "\"api-0\";r=9;t=1, \"api-1\";r=999;t=4");
  EXPECT_EQ(header(hs, "X-RateLimit-Reset"), "1");
}

}  // namespace
}  // namespace floodgate
