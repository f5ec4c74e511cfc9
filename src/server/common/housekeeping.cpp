// What serve runs after each storage maintenance: unused compiled policies dropped, heap trimmed.
#include "server/common/housekeeping.hpp"

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace floodgate::server {

Housekeeping::Housekeeping(std::vector<Sweep> sweeps, Options options)
    : sweeps_(std::move(sweeps)), options_(options) {}

std::size_t Housekeeping::free_heap() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  return mallinfo2().fordblks;
#else
  return 0;
#endif
}

void Housekeeping::run(Micros now) {
  if (now >= next_sweep_) {
    next_sweep_ = now + options_.sweep_every;
    std::size_t n = 0;
    for (const Sweep& sweep : sweeps_) n += sweep();
    dropped_.fetch_add(n, std::memory_order_relaxed);
    dropped_since_trim_ = dropped_since_trim_ || n > 0;
  }
  trim_if_due(now);
}

// The free heap is sampled each round: what it grew by since its lowest point after the last
// trim was freed since (and may be resident); memory reused and freed again counts again. Dropped
// policies are few bytes, but they may be what pinned the pages of much more.
void Housekeeping::trim_if_due(Micros now) {
  const std::size_t free = free_heap();
  lowest_free_ = seen_ ? std::min(lowest_free_, free) : free;
  seen_ = true;
  if (now < next_trim_ || (!dropped_since_trim_ && free < lowest_free_ + options_.trim_after)) return;
#if defined(__GLIBC__)
  const auto start = std::chrono::steady_clock::now();
  malloc_trim(0);
  const auto took = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start);
  trims_.fetch_add(1, std::memory_order_relaxed);
  longest_.store(std::max<Micros>(longest_.load(std::memory_order_relaxed), took.count()), std::memory_order_relaxed);
  spdlog::debug("returned the free heap to the system ({} MiB free) in {} µs", free >> 20, took.count());
#endif
  next_trim_ = now + options_.trim_every;
  lowest_free_ = free;
  dropped_since_trim_ = false;
}

void Housekeeping::render(PromText& out) const {
  out.single("floodgate_policies_dropped_total", "counter",
             "Compiled inline limits and limit overrides dropped because they were no longer used.", dropped());
  out.single("floodgate_memory_trims_total", "counter",
             "Times the free heap was given back to the system after memory was freed.", trims());
  out.single("floodgate_memory_trim_longest_seconds", "gauge", "The longest of those trims.",
             static_cast<double>(longest_trim()) / 1e6);
}

}  // namespace floodgate::server
