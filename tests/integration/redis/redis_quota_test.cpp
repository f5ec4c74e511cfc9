// The shared quota (Storage::share_quota) on Redis against the memory store, step for step, on
// random interleavings of members, expiries and requests past what is free (redis_single fixture).
#include <algorithm>
#include <random>

#include <gtest/gtest.h>

#include "floodgate/memory_storage.hpp"
#include "test_support.hpp"

namespace floodgate::redis {
namespace {

using namespace floodgate::redis::testing;

std::vector<std::int64_t> sorted(std::vector<std::int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(RedisQuota, ShareQuotaEqualsMemoryStepForStep) {
  MemoryStorage memory;
  auto redis = open_url(single_url("timeout_ms=2000&prefix=" + unique_prefix("quota")));
  ASSERT_NE(redis, nullptr);
  ASSERT_TRUE(redis->traits().shared);
  EXPECT_FALSE(memory.traits().shared);
  std::mt19937_64 rng(11);
  Micros now = 1'700'000'000'000'000;  // the caller's clock, far from the server's
  for (int step = 0; step < 600; ++step) {
    now += static_cast<Micros>(rng() % 500'000);
    const std::string key = (rng() % 4 == 0) ? "edge|other" : "edge|chat";
    const std::string member = "m" + std::to_string(rng() % 4);
    QuotaClaim claim;
    claim.total = 100;
    claim.requested = rng() % 101;
    claim.expiry = now + 1 + static_cast<Micros>(rng() % 2'000'000);
    for (std::uint64_t i = rng() % 4; i > 0; --i) {
      claim.wants.push_back(rng() % 3 == 0 ? kNoHistory : static_cast<std::int64_t>(rng() % 101));
    }
    auto want = memory.share_quota(key, member, claim, now);
    auto got = redis->share_quota(key, member, claim, now);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_TRUE(got.ok()) << "step " << step << ": " << got.status();
    ASSERT_EQ(got->granted, want->granted) << "step " << step;
    ASSERT_EQ(sorted(got->others), sorted(want->others)) << "step " << step;
  }
}

TEST(RedisQuota, BadClaimIsRefusedBeforeTheServer) {
  auto redis = open_url(single_url("timeout_ms=2000&prefix=" + unique_prefix("quota-bad")));
  ASSERT_NE(redis, nullptr);
  auto r = redis->share_quota("k", "m", QuotaClaim{{}, 101, 100, 2'000'000}, 1'000'000);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
}

}  // namespace
}  // namespace floodgate::redis
