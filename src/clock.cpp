#include "floodgate/clock.hpp"

#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace floodgate {

namespace {

// abseil's realtime clock extrapolates from the CPU's cycle counter between readings of the
// kernel's clock, re-calibrated as it goes: 10-13 ns a reading here against 22-28 for
// clock_gettime's vDSO (which was 14 % of Limiter::hit's profile). But it is fast only once
// calibrated: for its first half second, and again for half a second after 3-5 s without a
// reading, every reading takes a process-wide spin lock and the kernel's clock (measured with
// bench/inprocess/clock_read: 275-305 ns a reading with two threads, against 10 warm). A
// limiter's traffic comes in bursts, so each burst after a quiet spell would start on that path.
// SystemClock therefore reads the kernel's clock itself while abseil's is not calibrated, and
// hands abseil one reading every kRefresh so that it calibrates meanwhile. ClockTest.* check
// every reading against clock_gettime's.
constexpr std::int64_t kNanosPerMilli = 1'000'000;
constexpr std::int64_t kRefresh = 100 * kNanosPerMilli;
// abseil starts over when its last sample of the kernel's clock is 5 s old, and it samples about
// every 2.1 s while read: a gap between readings longer than this may have made it start over.
constexpr std::int64_t kStale = 2'500 * kNanosPerMilli;
// abseil calibrates on its first reading 0.5 s after it started over.
constexpr std::int64_t kWarmUp = 600 * kNanosPerMilli;

// When abseil's clock last had a reading from SystemClock, and from when it is calibrated (ns).
// Written about once per kRefresh: the cache line stays shared between the cores.
struct alignas(64) AbseilClockState {
  std::atomic<std::int64_t> fed{0};
  std::atomic<std::int64_t> calibrated_from{0};
};
AbseilClockState g_abseil;

std::int64_t kernel_nanos() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// A reading `t` of abseil's clock, `since` after the previous one SystemClock noted (either sign:
// the clock may step).
void note_reading(std::int64_t t, std::int64_t since) noexcept {
  if (since > kStale || since < -kStale) {
    g_abseil.calibrated_from.store(t + kWarmUp, std::memory_order_relaxed);
  }
  g_abseil.fed.store(t, std::memory_order_relaxed);
}

}  // namespace

Micros SystemClock::now() const noexcept {
  const std::int64_t fed = g_abseil.fed.load(std::memory_order_relaxed);
  if (fed >= g_abseil.calibrated_from.load(std::memory_order_relaxed)) [[likely]] {
    const std::int64_t t = absl::GetCurrentTimeNanos();
    const std::int64_t since = t - fed;
    if (static_cast<std::uint64_t>(since) >= static_cast<std::uint64_t>(kRefresh)) [[unlikely]] {
      note_reading(t, since);
    }
    return t / 1000;
  }
  // abseil's clock is calibrating: the kernel's, and abseil a reading now and then.
  const std::int64_t t = kernel_nanos();
  if (t - fed >= kRefresh || t < fed) {
    const std::int64_t abseil = absl::GetCurrentTimeNanos();
    note_reading(abseil, abseil - fed);
  }
  return t / 1000;
}

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

std::string format_seconds(Micros d) {
  const bool negative = d < 0;
  const std::uint64_t a = negative ? static_cast<std::uint64_t>(-(d + 1)) + 1 : static_cast<std::uint64_t>(d);
  std::string frac = std::to_string(a % 1'000'000);
  frac.insert(0, 6 - frac.size(), '0');
  while (frac.size() > 1 && frac.back() == '0') frac.pop_back();
  return absl::StrCat(negative ? "-" : "", a / 1'000'000, ".", frac);
}

}  // namespace floodgate
