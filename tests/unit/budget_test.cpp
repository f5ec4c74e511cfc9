// Budget slices (docs/algorithms.md, "Budget slices"): several Limiters on one MemoryStorage are
// several instances; exactness per window against the limit, under-admission within the bound.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "floodgate/limiter.hpp"
#include "floodgate/memory_storage.hpp"
#include "floodgate/policy.hpp"

namespace floodgate {
namespace {

constexpr Micros kSecond = kMicrosPerSecond;
constexpr Micros kStart = 1'700'000'000 * kSecond;  // a window boundary for 1 s and 10 s periods

PolicyOptions sliced(std::int64_t max_slice, Micros interval = kSecond / 10, std::int64_t share = 4) {
  PolicyOptions o;
  o.budget = BudgetOptions{max_slice, interval, share};
  return o;
}

TEST(BudgetSlicePolicy, RefusedWhereASliceCannotKeepTheAlgorithm) {
  for (const Strategy s : {Strategy::kMovingWindow, Strategy::kLeakyBucket}) {
    const auto p = Policy::make("p", s, "10/second", sliced(5));
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find("budget slices (budget_slice) apply to"), std::string_view::npos) << p.status();
    EXPECT_NE(p.status().message().find(to_string(s)), std::string_view::npos) << p.status();
  }
  PolicyOptions first = sliced(5);
  first.anchor = Anchor::kFirstHit;
  EXPECT_NE(Policy::make("p", Strategy::kFixedWindow, "10/second", first).status().message().find("first hit"),
            std::string_view::npos);
  for (const Strategy s : {Strategy::kFixedWindow, Strategy::kSlidingWindowCounter, Strategy::kTokenBucket,
                           Strategy::kGcra}) {
    EXPECT_TRUE(Policy::make("p", s, "10/second", sliced(5)).ok()) << to_string(s);
  }
}

TEST(BudgetSlicePolicy, OutOfRangeOptionsNameTheField) {
  const auto message = [](PolicyOptions o) {
    return std::string(Policy::make("p", Strategy::kGcra, "10/second", o).status().message());
  };
  EXPECT_NE(message(sliced(-1)).find("budget_slice max_slice -1"), std::string::npos);
  EXPECT_NE(message(sliced(5, 10)).find("budget_slice interval"), std::string::npos);
  EXPECT_NE(message(sliced(5, kSecond, 0)).find("budget_slice share 0"), std::string::npos);
  // A slice's options are not part of the state: turning slices on keeps the usage.
  EXPECT_EQ(Policy::make("p", Strategy::kGcra, "10/second", sliced(5)).value().state_id(),
            Policy::make("p", Strategy::kGcra, "10/second").value().state_id());
}

// One instance admits exactly the limit: its slices shrink with what is left, down to the exact path.
TEST(BudgetSlices, OneInstanceAdmitsExactlyTheLimitWithFewStoreCalls) {
  auto clock = std::make_shared<ManualClock>(kStart);
  auto storage = std::make_shared<MemoryStorage>();
  Limiter limiter(storage, clock);
  const Policy p = Policy::make("p", Strategy::kFixedWindow, "10000/second", sliced(1000)).value();
  for (int window = 0; window < 3; ++window) {
    clock->set(kStart + window * kSecond);
    std::int64_t admitted = 0;
    for (int i = 0; i < 15000; ++i) {
      const auto d = limiter.hit(p, "hot");
      ASSERT_TRUE(d.ok());
      admitted += d->allowed ? 1 : 0;
    }
    EXPECT_EQ(admitted, 10000) << "window " << window;
  }
  const BudgetStats s = limiter.budget_stats();
  EXPECT_GT(s.local, 25000u);
  EXPECT_LT(s.store_calls, 200u);
  EXPECT_EQ(s.held, 0);
}

// Unused units go back when the slice ends: flush (shutdown), idle (end_budgets), destructor.
TEST(BudgetSlices, UnusedUnitsGoBack) {
  auto clock = std::make_shared<ManualClock>(kStart);
  auto storage = std::make_shared<MemoryStorage>();
  const Policy p = Policy::make("p", Strategy::kTokenBucket, "1000/second", sliced(100)).value();
  Limiter probe(storage, clock);
  {
    Limiter limiter(storage, clock);
    for (int i = 0; i < 50; ++i) ASSERT_TRUE(limiter.hit(p, "k")->allowed);
    const BudgetStats s = limiter.budget_stats();
    ASSERT_GT(s.held, 0);
    EXPECT_EQ(probe.stats(p, "k")->remaining, 1000 - 50 - s.held);
    EXPECT_EQ(limiter.flush_budgets(), 1u);
    EXPECT_EQ(limiter.budget_stats().held, 0);
    EXPECT_EQ(probe.stats(p, "k")->remaining, 1000 - 50);

    for (int i = 0; i < 20; ++i) ASSERT_TRUE(limiter.hit(p, "k")->allowed);
    ASSERT_GT(limiter.budget_stats().held, 0);
    EXPECT_EQ(limiter.end_budgets(), 0u);  // not over yet
    clock->advance(kSecond / 10);         // the interval is over: the key is idle
    EXPECT_EQ(limiter.end_budgets(), 1u);
    EXPECT_EQ(limiter.budget_stats().held, 0);
    // 100 ms refilled 100 of the 70 used: full again.
    EXPECT_EQ(probe.stats(p, "k")->remaining, 1000);

    for (int i = 0; i < 30; ++i) ASSERT_TRUE(limiter.hit(p, "k")->allowed);
    ASSERT_GT(limiter.budget_stats().held, 0);
  }  // the destructor settles
  EXPECT_EQ(probe.stats(p, "k")->remaining, 1000 - 30);
}

// A clear drops the slice with the state.
TEST(BudgetSlices, ClearDropsTheSlice) {
  auto clock = std::make_shared<ManualClock>(kStart);
  auto storage = std::make_shared<MemoryStorage>();
  Limiter limiter(storage, clock);
  const Policy p = Policy::make("p", Strategy::kFixedWindow, "100/second", sliced(10)).value();
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(limiter.hit(p, "k")->allowed);
  EXPECT_FALSE(limiter.hit(p, "k")->allowed);
  ASSERT_TRUE(limiter.clear(p, "k").ok());
  EXPECT_EQ(limiter.budget_stats().held, 0);
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(limiter.hit(p, "k")->allowed) << i;
  EXPECT_FALSE(limiter.hit(p, "k")->allowed);
}

struct Fleet {
  explicit Fleet(int instances) : clock(std::make_shared<ManualClock>(kStart)) {
    for (int i = 0; i < instances; ++i) limiters.push_back(std::make_unique<Limiter>(storage, clock));
  }
  std::shared_ptr<ManualClock> clock;
  std::shared_ptr<MemoryStorage> storage = std::make_shared<MemoryStorage>();
  std::vector<std::unique_ptr<Limiter>> limiters;
  std::int64_t held() const {
    std::int64_t h = 0;
    for (const auto& l : limiters) h += l->budget_stats().held;
    return h;
  }
};

// `threads` threads hit random instances with `cost` at the clock's time, `per_thread` times each.
// With `first_try_slice`, as the service's I/O threads: Limiter::try_budget first, then a hit when
// it does not answer.
std::int64_t burst(Fleet& fleet, const Policy& p, int threads, int per_thread, std::int64_t cost,
                   std::atomic<std::int64_t>& errors, bool first_try_slice = false) {
  std::atomic<std::int64_t> admitted{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::int64_t mine = 0;
      for (int i = 0; i < per_thread; ++i) {
        Limiter& l = *fleet.limiters[static_cast<std::size_t>(t + i) % fleet.limiters.size()];
        if (first_try_slice) {
          if (const auto local = l.try_budget(Limiter::Request{&p, "hot", cost, Effect::kHit}, fleet.clock->now())) {
            if (!local->allowed) errors.fetch_add(1);  // it answers only with an admission
            mine += cost;
            continue;
          }
        }
        const auto d = l.hit(p, "hot", cost);
        if (!d.ok() || d->degraded) {
          errors.fetch_add(1);
          continue;
        }
        mine += d->allowed ? cost : 0;
      }
      admitted.fetch_add(mine);
    });
  }
  for (auto& th : pool) th.join();
  return admitted.load();
}

