// The Limiter's blocked-key cache (PolicyOptions::blocked_cache), on a counting storage and a
// manual clock: a key denied until T is denied locally until T without a storage call.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "floodgate/limiter.hpp"
#include "floodgate/memory_storage.hpp"

namespace floodgate {
namespace {

class CountingStorage final : public Storage {
 public:
  absl::StatusOr<Decision> apply(const Policy& p, std::string_view key, std::int64_t cost,
                                 Effect effect, Micros now) override {
    ++calls;
    return inner.apply(p, key, cost, effect, now);
  }
  absl::Status clear(const Policy& p, std::string_view key) override { return inner.clear(p, key); }
  MemoryStorage inner;
  int calls = 0;
};

Policy cached(std::size_t size, std::string_view limit = "2/second") {
  PolicyOptions o;
  o.blocked_cache = size;
  return Policy::make("cached", Strategy::kFixedWindow, limit, o).value();
}

TEST(BlockedCache, ADeniedKeyIsDeniedLocallyUntilItsRetryTime) {
  auto storage = std::make_shared<CountingStorage>();
  auto clock = std::make_shared<ManualClock>(10'000'000);
  Limiter limiter(storage, clock);
  const Policy p = cached(100);
  EXPECT_TRUE(limiter.hit(p, "k")->allowed);
  EXPECT_TRUE(limiter.hit(p, "k")->allowed);
  const auto denied = limiter.hit(p, "k");  // from the storage: blocked until 11 s
  EXPECT_FALSE(denied->allowed);
  EXPECT_EQ(denied->retry_after, 1'000'000);
  EXPECT_EQ(storage->calls, 3);
  clock->advance(400'000);
  const auto local = limiter.hit(p, "k");
  EXPECT_FALSE(local->allowed);
  EXPECT_FALSE(local->degraded);
  EXPECT_EQ(local->retry_after, 600'000);
  EXPECT_EQ(local->reset_after, 600'000);
  EXPECT_FALSE(limiter.test(p, "k")->allowed);
  EXPECT_EQ(storage->calls, 3);  // no storage call
  EXPECT_EQ(limiter.blocked_cache_hits(), 2u);
  EXPECT_TRUE(limiter.stats(p, "k").ok());  // cost 0 always asks the storage
  EXPECT_EQ(storage->calls, 4);
  EXPECT_TRUE(limiter.hit(p, "other")->allowed);  // other keys are not blocked
  clock->advance(600'000);  // T reached: the storage decides again
  EXPECT_TRUE(limiter.hit(p, "k")->allowed);
  EXPECT_EQ(storage->calls, 6);
}

TEST(BlockedCache, OnlyRequestsOfAtLeastTheDeniedCostAreDeniedLocally) {
  auto storage = std::make_shared<CountingStorage>();
  auto clock = std::make_shared<ManualClock>(0);
  Limiter limiter(storage, clock);
  const Policy p = cached(100, "10/second");
  EXPECT_TRUE(limiter.hit(p, "k", 8)->allowed);
  EXPECT_FALSE(limiter.hit(p, "k", 5)->allowed);  // blocks cost ≥ 5
  EXPECT_FALSE(limiter.hit(p, "k", 6)->allowed);
  EXPECT_EQ(storage->calls, 2);
  EXPECT_TRUE(limiter.hit(p, "k", 2)->allowed);  // a smaller cost still asks, and fits
  EXPECT_EQ(storage->calls, 3);
}

TEST(BlockedCache, ClearForgetsTheBlockAndTheSizeIsBounded) {
  auto storage = std::make_shared<CountingStorage>();
  auto clock = std::make_shared<ManualClock>(0);
  Limiter limiter(storage, clock);
  const Policy p = cached(4, "1/hour");
  for (int i = 0; i < 50; ++i) {
    const std::string key = fmt::format("k{}", i);
    EXPECT_TRUE(limiter.hit(p, key)->allowed);
    EXPECT_FALSE(limiter.hit(p, key)->allowed);
  }
  const int before = storage->calls;
  int local = 0;
  for (int i = 0; i < 50; ++i) {
    const std::uint64_t hits = limiter.blocked_cache_hits();
    EXPECT_FALSE(limiter.hit(p, fmt::format("k{}", i))->allowed);
    local += limiter.blocked_cache_hits() > hits ? 1 : 0;
  }
  EXPECT_LE(local, 4);  // at most 4 keys remembered
  EXPECT_GE(local, 1);
  EXPECT_EQ(storage->calls - before, 50 - local);
  ASSERT_TRUE(limiter.clear(p, "k49").ok());
  EXPECT_TRUE(limiter.hit(p, "k49")->allowed);
}

TEST(BlockedCache, OffByDefault) {
  auto storage = std::make_shared<CountingStorage>();
  Limiter limiter(storage, std::make_shared<ManualClock>(0));
  const Policy p = Policy::make("plain", Strategy::kGcra, "1/hour").value();
  EXPECT_TRUE(limiter.hit(p, "k")->allowed);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(limiter.hit(p, "k")->allowed);
  EXPECT_EQ(storage->calls, 6);
  EXPECT_EQ(limiter.blocked_cache_hits(), 0u);
}

}  // namespace
}  // namespace floodgate
