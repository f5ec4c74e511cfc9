// The cost of one reading of the system clock, read by two threads at once, in the three moments
// that matter to a limiter: a process's first 0.4 s, a warm process, and the first 0.4 s of a
// burst after 6 s without a reading (abseil's clock, which SystemClock reads once it is
// calibrated, starts over after 3 to 5 s without one: src/clock.cpp). Each source runs in a process of its own, since
// abseil's clock state is process-wide.
//
// usage: clock_read                    all three sources, one child process each
//        clock_read floodgate|abseil|kernel
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "floodgate/clock.hpp"

namespace {

using Steady = std::chrono::steady_clock;

std::int64_t kernel_nanos() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

template <class Read>
double ns_per_read(Read read, std::chrono::milliseconds slice) {
  std::atomic<long> reads{0};
  std::atomic<std::int64_t> sink{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      long n = 0;
      std::int64_t x = 0;
      const auto end = Steady::now() + slice;
      while (Steady::now() < end) {
        for (int i = 0; i < 256; ++i) x += read();
        n += 256;
      }
      reads += n;
      sink += x;
    });
  }
  for (auto& t : threads) t.join();
  return std::chrono::duration<double, std::nano>(slice).count() * 2 / static_cast<double>(reads.load());
}

// Median over four 100 ms slices.
template <class Read>
double phase(Read read) {
  std::vector<double> v;
  for (int i = 0; i < 4; ++i) v.push_back(ns_per_read(read, std::chrono::milliseconds(100)));
  std::sort(v.begin(), v.end());
  return (v[1] + v[2]) / 2;
}

template <class Read>
void run(const char* name, Read read) {
  const double cold = phase(read);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  const double warm = phase(read);
  std::this_thread::sleep_for(std::chrono::seconds(6));
  const double after_idle = phase(read);
  std::printf("%-10s %10.1f %10.1f %14.1f\n", name, cold, warm, after_idle);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "";
  if (which.empty()) {
    std::printf("ns per reading, 2 threads reading at once (median of four 100 ms slices)\n");
    std::printf("%-10s %10s %10s %14s\n", "source", "first 0.4s", "warm", "after 6s idle");
    std::fflush(stdout);
    for (const char* s : {"floodgate", "abseil", "kernel"}) {
      const std::string cmd = std::string("'") + argv[0] + "' " + s;
      if (std::system(cmd.c_str()) != 0) return 1;
    }
    return 0;
  }
  if (which == "floodgate") {
    const floodgate::SystemClock& clock = *floodgate::SystemClock::instance();
    run("floodgate", [&] { return clock.now(); });
  } else if (which == "abseil") {
    run("abseil", [] { return absl::GetCurrentTimeNanos(); });
  } else if (which == "kernel") {
    run("kernel", [] { return kernel_nanos(); });
  } else {
    std::fprintf(stderr, "usage: clock_read [floodgate|abseil|kernel]\n");
    return 2;
  }
  return 0;
}
