// SystemClock (abseil's realtime clock, extrapolated from the cycle counter between readings of the
// kernel's, and the kernel's own while abseil's calibrates: src/clock.cpp) against clock_gettime
// itself: decisions read it once each, so it must be both cheap and right.
#include <time.h>

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "floodgate/clock.hpp"

namespace floodgate {
namespace {

Micros kernel_realtime_micros() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<Micros>(ts.tv_sec) * kMicrosPerSecond + ts.tv_nsec / 1000;
}

struct Drift {
  long reads = 0;
  long outside = 0;    // readings not between the kernel's readings around them (± 10 µs)
  long backwards = 0;  // readings behind this thread's previous one
};

// Reads the clock between two readings of clock_gettime for `ms` milliseconds.
Drift read_for(int ms) {
  const SystemClock& clock = *SystemClock::instance();
  Drift d;
  Micros previous = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < end) {
    const Micros before = kernel_realtime_micros();
    const Micros x = clock.now();
    const Micros after = kernel_realtime_micros();
    ++d.reads;
    d.outside += (x < before - 10 || x > after + 10) ? 1 : 0;
    d.backwards += x < previous ? 1 : 0;
    previous = x;
  }
  return d;
}

// 900 ms: the process's first 0.6 s read the kernel's clock, the rest abseil's, and the switch
// between them is in the run.
TEST(ClockTest, SystemClockAgreesWithTheKernelWithinMicroseconds) {
  const Drift d = read_for(900);
  EXPECT_GT(d.reads, 1000);
  EXPECT_EQ(d.outside, 0) << "of " << d.reads;
  EXPECT_EQ(d.backwards, 0);
}

// Both threads cross the switch from the kernel's clock to abseil's too.
TEST(ClockTest, EachThreadAgreesAndNeverGoesBack) {
  std::vector<Drift> drifts(2);
  std::vector<std::thread> threads;
  for (auto& d : drifts) threads.emplace_back([&d] { d = read_for(800); });
  for (auto& t : threads) t.join();
  for (const Drift& d : drifts) {
    EXPECT_GT(d.reads, 1000);
    EXPECT_EQ(d.outside, 0) << "of " << d.reads;
    EXPECT_EQ(d.backwards, 0);
  }
}

}  // namespace
}  // namespace floodgate
