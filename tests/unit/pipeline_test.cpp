// Limiter as the one decision pipeline: batches, groups, the blocked-key cache, the fail mode and
// its counters, whatever entry point a decision comes through.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "floodgate/limiter.hpp"
#include "floodgate/memory_storage.hpp"
#include "support/switchable_storage.hpp"

namespace floodgate {
namespace {

constexpr Micros kSec = kMicrosPerSecond;

using FlakyStorage = testing::SwitchableStorage;

class PipelineTest : public ::testing::Test {
 protected:
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>(1'700'000'000 * kSec);
  std::shared_ptr<FlakyStorage> storage = std::make_shared<FlakyStorage>();
  Limiter limiter{storage, clock};
  Policy open = Policy::make("open", Strategy::kFixedWindow, "2/hour").value();
  Policy closed = Policy::make("closed", Strategy::kGcra, "2/hour", {.fail = FailMode::kClosed}).value();
  Policy cached = Policy::make("cached", Strategy::kFixedWindow, "1/hour", {.blocked_cache = 16}).value();
};

TEST_F(PipelineTest, AStorageFailureIsTheFailModeInEveryEntryPointAndCountedOnce) {
  storage->failure = absl::UnavailableError("down");
  const auto one = limiter.hit(closed, "k");
  ASSERT_TRUE(one.ok());
  EXPECT_FALSE(one->allowed);
  EXPECT_TRUE(one->degraded);
  std::vector<Limiter::Request> batch{{&open, "a", 1, Effect::kHit}, {&closed, "b", 1, Effect::kHit}};
  std::vector<absl::StatusOr<Decision>> out(2);
  limiter.decide(batch, clock->now(), out);
  EXPECT_TRUE(out[0]->allowed && out[0]->degraded);
  EXPECT_TRUE(!out[1]->allowed && out[1]->degraded);
  std::vector<absl::StatusOr<Decision>> group(2);
  EXPECT_FALSE(limiter.decide_group(batch, clock->now(), group));
  EXPECT_TRUE(group[0]->degraded && group[1]->degraded);
  EXPECT_EQ(limiter.degraded_count(), 5u);  // 1 + 2 + 2: each decision counted once, by one code
}

TEST_F(PipelineTest, InvalidArgumentFromTheStorageIsAnErrorNeverAFailModeDecision) {
  storage->failure = absl::InvalidArgumentError("period too long for this storage");
  const auto d = limiter.hit(closed, "k");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<Limiter::Request> batch{{&open, "a", 1, Effect::kHit}};
  std::vector<absl::StatusOr<Decision>> out(1);
  limiter.decide(batch, clock->now(), out);
  EXPECT_EQ(out[0].status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(limiter.degraded_count(), 0u);
}

TEST_F(PipelineTest, ABadCostIsRefusedBeforeTheStorage) {
  std::vector<Limiter::Request> batch{{&open, "a", -1, Effect::kHit}, {&open, "a", 1, Effect::kHit}};
  std::vector<absl::StatusOr<Decision>> out(2);
  limiter.decide(batch, clock->now(), out);
  EXPECT_EQ(out[0].status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(out[1]->allowed);
  EXPECT_EQ(storage->calls.load(), 1);
  std::vector<absl::StatusOr<Decision>> group(2);
  EXPECT_FALSE(limiter.decide_group(batch, clock->now(), group));
  EXPECT_EQ(storage->calls.load(), 1);  // an invalid group asks nothing of the storage
}

TEST_F(PipelineTest, TheBlockedKeyCacheAnswersBatchesAndGroupsWithoutTheStorage) {
  ASSERT_TRUE(limiter.hit(cached, "k")->allowed);
  ASSERT_FALSE(limiter.hit(cached, "k")->allowed);  // denied by the storage: remembered
  const int before = storage->calls.load();
  std::vector<Limiter::Request> batch{{&cached, "k", 1, Effect::kHit}};
  std::vector<absl::StatusOr<Decision>> out(1);
  limiter.decide(batch, clock->now(), out);
  EXPECT_FALSE(out[0]->allowed);
  EXPECT_EQ(storage->calls.load(), before);
  // A group with a locally blocked member is not committed; the other member is only tested.
  std::vector<Limiter::Request> group{{&open, "x", 1, Effect::kHit}, {&cached, "k", 1, Effect::kHit}};
  std::vector<absl::StatusOr<Decision>> results(2);
  EXPECT_FALSE(limiter.decide_group(group, clock->now(), results));
  EXPECT_EQ(limiter.stats(open, "x")->remaining, 2);  // nothing charged
  EXPECT_EQ(limiter.blocked_cache_hits(), 2u);        // the batch and the group, once each
}

TEST_F(PipelineTest, GroupsAreAllOrNothingAcrossThreadsOnAStorageWhoseGroupsAreNotAtomic) {
  ASSERT_FALSE(storage->traits().atomic_groups);
  // 8 threads × 200 groups of {tight 50/hour shared key, wide 1e6/hour own key}, and 4 threads of
  // single hits on the shared key: exactly 50 units of "shared" go (to groups or singles), and the
  // wide keys are charged once per committed group — never by a group refused at its commit because
  // a single hit took the last unit between the group's test and its commit (it could before the
  // single hits took the key locks too).
  const Policy tight = Policy::make("tight", Strategy::kFixedWindow, "50/hour").value();
  const Policy wide = Policy::make("wide", Strategy::kFixedWindow, "1000000/hour").value();
  limiter.expect_groups();
  std::atomic<int> committed{0};
  std::atomic<int> singles{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      const std::string own = "w" + std::to_string(t);
      for (int i = 0; i < 200; ++i) {
        std::vector<Limiter::Request> g{{&wide, own, 1, Effect::kHit}, {&tight, "shared", 1, Effect::kHit}};
        std::vector<absl::StatusOr<Decision>> out(2);
        if (limiter.decide_group(g, clock->now(), out)) committed.fetch_add(1);
      }
    });
  }
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        if (limiter.hit(tight, "shared")->allowed) singles.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(committed.load() + singles.load(), 50);
  std::int64_t wide_used = 0;
  for (int t = 0; t < 8; ++t) wide_used += 1'000'000 - limiter.stats(wide, "w" + std::to_string(t))->remaining;
  EXPECT_EQ(wide_used, committed.load());
}

TEST_F(PipelineTest, TheStorageLatencyObserverSeesEveryStorageCall) {
  std::atomic<int> seen{0};
  limiter.observe_storage_latency([&](Micros us) {
    EXPECT_GE(us, 0);
    seen.fetch_add(1);
  });
  (void)limiter.hit(open, "a");
  std::vector<Limiter::Request> batch{{&open, "b", 1, Effect::kHit}, {&open, "c", 1, Effect::kHit}};
  std::vector<absl::StatusOr<Decision>> out(2);
  limiter.decide(batch, clock->now(), out);
  EXPECT_EQ(seen.load(), 2);  // one per storage call, not per request
}

}  // namespace
}  // namespace floodgate