// Windows: admitted ≤ the limit in every window; what is not admitted of a window whose demand
// exceeds the limit is at most what the instances' slices held (instances × max_slice).
void check_windows(Strategy strategy, int instances, int threads, std::int64_t cost, bool first_try_slice = false) {
  constexpr std::int64_t kLimit = 5000;
  constexpr std::int64_t kMaxSlice = 200;
  Fleet fleet(instances);
  const Policy p = Policy::make("p", strategy, "5000/second", sliced(kMaxSlice)).value();
  std::atomic<std::int64_t> errors{0};
  const std::int64_t bound = instances * kMaxSlice;
  for (int window = 0; window < 4; ++window) {
    std::int64_t admitted = 0;
    // Ten steps of 100 ms (the slice interval) in the window, demand twice the limit.
    for (int step = 0; step < 10; ++step) {
      fleet.clock->set(kStart + window * kSecond + step * kSecond / 10);
      admitted += burst(fleet, p, threads, static_cast<int>(2 * kLimit / 10 / threads / cost), cost, errors,
                        first_try_slice);
      ASSERT_LE(fleet.held(), bound);
    }
    EXPECT_LE(admitted, kLimit) << to_string(strategy) << " window " << window;
    if (strategy == Strategy::kFixedWindow) {
      EXPECT_GE(admitted, kLimit - bound) << "window " << window;
    }
  }
  EXPECT_EQ(errors.load(), 0);
  std::uint64_t local = 0;
  std::uint64_t calls = 0;
  for (const auto& l : fleet.limiters) {
    local += l->budget_stats().local;
    calls += l->budget_stats().store_calls;
  }
  EXPECT_GT(local, 10 * calls) << to_string(strategy);
}

