// Policies come and go: the memory store bounds and frees the tables of policies no longer used
// (a table per policy, freed when idle; the table map is never copied per policy).
#include <atomic>
#include <chrono>
#include <fstream>
#include <limits>
#include <memory>
#include <thread>
#include <vector>
#include <string>

#include <gtest/gtest.h>

#include "floodgate/memory_storage.hpp"
#include "server/common/housekeeping.hpp"
#include "server/common/policy_cache.hpp"
#include "server/common/storage_watch.hpp"

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

TEST(PolicyLifecycle, StorageUrlTakesTheLogBounds) {
  auto s = open_storage("memory://?max_log_bytes=4096&max_request_log_bytes=256");
  ASSERT_TRUE(s.ok()) << s.status();
  const Policy configured = Policy::make("api", Strategy::kMovingWindow, "1000000/hour").value();
  const Policy request_made = configured.with_identity(PolicyKind::kInline, {});
  const auto hits_until_refused = [&](const Policy& p) {
    for (Micros t = 0; t < 1000; ++t) {
      const auto d = (*s)->apply(p, "k", 1, Effect::kHit, t);
      if (!d.ok()) return d.status().code() == absl::StatusCode::kResourceExhausted ? t : Micros{-1};
    }
    return Micros{-1};
  };
  EXPECT_EQ(hits_until_refused(request_made), 16);  // 16 entries: 256 bytes
  EXPECT_EQ(hits_until_refused(configured), 128);  // 128 entries: its doubling would pass 4096 in all
  const auto unknown = open_storage("memory://?max_log_entries=5");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("max_request_log_bytes"), std::string_view::npos) << unknown.status();
}

// After a flood, an idle service gives its tables (and RSS) back without waiting for a decision:
// the storage watch of `serve` calls Storage::maintain after each probe.
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
                                                             std::chrono::milliseconds(10), {}});
    for (int i = 0; i < 500 && storage->calls.load() < 3; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  EXPECT_GE(storage->calls.load(), 3);
}

// The soak's idle RSS: the directory of tables must not keep the slots of a flood's thousands of
// tables once they were freed (an absl map never shrinks by itself), and those slots, with the
// cached policies below, pinned the pages of the freed tables around them.
TEST(PolicyLifecycle, FreeingTablesGivesBackTheDirectorysSlots) {
  MemoryStorageOptions o;
  o.max_request_policies = 8192;
  MemoryStorage storage(o);
  constexpr int kTables = 3000;
  for (int i = 0; i < kTables; ++i) {
    ASSERT_TRUE(storage.apply(override_policy(1 + i), "user", 1, Effect::kHit, 0)->allowed);
  }
  EXPECT_GE(storage.policy_slots(), static_cast<std::size_t>(kTables));
  EXPECT_EQ(storage.collect(100'000 * kSec), static_cast<std::size_t>(kTables));  // all expired
  EXPECT_EQ(storage.policies(), 0u);
  EXPECT_LT(storage.policy_slots(), 64u);

  for (int i = 0; i < kTables; ++i) {
    ASSERT_TRUE(storage.apply(override_policy(1 + i), "user", 1, Effect::kHit, 0)->allowed);
  }
  for (int i = 1; i < kTables; ++i) storage.forget(override_policy(1 + i));  // as a reload does
  EXPECT_EQ(storage.policies(), 1u);
  EXPECT_LT(storage.policy_slots(), 64u);
  EXPECT_EQ(storage.apply(override_policy(1), "user", 0, Effect::kTest, 0)->remaining, 0);  // kept
}

TEST(PolicyLifecycle, CachedPoliciesUnusedSinceTheLastSweepAreDroppedWithTheirSlots) {
  server::PolicyCache cache(4096);
  const auto p = std::make_shared<const Policy>(Policy::make("p", Strategy::kFixedWindow, "5/second").value());
  for (int i = 0; i < 3000; ++i) cache.add("id" + std::to_string(i), p);
  EXPECT_EQ(cache.drop_unused(), 0u);  // all used since the start
  EXPECT_NE(cache.find("id7"), nullptr);
  EXPECT_EQ(cache.drop_unused(), 2999u);  // only id7 was used since
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_LT(cache.capacity(), 64u);
  EXPECT_NE(cache.find("id7"), nullptr);
  EXPECT_EQ(cache.drop_unused(), 0u);
  EXPECT_EQ(cache.drop_unused(), 1u);
  cache.add("again", p);
  EXPECT_EQ(cache.size(), 1u);
}

TEST(PolicyLifecycle, HousekeepingSweepsEveryIntervalAndTrimsAfterADrop) {
  int sweeps = 0;
  std::size_t drop = 2;
  server::Housekeeping::Options o;
  o.sweep_every = 10 * kSec;
  o.trim_every = 5 * kSec;
  o.trim_after = std::numeric_limits<std::size_t>::max() / 2;  // only drops call for a trim here
  server::Housekeeping h({[&] { ++sweeps; return drop; }}, o);
  for (Micros t = 0; t < 25 * kSec; t += kSec) h.run(t);
  EXPECT_EQ(sweeps, 3);  // at 0, 10 and 20 s
  EXPECT_EQ(h.dropped(), 6u);
#if defined(__GLIBC__)
  EXPECT_EQ(h.trims(), 3u);  // after each sweep that dropped something
  drop = 0;
  for (Micros t = 25 * kSec; t < 45 * kSec; t += kSec) h.run(t);
  EXPECT_EQ(sweeps, 5);
  EXPECT_EQ(h.trims(), 3u);  // nothing dropped, nothing freed
#endif
}

TEST(PolicyLifecycle, HousekeepingTrimsOnceTheFreeHeapHasGrown) {
  server::Housekeeping::Options o;
  o.trim_every = 5 * kSec;
  server::Housekeeping h({}, o);
#if defined(__GLIBC__) && !defined(FLOODGATE_SANITIZED)  // the sanitizers have their own heap
  std::vector<std::unique_ptr<char[]>> pins;  // small blocks kept between the big ones, as in a flood
  {
    std::vector<std::unique_ptr<char[]>> blocks;  // 16 MiB in blocks below the mmap threshold
    for (int i = 0; i < 256; ++i) {
      blocks.push_back(std::make_unique<char[]>(64 << 10));
      blocks.back()[0] = 1;
      pins.push_back(std::make_unique<char[]>(16));
    }
    h.run(0);  // the lowest free heap seen
  }
  EXPECT_GE(server::Housekeeping::free_heap(), std::size_t{8} << 20);
  const std::uint64_t before = h.trims();
  h.run(6 * kSec);
  EXPECT_EQ(h.trims(), before + 1);
  h.run(12 * kSec);  // nothing freed since: no trim
  EXPECT_EQ(h.trims(), before + 1);
  EXPECT_GE(h.longest_trim(), 0);
#else
  h.run(0);
  EXPECT_EQ(h.trims(), 0u);
#endif
}

}  // namespace
}  // namespace floodgate
