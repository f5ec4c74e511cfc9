// Real time: T threads acquire one at a time on one key at R per second for S seconds through one
// Throttle. Prints the achieved rate and, per acquisition, the wait — FIFO means no thread waits
// much longer than T slots.
//   acquire_fairness [THREADS=16] [RATE=1000] [SECONDS=10] [BURST=2]
// With burst 1 (GCRA's τ = 0) every microsecond a woken thread is late is capacity lost for good;
// a burst of 2 lets the next slot absorb up to one slot of scheduling delay.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "floodgate/memory_storage.hpp"
#include "floodgate/throttle.hpp"

int main(int argc, char** argv) {
  using namespace floodgate;
  const int threads = argc > 1 ? std::stoi(argv[1]) : 16;
  const int rate = argc > 2 ? std::stoi(argv[2]) : 1000;
  const int seconds = argc > 3 ? std::stoi(argv[3]) : 10;
  const int burst = argc > 4 ? std::stoi(argv[4]) : 2;
  auto limiter = std::make_shared<Limiter>(std::make_shared<MemoryStorage>());
  Throttle throttle(limiter);
  PolicyOptions o;
  o.burst = burst;
  const Policy p = Policy::make("fair", Strategy::kGcra, std::to_string(rate) + "/second", o).value();
  const Micros start = limiter->clock().now();
  const Micros end = start + static_cast<Micros>(seconds) * kMicrosPerSecond;
  std::atomic<long> acquired{0};
  std::vector<std::vector<Micros>> waits(static_cast<std::size_t>(threads));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      while (limiter->clock().now() < end) {
        const AcquireResult r = throttle.acquire(p, "k", 1, 10 * kMicrosPerSecond);
        if (!r.acquired()) break;
        if (limiter->clock().now() >= end) break;
        waits[static_cast<std::size_t>(t)].push_back(r.waited);
        ++acquired;
      }
    });
  }
  for (auto& th : pool) th.join();
  std::vector<Micros> all;
  for (auto& w : waits) all.insert(all.end(), w.begin(), w.end());
  std::sort(all.begin(), all.end());
  const double achieved = static_cast<double>(acquired.load()) / seconds;
  const double slot_ms = 1000.0 / rate;
  std::printf("burst %d: ", burst);
  std::printf("%d threads, %d/s for %d s: %ld acquired, %.1f/s (%.2f%% from the rate)\n", threads,
              rate, seconds, acquired.load(), achieved, 100.0 * (achieved - rate) / rate);
  std::printf("wait ms: p50 %.3f, p99 %.3f, max %.3f; bound %d slots + 5 ms = %.3f ms\n",
              static_cast<double>(all[all.size() / 2]) / 1e3,
              static_cast<double>(all[all.size() * 99 / 100]) / 1e3,
              static_cast<double>(all.back()) / 1e3, threads, threads * slot_ms + 5.0);
  long min_per_thread = 1L << 40, max_per_thread = 0;
  for (auto& w : waits) {
    min_per_thread = std::min<long>(min_per_thread, static_cast<long>(w.size()));
    max_per_thread = std::max<long>(max_per_thread, static_cast<long>(w.size()));
  }
  std::printf("per thread: min %ld, max %ld acquisitions\n", min_per_thread, max_per_thread);
  return 0;
}
