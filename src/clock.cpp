#include "floodgate/clock.hpp"

#include <chrono>

#include "absl/time/clock.h"

namespace floodgate {

// abseil's realtime clock: where it can, it extrapolates from the CPU's cycle counter between
// readings of the kernel's clock, re-calibrated as it goes (about half the cost of clock_gettime's
// vDSO here, 13 against 28 ns; the vDSO was 14% of Limiter::hit's profile). ClockTest.* check that
// every reading lies between two clock_gettime readings around it.
Micros SystemClock::now() const noexcept { return absl::GetCurrentTimeNanos() / 1000; }

bool SystemClock::wait_until(Micros deadline, std::stop_token stop) const {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock<std::mutex> lock(mu);
  const std::chrono::system_clock::time_point at{std::chrono::microseconds(deadline)};
  // Re-checks the clock after each wake: the system clock may step.
  while (now() < deadline) {
    if (stop.stop_requested()) return false;
    cv.wait_until(lock, stop, at, [] { return false; });
  }
  return true;
}

bool ManualClock::wait_until(Micros deadline, std::stop_token stop) const {
  std::unique_lock<std::mutex> lock(mu_);
  const auto me = sleepers_.insert(sleepers_.end(), Sleeper{deadline, stop});
  const bool reached = cv_.wait(lock, stop, [&] { return now() >= deadline; });
  sleepers_.erase(me);
  return reached;
}

void ManualClock::set(Micros t) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    now_.store(t, std::memory_order_release);
  }
  cv_.notify_all();
}

void ManualClock::advance(Micros d) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    now_.fetch_add(d, std::memory_order_acq_rel);
  }
  cv_.notify_all();
}

int ManualClock::sleepers() const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const Sleeper& s : sleepers_) n += (s.deadline > now() && !s.stop.stop_requested()) ? 1 : 0;
  return n;
}

std::shared_ptr<const SystemClock> SystemClock::instance() {
  static const auto clock = std::make_shared<const SystemClock>();
  return clock;
}

}  // namespace floodgate
