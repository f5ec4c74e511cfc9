// Policies come and go: the memory store bounds and frees the tables of policies no longer used
// (issue 19). Before: a table per policy, never freed, and the whole table map copied per policy.
#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <thread>
#include <string>

#include <gtest/gtest.h>

#include "floodgate/memory_storage.hpp"
#include "server/storage_watch.hpp"

namespace floodgate {
namespace {

constexpr Micros kSec = kMicrosPerSecond;

// A limit override with a state of its own: overrides that differ only in their amount share
// the rule's state (Policy::state_id), so each of these has a period of its own.
Policy override_policy(std::int64_t amount) {
  const std::string n = std::to_string(amount);
  return Policy::make("rule/override", Strategy::kFixedWindow, n + " per " + n + " seconds")
      .value()
      .with_identity(PolicyKind::kRuleOverride, {"domain", "key"});
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define FLOODGATE_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FLOODGATE_SANITIZED 1
#endif

std::int64_t rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::int64_t size = 0;
  std::int64_t resident = 0;
  statm >> size >> resident;
  return resident * 4096;
}

TEST(PolicyLifecycle, DistinctOverridesStayUnderTheBoundLeastRecentlyUsedFirst) {
  MemoryStorageOptions o;
  o.max_request_policies = 64;
  MemoryStorage storage(o);
  const Policy configured = Policy::make("api", Strategy::kFixedWindow, "1000000/day").value();
  const std::int64_t rss_before = rss_bytes();
  std::size_t most = 0;
  constexpr int kOverrides = 20'000;
  for (int i = 0; i < kOverrides; ++i) {
    const Micros now = i * kSec / 10;
    ASSERT_TRUE(storage.apply(configured, "user", 1, Effect::kHit, now)->allowed);
    ASSERT_TRUE(storage.apply(override_policy(1000 + i), "user", 1, Effect::kHit, now)->allowed);
    most = std::max(most, storage.policies());
  }
  EXPECT_LE(most, 65u);  // 64 request-made tables and the configured one
  EXPECT_GE(storage.policies_evicted(), static_cast<std::uint64_t>(kOverrides - 64));
  // The policy in steady use was never the one evicted: it kept every count.
  const Decision d = storage.apply(configured, "user", 0, Effect::kTest, kOverrides * kSec / 10).value();
  EXPECT_EQ(d.remaining, 1'000'000 - kOverrides);
#if defined(FLOODGATE_SANITIZED)
  (void)rss_before;  // the sanitizers keep freed memory in quarantine: RSS says nothing here
#else
  EXPECT_LT(rss_bytes() - rss_before, std::int64_t{64} << 20);  // generous: ~1 MB is expected
#endif
}

TEST(PolicyLifecycle, AnIdleTableIsFreedOnlyOnceItsStateHasExpired) {
  MemoryStorage storage;
  const Policy p = Policy::make("p", Strategy::kFixedWindow, "5/second").value();
  ASSERT_TRUE(storage.apply(p, "k", 3, Effect::kHit, 0)->allowed);
  EXPECT_EQ(storage.collect(kSec / 2), 0u);  // in use: kept, with its count
  EXPECT_EQ(storage.apply(p, "k", 0, Effect::kTest, kSec / 2)->remaining, 2);
  EXPECT_EQ(storage.policies(), 1u);
  EXPECT_EQ(storage.collect(60 * kSec), 1u);  // idle far past its window: nothing to lose
  EXPECT_EQ(storage.policies(), 0u);
  EXPECT_EQ(storage.policies_freed(), 1u);
  EXPECT_EQ(storage.policies_evicted(), 0u);
}

TEST(PolicyLifecycle, DecisionsSweepIdleTablesWithoutACollectCall) {
  MemoryStorage storage;
  const Policy old_rule = Policy::make("r", Strategy::kFixedWindow, "5/second").value();
  const Policy new_rule = Policy::make("r", Strategy::kFixedWindow, "6 per 2 seconds").value();
  ASSERT_TRUE(storage.apply(old_rule, "k", 1, Effect::kHit, 0)->allowed);
  for (Micros t = 0; t <= 30 * kSec; t += kSec / 4) storage.apply(new_rule, "k", 1, Effect::kHit, t).IgnoreError();
  EXPECT_EQ(storage.policies(), 1u);  // the old rule's table went when its state had expired
  EXPECT_EQ(storage.policies_freed(), 1u);
}

TEST(PolicyLifecycle, AFloodOfRequestMadePoliciesNeverFreesAConfiguredOne) {
  MemoryStorageOptions o;
  o.max_request_policies = 8;
  MemoryStorage storage(o);
  const Policy configured = Policy::make("api", Strategy::kFixedWindow, "10/hour").value();
  ASSERT_TRUE(storage.apply(configured, "user", 4, Effect::kHit, 0)->allowed);
  for (int i = 0; i < 100; ++i) storage.apply(override_policy(100 + i), "user", 1, Effect::kHit, (i + 1) * kSec).IgnoreError();
  EXPECT_EQ(storage.policies(), 9u);  // 8 request-made and the configured one, untouched since 0
  EXPECT_EQ(storage.apply(configured, "user", 0, Effect::kTest, 200 * kSec)->remaining, 6);
}

TEST(PolicyLifecycle, ForgetFreesAPolicysTableAtOnce) {
  MemoryStorage storage;
  const Policy p = Policy::make("p", Strategy::kFixedWindow, "5/hour").value();
  ASSERT_TRUE(storage.apply(p, "k", 1, Effect::kHit, 0)->allowed);
  storage.forget(p);
  EXPECT_EQ(storage.policies(), 0u);
  EXPECT_EQ(storage.apply(p, "k", 0, Effect::kTest, 0)->remaining, 5);
}

TEST(PolicyLifecycle, ATestOfAnUnknownPolicyStoresNothing) {
  MemoryStorage storage;
  const Policy p = Policy::make("p", Strategy::kTokenBucket, "5/second").value();
  EXPECT_EQ(storage.apply(p, "k", 1, Effect::kTest, 0)->remaining, 5);
  EXPECT_EQ(storage.policies(), 0u);
}

TEST(PolicyLifecycle, OverridesThatDifferOnlyInTheirAmountShareOneTableAndItsUsage) {
  MemoryStorage storage;
  const auto by_amount = [](int amount) {
    return Policy::make("rule/override", Strategy::kFixedWindow, std::to_string(amount) + "/hour")
        .value()
        .with_identity(PolicyKind::kRuleOverride, {"domain", "key"});
  };
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(storage.apply(by_amount(1000 + i), "k", 1, Effect::kHit, i).ok());
  EXPECT_EQ(storage.policies(), 1u);
  EXPECT_EQ(storage.apply(by_amount(1500), "k", 0, Effect::kTest, kSec)->remaining, 500);
}

TEST(PolicyLifecycle, StorageUrlTakesThePolicyBound) {
  auto s = open_storage("memory://?max_request_policies=2&request_policy_shards=1&max_policies=5");
  ASSERT_TRUE(s.ok()) << s.status();
  for (int i = 0; i < 10; ++i) ASSERT_TRUE((*s)->apply(override_policy(10 + i), "k", 1, Effect::kHit, 0).ok());
  EXPECT_EQ(static_cast<MemoryStorage&>(**s).policies(), 2u);
  // Every kind counts against max_policies, least recently used first.
  for (int i = 0; i < 10; ++i) {
    const Policy named = Policy::make("p" + std::to_string(i), Strategy::kFixedWindow, "1/hour").value();
    ASSERT_TRUE((*s)->apply(named, "k", 1, Effect::kHit, i).ok());
  }
  EXPECT_EQ(static_cast<MemoryStorage&>(**s).policies(), 5u);
  EXPECT_FALSE(open_storage("memory://?max_policies=0").ok());
}

// Issue 19: after a flood, an idle service kept its tables (and RSS) until the next decision;
// the storage watch of `serve` now calls Storage::maintain after each probe.
TEST(PolicyLifecycle, MaintainFreesIdleTablesWithoutADecision) {
  MemoryStorage storage;
  const Policy p = Policy::make("idle", Strategy::kGcra, "10/second").value();
  ASSERT_TRUE(storage.apply(p, "user", 1, Effect::kHit, 0)->allowed);
  storage.maintain(kSec);  // still within its state's lifetime
  EXPECT_EQ(storage.policies(), 1u);
  storage.maintain(60 * kSec);
  EXPECT_EQ(storage.policies(), 0u);
  EXPECT_EQ(storage.policies_freed(), 1u);
}

TEST(PolicyLifecycle, TheStorageWatchMaintainsTheStorage) {
  struct Counting : Storage {
    std::atomic<int> calls{0};
    absl::StatusOr<Decision> apply(const Policy&, std::string_view, std::int64_t, Effect, Micros) override {
      return absl::UnavailableError("not a real store");
    }
    absl::Status clear(const Policy&, std::string_view) override { return absl::OkStatus(); }
    void maintain(Micros) override { calls.fetch_add(1); }
  };
  auto storage = std::make_shared<Counting>();
  {
    server::StorageWatch watch(storage, [](bool, const absl::Status&) {},
                               server::StorageWatch::Options{std::chrono::milliseconds(10),
                                                             std::chrono::milliseconds(10),
                                                             std::chrono::milliseconds(10)});
    for (int i = 0; i < 500 && storage->calls.load() < 3; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  EXPECT_GE(storage->calls.load(), 3);
}

}  // namespace
}  // namespace floodgate