TEST(BudgetSlicesConcurrent, FixedWindowFourInstancesFourThreads) { check_windows(Strategy::kFixedWindow, 4, 4, 1); }

// A slice interval longer than the window: the window's end ends the slice (a unit charged to one
// window is never admitted in the next). Steps of 30 ms cross each boundary with slices open.
TEST(BudgetSlicesConcurrent, AWindowEndEndsTheSlice) {
  for (const Strategy strategy : {Strategy::kFixedWindow, Strategy::kSlidingWindowCounter}) {
    constexpr std::int64_t kLimit = 3000;
    Fleet fleet(3);
    const Policy p = Policy::make("p", strategy, "3000/second", sliced(300, 10 * kSecond)).value();
    std::atomic<std::int64_t> errors{0};
    std::vector<std::int64_t> per_window(8, 0);
    for (Micros t = kSecond / 2; t < 7 * kSecond; t += 30'000) {
      fleet.clock->set(kStart + t);
      per_window[static_cast<std::size_t>(t / kSecond)] += burst(fleet, p, 3, 40, 1, errors);
    }
    for (std::size_t w = 0; w < per_window.size(); ++w) {
      EXPECT_LE(per_window[w], kLimit) << to_string(strategy) << " window " << w;
    }
    // Demand (about 4,000 a window) exceeds the limit: the fixed window admits all but what the
    // slices held when it ended.
    if (strategy == Strategy::kFixedWindow) {
      for (std::size_t w = 1; w < 7; ++w) EXPECT_GE(per_window[w], kLimit - 3 * 300) << "window " << w;
    }
    EXPECT_EQ(errors.load(), 0);
  }
}
TEST(BudgetSlicesConcurrent, TrySliceFirstAsTheServiceDoes) { check_windows(Strategy::kFixedWindow, 4, 4, 1, true); }
TEST(BudgetSlicesConcurrent, FixedWindowCostThree) { check_windows(Strategy::kFixedWindow, 3, 4, 3); }
TEST(BudgetSlicesConcurrent, SlidingWindowCounter) { check_windows(Strategy::kSlidingWindowCounter, 4, 4, 1); }

// Buckets: from the start (full), what is admitted up to t is at most capacity + rate·t, and the
// shortfall against a demand that always exceeds it is at most the bound.
void check_bucket(Strategy strategy) {
  constexpr std::int64_t kRate = 5000;  // per second, capacity the same
  constexpr std::int64_t kMaxSlice = 100;
  constexpr int kInstances = 4;
  Fleet fleet(kInstances);
  const Policy p = Policy::make("p", strategy, "5000/second", sliced(kMaxSlice)).value();
  std::atomic<std::int64_t> errors{0};
  std::int64_t admitted = 0;
  for (int step = 0; step <= 30; ++step) {  // 3 s in steps of 100 ms
    const Micros t = step * kSecond / 10;
    fleet.clock->set(kStart + t);
    admitted += burst(fleet, p, 4, 1500, 1, errors);
    const std::int64_t allowed = kRate + kRate * t / kSecond;
    ASSERT_LE(admitted, allowed) << to_string(strategy) << " at " << t;
    EXPECT_GE(admitted, allowed - kInstances * kMaxSlice) << to_string(strategy) << " at " << t;
  }
  EXPECT_EQ(errors.load(), 0);
}

TEST(BudgetSlicesConcurrent, TokenBucket) { check_bucket(Strategy::kTokenBucket); }
TEST(BudgetSlicesConcurrent, Gcra) { check_bucket(Strategy::kGcra); }

// The same fleet without slices stays exact (every hit is a storage call).
TEST(BudgetSlicesConcurrent, OffIsTheExactPath) {
  Fleet fleet(4);
  const Policy p = Policy::make("p", Strategy::kFixedWindow, "5000/second").value();
  std::atomic<std::int64_t> errors{0};
  EXPECT_EQ(burst(fleet, p, 4, 2000, 1, errors), 5000);
  for (const auto& l : fleet.limiters) EXPECT_EQ(l->budget_stats().store_calls, 0u);
}

}  // namespace
}  // namespace floodgate
