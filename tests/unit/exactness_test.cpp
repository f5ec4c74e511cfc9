// Exactness both ways: a greedy client on one key at 1000/s for 60 simulated seconds in 1 ms steps
// gets exactly the analytic count — no drift after 60,000 refills, no under-admission.
#include <gtest/gtest.h>

#include "floodgate/limiter.hpp"
#include "floodgate/memory_storage.hpp"

namespace floodgate {
namespace {

constexpr Micros kMs = 1000;

// At every millisecond from t0 for 60 s, hits until denied; returns the admitted count.
std::int64_t greedy_count(Strategy s, std::string_view limits, PolicyOptions o = {}) {
  const Micros t0 = 1'700'000'000'000'000;  // a whole second: windows align with the run
  auto clock = std::make_shared<ManualClock>(t0);
  Limiter limiter(std::make_shared<MemoryStorage>(), clock);
  const Policy p = Policy::make("greedy", s, limits, o).value();
  std::int64_t admitted = 0;
  for (Micros step = 0; step < 60'000; ++step) {
    clock->set(t0 + step * kMs);
    for (;;) {
      const Decision d = limiter.hit(p, "k").value();
      if (!d.allowed) {
        EXPECT_GT(d.retry_after, 0);
        break;
      }
      ++admitted;
    }
  }
  return admitted;
}

TEST(Exactness, FixedWindowClockAligned) {
  // 60 windows of one second, 1000 each.
  EXPECT_EQ(greedy_count(Strategy::kFixedWindow, "1000/second"), 60'000);
}

TEST(Exactness, FixedWindowFirstHit) {
  PolicyOptions o;
  o.anchor = Anchor::kFirstHit;
  // Windows open at 0, 1 s, 2 s, …: the first hit after each window ends opens the next.
  EXPECT_EQ(greedy_count(Strategy::kFixedWindow, "1000/second", o), 60'000);
}

TEST(Exactness, MovingWindow) {
  // 1000 at t = 0; they leave the window 1 µs after 1 s, so the next 1000 go at 1.001 s, then at
  // 2.002 s, …: 60 bursts (k·1.001 s ≤ 59.999 s for k ≤ 59).
  EXPECT_EQ(greedy_count(Strategy::kMovingWindow, "1000/second"), 60'000);
}

TEST(Exactness, BucketsStartFullThenRefillOneEveryMillisecond) {
  // 1000 at t = 0 (a full bucket), then exactly one token per millisecond for 59,999 ms.
  EXPECT_EQ(greedy_count(Strategy::kTokenBucket, "1000/second"), 60'999);
  EXPECT_EQ(greedy_count(Strategy::kLeakyBucket, "1000/second"), 60'999);
  EXPECT_EQ(greedy_count(Strategy::kGcra, "1000/second"), 60'999);
}

TEST(Exactness, BucketRateThatIsNotAWholeNumberOfMicroseconds) {
  // 3 per 7 ms: T = 2333.33… µs. Over 60 s: 3 at once + ⌊60,000 ms · 3/7 ms⌋ refills, minus the
  // partial one at the end: the last tick is 59,999 ms → ⌊59,999·3/7⌋ = 25,713.
  EXPECT_EQ(greedy_count(Strategy::kGcra, "3 per 7 milliseconds"), 3 + 25'713);
}

TEST(Exactness, SlidingWindowCounterWithinItsBound) {
  // The weighted approximation assumes the previous bucket's hits were spread evenly. Stated
  // bound (docs/algorithms.md): over D seconds it admits between N·D/P − N and N·D/P + N.
  const std::int64_t n = greedy_count(Strategy::kSlidingWindowCounter, "1000/second");
  EXPECT_GE(n, 60'000 - 1000);
  EXPECT_LE(n, 60'000 + 1000);
  RecordProperty("sliding_window_counter_admitted", static_cast<int>(n));
}

}  // namespace
}  // namespace floodgate
