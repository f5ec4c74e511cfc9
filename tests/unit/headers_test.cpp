#include "floodgate/headers.hpp"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace floodgate
