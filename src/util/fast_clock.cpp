#include "util/fast_clock.hpp"

#include <time.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <mutex>
#include <string>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace floodgate::detail {

namespace {

std::int64_t realtime_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

Micros system_realtime_micros() noexcept { return realtime_ns() / 1000; }

#if defined(__x86_64__)

namespace {

constexpr std::int64_t kSpanNs = 1'000'000;           // a thread re-reads the system clock every ms
constexpr std::int64_t kCalibrationNs = 20'000'000;   // the rate is measured over 20 ms periods
constexpr double kSameRate = 1e-3;                    // rates within 0.1% are the same rate
constexpr double kMaxWidthNs = 4'000;                 // a pair read in more than 4 µs is not used

// The TSC and the realtime clock read together: the TSC at the midpoint of the system call, and
// how many ticks the call took (the reading is uncertain by half of that).
struct Pair {
  std::uint64_t tsc;
  std::int64_t ns;
  std::uint64_t width;
};

// The narrowest of three tries: a thread preempted during one does not spoil the pair.
Pair read_pair() noexcept {
  Pair best{0, 0, ~std::uint64_t{0}};
  for (int i = 0; i < 3; ++i) {
    const std::uint64_t before = __rdtsc();
    const std::int64_t ns = realtime_ns();
    const std::uint64_t after = __rdtsc();
    if (after >= before && after - before < best.width) best = {before + (after - before) / 2, ns, after - before};
  }
  return best;
}

bool kernel_keeps_time_with_tsc() {
  std::ifstream f("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string name;
  f >> name;
  return name == "tsc";
}

// The process's measure of nanoseconds per TSC tick. A period's rate is taken when the period
// before agrees with it within 0.1% (or it agrees with the rate in use): a period spoilt by a
// preempted reading, or by a step of the system clock, is never taken alone.
class Calibration {
 public:
  Calibration() : enabled_(kernel_keeps_time_with_tsc()), base_(read_pair()) {}

  [[nodiscard]] bool enabled() const noexcept { return enabled_; }
  [[nodiscard]] double rate() {
    std::lock_guard<std::mutex> lock(mu_);
    return rate_;
  }

  // Measures the rate from the period's start to `p` once the period is long enough; returns the
  // rate in use (0 until the first period ends).
  double update(const Pair& p) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::int64_t dns = p.ns - base_.ns;
    if (dns < 0 || p.tsc <= base_.tsc) {  // stepped back, or another TSC: start a period afresh
      base_ = p;
      return rate_;
    }
    if (dns < kCalibrationNs) return rate_;
    const double r = static_cast<double>(dns) / static_cast<double>(p.tsc - base_.tsc);
    // Two periods in a row must agree before a rate is taken, the first one included.
    if ((rate_ != 0 && same(r, rate_)) || (pending_ != 0 && same(r, pending_))) {
      rate_ = r;
      pending_ = 0;
    } else {
      pending_ = r;
    }
    base_ = p;
    return rate_;
  }

 private:
  static bool same(double a, double b) { return std::abs(a - b) <= b * kSameRate; }

  const bool enabled_;
  std::mutex mu_;
  Pair base_;            // guarded by mu_
  double rate_ = 0;      // guarded by mu_
  double pending_ = 0;   // guarded by mu_
};

Calibration& calibration() {
  static Calibration c;
  return c;
}

// One thread's anchor: the pair it last read and how far (in ticks) it extrapolates from it.
struct Anchor {
  bool checked = false;  // whether `plain` was decided
  bool plain = false;    // no TSC: clock_gettime every time
  std::uint64_t tsc = 0;
  std::int64_t ns = 0;
  std::uint64_t span = 0;  // 0: re-anchor on the next read
  double rate = 0;         // ns per tick
};
thread_local Anchor t_anchor;

std::int64_t extrapolate(const Anchor& a, std::uint64_t tsc) noexcept {
  return a.ns + static_cast<std::int64_t>(static_cast<double>(tsc - a.tsc) * a.rate);
}

Micros reanchor(Anchor& a) noexcept {
  Calibration& c = calibration();
  if (!a.checked) {
    a.checked = true;
    a.plain = !c.enabled();
  }
  if (a.plain) return system_realtime_micros();
  Pair p = read_pair();
  // Never behind this thread's previous reading by less than a span: monotonic within a thread.
  const std::int64_t was = a.span != 0 && p.tsc >= a.tsc ? extrapolate(a, p.tsc) : a.ns;
  if (p.ns < was && was - p.ns < kSpanNs) p.ns = was;
  const double rate = c.update(p);
  a.tsc = p.tsc;
  a.ns = p.ns;
  a.rate = rate;
  // No extrapolation before the rate is known, nor from a pair more uncertain than kMaxWidthNs.
  const bool usable = rate > 0 && static_cast<double>(p.width) * rate <= kMaxWidthNs;
  a.span = usable ? static_cast<std::uint64_t>(static_cast<double>(kSpanNs) / rate) : 0;
  return p.ns / 1000;
}

}  // namespace

Micros realtime_micros() noexcept {
  Anchor& a = t_anchor;
  if (!a.plain) {
    const std::uint64_t tsc = __rdtsc();
    if (tsc - a.tsc < a.span) return extrapolate(a, tsc) / 1000;  // unsigned: a TSC behind re-anchors
  }
  return reanchor(a);
}

bool realtime_extrapolates() noexcept { return calibration().enabled() && calibration().rate() > 0; }

#else

Micros realtime_micros() noexcept { return system_realtime_micros(); }
bool realtime_extrapolates() noexcept { return false; }

#endif

}  // namespace floodgate::detail
