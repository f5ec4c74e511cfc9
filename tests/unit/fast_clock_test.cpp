// The realtime clock behind SystemClock (src/util/fast_clock.cpp) against clock_gettime itself.
#include "util/fast_clock.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace floodgate {
namespace {

bool kernel_clock_is_tsc() {
  std::ifstream f("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string name;
  f >> name;
  return name == "tsc";
}

struct Drift {
  long reads = 0;
  long outside = 0;    // readings not between the system clock's readings around them (± 10 µs)
  long backwards = 0;  // readings behind this thread's previous one
};

// Reads the clock between two readings of clock_gettime for `ms` milliseconds.
Drift read_for(int ms) {
  Drift d;
  Micros previous = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < end) {
    const Micros before = detail::system_realtime_micros();
    const Micros x = detail::realtime_micros();
    const Micros after = detail::system_realtime_micros();
    ++d.reads;
    d.outside += (x < before - 10 || x > after + 10) ? 1 : 0;
    d.backwards += x < previous ? 1 : 0;
    previous = x;
  }
  return d;
}

TEST(FastClock, AgreesWithTheSystemClockWithinMicroseconds) {
  const Drift d = read_for(150);  // past two calibration periods: the TSC is used by then
  EXPECT_GT(d.reads, 1000);
  EXPECT_EQ(d.outside, 0) << "of " << d.reads;
  EXPECT_EQ(d.backwards, 0);
  // Where the kernel keeps time with the TSC, the fast path must actually be taken.
  if (kernel_clock_is_tsc()) {
    EXPECT_TRUE(detail::realtime_extrapolates());
  }
}

TEST(FastClock, EachThreadAgreesAndNeverGoesBack) {
  std::vector<Drift> drifts(2);
  std::vector<std::thread> threads;
  for (auto& d : drifts) threads.emplace_back([&d] { d = read_for(100); });
  for (auto& t : threads) t.join();
  for (const Drift& d : drifts) {
    EXPECT_GT(d.reads, 1000);
    EXPECT_EQ(d.outside, 0) << "of " << d.reads;
    EXPECT_EQ(d.backwards, 0);
  }
}

}  // namespace
}  // namespace floodgate
