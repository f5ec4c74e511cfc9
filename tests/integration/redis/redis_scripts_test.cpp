// The scripts' arithmetic and reply against the memory store, field for field, on a client
// clock (redis_single fixture): the cases where the Lua takes another route to the C++'s integer.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "floodgate/memory_storage.hpp"
#include "test_support.hpp"

namespace floodgate::redis {
namespace {

using namespace floodgate::redis::testing;

void expect_same(const Decision& want, const absl::StatusOr<Decision>& got, const std::string& what) {
  ASSERT_TRUE(got.ok()) << what << ": " << got.status();
  EXPECT_EQ(got->allowed, want.allowed) << what;
  EXPECT_EQ(got->limit, want.limit) << what;
  EXPECT_EQ(got->period, want.period) << what;
  EXPECT_EQ(got->remaining, want.remaining) << what;
  EXPECT_EQ(got->reset_after, want.reset_after) << what;
  EXPECT_EQ(got->retry_after, want.retry_after) << what;
  EXPECT_EQ(got->delay, want.delay) << what;
  EXPECT_EQ(got->limit_reset_after, want.limit_reset_after) << what;
}

// A bucket's remaining, ⌊(capacity − used) / P⌋, where N·P is far above 2^53 (100000000/hour): a
// nearly empty bucket (bucket.lua forms it from the used part) and a nearly full one (from the
// free part), with several limits so that the reply names the constraining one by position.
TEST(RedisScripts, BucketRemainingWithLargeAmountTimesPeriodEqualsMemory) {
  const Policy policies[] = {
      Policy::make("big", Strategy::kGcra, "100000000/hour").value(),
      Policy::make("big-two", Strategy::kTokenBucket, "1000/second; 100000000/hour").value(),
      Policy::make("big-burst", Strategy::kLeakyBucket, "100000000/hour burst 300000000").value(),
  };
  const std::int64_t costs[] = {1, 7, 99'999'990, 1, 250'000'000, 3, 1};
  for (const Policy& p : policies) {
    MemoryStorage memory;
    auto redis = open_url(single_url("timeout_ms=2000&clock=client&prefix=" + unique_prefix("bigrem")));
    ASSERT_NE(redis, nullptr);
    Micros now = 1'700'000'000'000'000;
    for (std::size_t i = 0; i < std::size(costs); ++i) {
      for (Effect e : {Effect::kTest, Effect::kHit}) {
        const auto want = memory.apply(p, "k", costs[i], e, now);
        ASSERT_TRUE(want.ok());
        expect_same(*want, redis->apply(p, "k", costs[i], e, now), fmt::format("{} #{}", p.name(), i));
      }
      now += 12'345;
    }
  }
}

}  // namespace
}  // namespace floodgate::redis
