// acquire on simulated time: 3 per second with 10 requests at once, at exact instants, deadlines answered at once,
// FIFO order, shutdown and cancellation, the shaper; and the asynchronous form on real time.
#include "floodgate/throttle.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include "floodgate/memory_storage.hpp"

namespace floodgate {
namespace {

constexpr Micros kT0 = 1'700'000'000'000'000;
constexpr Micros kSec = kMicrosPerSecond;

struct Sim {
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>(kT0);
  std::shared_ptr<Limiter> limiter =
      std::make_shared<Limiter>(std::make_shared<MemoryStorage>(), clock);
  Throttle throttle{limiter};

  // Waits (real time, bounded) until `sleeping` callers sleep in the clock and `done` callers have
  // returned from acquire: together they mark the state in which nothing moves until the clock
  // does. Either count alone also holds for an instant in passing (a waiter woken for its turn is
  // not counted until it sleeps again), which made a test see a state that then changed.
  // Then a little longer, so that a caller wrongly admitted in that state would be counted.
  bool settle(int sleeping, const std::atomic<int>& done, int want_done) const {
    for (int i = 0; i < 10'000; ++i) {
      if (clock->sleepers() == sleeping && done.load() == want_done) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (clock->sleepers() == sleeping && done.load() == want_done) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ADD_FAILURE() << "expected " << sleeping << " sleeping and " << want_done << " done, found "
                  << clock->sleepers() << " and " << done.load();
    return false;
  }

  // Lets every caller still waiting return (past its deadline), so that threads can be joined
  // after a failed check instead of hanging the test.
  void release_all() const { clock->set(kT0 + 100 * 3600 * kSec); }
};

// 3 per second, 10 requests at once. Returns the instants (µs after kT0) at which the
// requests were admitted, checking at each step that none is admitted a microsecond early.
std::vector<Micros> run_three_per_second(Strategy strategy, const std::vector<Micros>& instants) {
  Sim sim;
  const Policy p = Policy::make("api", strategy, "3/second").value();
  std::atomic<int> granted{0};
  std::vector<Micros> at;
  std::mutex at_mu;
  std::vector<std::thread> threads;
  for (int i = 0; i < 10; ++i) {
    threads.emplace_back([&] {
      const AcquireResult r = sim.throttle.acquire(p, "client", 1, 60 * kSec);
      EXPECT_TRUE(r.acquired()) << r.status;
      std::lock_guard<std::mutex> l(at_mu);
      at.push_back(sim.clock->now() - kT0);
      ++granted;
    });
  }
  EXPECT_TRUE(sim.settle(7, granted, 3));  // 3 got through at once, 7 wait
  int expected = 3;
  for (Micros t : instants) {
    sim.clock->set(kT0 + t - 1);  // one microsecond early: nobody more
    EXPECT_TRUE(sim.settle(10 - expected, granted, expected)) << "at " << t - 1;
    sim.clock->set(kT0 + t);
    const int now_granted = std::min(10, expected + (strategy == Strategy::kMovingWindow ? 3 : 1));
    EXPECT_TRUE(sim.settle(10 - now_granted, granted, now_granted)) << "at " << t;
    expected = now_granted;
  }
  sim.release_all();
  for (auto& th : threads) th.join();
  std::sort(at.begin(), at.end());
  return at;
}

TEST(Throttle, Seed004MovingWindowThreePerSecondTenAtOnce) {
  // The log frees all three slots one microsecond after they are a second old.
  const std::vector<Micros> at =
      run_three_per_second(Strategy::kMovingWindow, {kSec + 1, 2 * kSec + 2, 3 * kSec + 3});
  EXPECT_EQ(at, (std::vector<Micros>{0, 0, 0, kSec + 1, kSec + 1, kSec + 1, 2 * kSec + 2,
                                     2 * kSec + 2, 2 * kSec + 2, 3 * kSec + 3}));
}

TEST(Throttle, Seed004GcraThreePerSecondTenAtOnce) {
  // 3 at once, then one every third of a second, each at ⌈k·10^6/3⌉ µs.
  std::vector<Micros> instants;
  for (int k = 1; k <= 7; ++k) instants.push_back((k * kSec + 2) / 3);
  const std::vector<Micros> at = run_three_per_second(Strategy::kGcra, instants);
  std::vector<Micros> want = {0, 0, 0};
  want.insert(want.end(), instants.begin(), instants.end());
  EXPECT_EQ(at, want);
}

TEST(Throttle, TryAcquireReturnsAtOnceWhenTheSlotComesTooLate) {
  Sim sim;
  const Policy p = Policy::make("api", Strategy::kGcra, "1/second").value();
  ASSERT_TRUE(sim.throttle.acquire(p, "k", 1, 0).acquired());
  const AcquireResult r = sim.throttle.acquire(p, "k", 1, 500'000);  // the slot is 1 s away
  EXPECT_FALSE(r.acquired());
  EXPECT_EQ(r.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(r.waited, 0);  // no sleep on the simulated clock
  EXPECT_EQ(sim.clock->sleepers(), 0);
  const AcquireResult never = sim.throttle.acquire(p, "k", 2, 100 * kSec);
  EXPECT_EQ(never.status.code(), absl::StatusCode::kInvalidArgument);
}

TEST(Throttle, FifoOrderOnOneKey) {
  Sim sim;
  const Policy p = Policy::make("api", Strategy::kGcra, "1/second").value();
  ASSERT_TRUE(sim.throttle.acquire(p, "k", 1, 0).acquired());
  std::vector<int> order;
  std::mutex mu;
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 5; ++i) {
    threads.emplace_back([&, i] {
      EXPECT_TRUE(sim.throttle.acquire(p, "k", 1, 100 * kSec).acquired());
      std::lock_guard<std::mutex> l(mu);
      order.push_back(i);
      ++done;
    });
    EXPECT_TRUE(sim.settle(i + 1, done, 0));  // thread i is in line before thread i+1 starts
  }
  for (int k = 1; k <= 5; ++k) {
    sim.clock->set(kT0 + k * kSec);
    EXPECT_TRUE(sim.settle(5 - k, done, k));
  }
  sim.release_all();
  for (auto& th : threads) th.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(Throttle, ShutdownAndStopWakeWaitersPromptly) {
  Sim sim;
  const Policy p = Policy::make("api", Strategy::kGcra, "1/hour").value();
  ASSERT_TRUE(sim.throttle.acquire(p, "k", 1, 0).acquired());
  std::stop_source stop;
  std::atomic<int> done{0};
  std::thread stopped([&] {
    const AcquireResult r = sim.throttle.acquire(p, "k", 1, 10 * 3600 * kSec, stop.get_token());
    EXPECT_EQ(r.status.code(), absl::StatusCode::kCancelled);
    ++done;
  });
  std::vector<std::thread> waiting;
  for (int i = 0; i < 3; ++i) {
    waiting.emplace_back([&] {
      const AcquireResult r = sim.throttle.acquire(p, "k", 1, 10 * 3600 * kSec);
      EXPECT_EQ(r.status.code(), absl::StatusCode::kCancelled);
    });
  }
  EXPECT_TRUE(sim.settle(4, done, 0));
  stop.request_stop();
  stopped.join();
  EXPECT_TRUE(sim.settle(3, done, 1));
  sim.throttle.shutdown();
  for (auto& th : waiting) th.join();
  EXPECT_EQ(sim.throttle.acquire(p, "other", 1, 0).status.code(), absl::StatusCode::kCancelled);
}

TEST(Throttle, ShaperWaitsTheDelayForAConstantRate) {
  Sim sim;
  PolicyOptions o;
  o.shape = true;
  const Policy p = Policy::make("pace", Strategy::kLeakyBucket, "5/second", o).value();
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&] {
      EXPECT_TRUE(sim.throttle.acquire(p, "k", 1, 10 * kSec).acquired());
      ++done;
    });
  }
  // One left at once; two wait their delay (200 ms and 400 ms).
  EXPECT_TRUE(sim.settle(2, done, 1));
  sim.clock->set(kT0 + 199'999);
  EXPECT_TRUE(sim.settle(2, done, 1));
  sim.clock->set(kT0 + 200'000);
  EXPECT_TRUE(sim.settle(1, done, 2));
  sim.clock->set(kT0 + 400'000);
  for (auto& th : threads) th.join();
  EXPECT_EQ(done.load(), 3);
}

TEST(Throttle, AShaperDelayBeyondTheDeadlineIsRefusedAtOnceWithoutConsuming) {
  Sim sim;
  PolicyOptions o;
  o.shape = true;
  o.burst = 2;
  const Policy p = Policy::make("pace", Strategy::kLeakyBucket, "1/hour", o).value();
  ASSERT_TRUE(sim.throttle.acquire(p, "k", 1, 0).acquired());
  const AcquireResult r = sim.throttle.acquire(p, "k", 1, kSec);  // would be admitted with 1 h delay
  EXPECT_EQ(r.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(r.waited, 0);
  EXPECT_EQ(sim.limiter->stats(p, "k")->remaining, 1);  // nothing consumed by the refusal
}

TEST(Throttle, AsyncAcquireCompletesHandlersInOrderWithoutBlocking) {
  auto limiter = std::make_shared<Limiter>(std::make_shared<MemoryStorage>());
  Throttle throttle(limiter);
  PolicyOptions o;
  o.burst = 1;
  const Policy p = Policy::make("api", Strategy::kGcra, "20/second", o).value();
  boost::asio::io_context ioc;
  std::vector<int> order;
  std::vector<Micros> at;
  const Micros start = limiter->clock().now();
  for (int i = 0; i < 5; ++i) {
    throttle.async_acquire(ioc.get_executor(), p, "k", 1, 10 * kSec, [&, i](AcquireResult r) {
      EXPECT_TRUE(r.acquired()) << r.status;
      order.push_back(i);
      at.push_back(limiter->clock().now() - start);
    });
  }
  bool too_late = false;
  throttle.async_acquire(ioc.get_executor(), p, "k", 1, 10'000, [&](AcquireResult r) {
    too_late = r.status.code() == absl::StatusCode::kDeadlineExceeded;
  });
  ioc.run();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  ASSERT_EQ(at.size(), 5u);
  // One every 50 ms: slot i never before i × 50 ms (the handler records it a little after the
  // slot was taken, so the gap between two records may be shorter than 50 ms). A late timer moves
  // the later slots too, so the upper bounds are loose, and still far below the 10 s deadline: no
  // handler waited for it or blocked.
  for (std::size_t i = 1; i < at.size(); ++i) {
    EXPECT_GE(at[i], static_cast<Micros>(i) * 50'000 - 1'000) << i;
    EXPECT_LT(at[i] - at[i - 1], 1'000'000) << i;
  }
  EXPECT_LT(at.back(), 2'000'000);
  EXPECT_TRUE(too_late);
}

// A lease is waited for until a holder releases it (polling with backoff, on the real clock):
// the waiter gets the slot soon after the release, not at the held lease's end (10 s away).
TEST(ThrottleLeases, AWaiterGetsTheSlotAReleaseFrees) {
  auto limiter = std::make_shared<Limiter>(std::make_shared<MemoryStorage>());
  Throttle throttle(limiter);
  const Policy p = Policy::make("slots", Strategy::kConcurrency, "1 concurrent for 10 seconds").value();
  auto held = limiter->acquire(p, "k");
  ASSERT_TRUE(held.ok() && held->held());
  LeaseResult got;
  std::thread waiter([&] { got = throttle.acquire_lease(p, "k", 1, 5 * kMicrosPerSecond); });
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  const auto released_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(held->release().ok());
  waiter.join();
  const auto after_release = std::chrono::steady_clock::now() - released_at;
  ASSERT_TRUE(got.acquired()) << got.status;
  EXPECT_TRUE(got.lease.held());
  EXPECT_GE(got.waited, 50'000);
  EXPECT_LT(after_release, std::chrono::seconds(2)) << "woken by polling, not by the lease's end";
  // Nothing released: the waiter waits to its deadline (a release could come), then gives up.
  const LeaseResult late = throttle.acquire_lease(p, "k", 1, 80'000);
  EXPECT_EQ(late.status.code(), absl::StatusCode::kDeadlineExceeded) << late.status;
  EXPECT_GE(late.waited, 80'000);
  EXPECT_FALSE(late.lease.held());
  // A rate policy is refused by acquire_lease, a concurrency policy by acquire.
  const Policy rate = Policy::make("rate", Strategy::kGcra, "1/second").value();
  EXPECT_EQ(throttle.acquire_lease(rate, "k", 1, 0).status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(throttle.acquire(p, "k", 1, 0).status.code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace floodgate
