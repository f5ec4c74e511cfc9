// floodgate/clock.hpp — time as integer microseconds, and the injectable clock.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <list>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>

namespace floodgate {

/// A point in time or a duration, in microseconds. Points are microseconds since the Unix epoch
/// (realtime clock: windows align to the wall clock). Never floating seconds.
using Micros = std::int64_t;

/// A duration that never ends: the `retry_after` of a request that can never be allowed.
inline constexpr Micros kNever = std::numeric_limits<Micros>::max();

inline constexpr Micros kMicrosPerSecond = 1'000'000;

/// Formats a duration in seconds as the shortest decimal with at most 6 fraction digits that
/// keeps at least one ("4.0", "0.25", "0.000001").
std::string format_seconds(Micros d);

/// Source of the current time. Every component that needs "now" is given a Clock; no algorithm
/// reads the time itself.
///
/// Thread-safety: implementations must be safe to call from any thread.
class Clock {
 public:
  virtual ~Clock() = default;
  /// The current time, microseconds since the Unix epoch.
  [[nodiscard]] virtual Micros now() const noexcept = 0;
  /// Blocks the calling thread until `now() ≥ deadline` or until `stop` is requested, whichever
  /// comes first (a wait that can be woken: no busy loop). Returns true if the deadline was
  /// reached, false if stopped.
  virtual bool wait_until(Micros deadline, std::stop_token stop) const = 0;
};

/// The realtime clock (`std::chrono::system_clock`, CLOCK_REALTIME), in microseconds since the
/// epoch. Read through abseil's cycle-counter clock (about 10 ns) once that is calibrated, and
/// through clock_gettime (about 22 ns) for the half second it takes to calibrate, at start and
/// after 2.5 s without a reading: src/clock.cpp. Thread-safety: any thread, any time.
class SystemClock final : public Clock {
 public:
  [[nodiscard]] Micros now() const noexcept override;
  bool wait_until(Micros deadline, std::stop_token stop) const override;
  /// A process-wide instance.
  static std::shared_ptr<const SystemClock> instance();
};

/// A clock that moves only when told to: tests, simulations and `floodgate replay`. Threads
/// waiting in `wait_until` wake when `set`/`advance` reach their deadline, so blocking code (such
/// as Throttle::acquire) runs on simulated time.
///
/// Thread-safety: every method may be called concurrently.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(Micros start = 0) noexcept : now_(start) {}
  [[nodiscard]] Micros now() const noexcept override { return now_.load(std::memory_order_acquire); }
  bool wait_until(Micros deadline, std::stop_token stop) const override;
  /// Sets the time. Moving it backwards is allowed (algorithms tolerate a clock that steps back:
  /// they treat a time before a key's state as "no time has passed").
  void set(Micros t);
  void advance(Micros d);
  /// Threads in wait_until that will go on sleeping: their deadline is ahead and nobody asked
  /// them to stop. A thread that was woken but has not run yet is not counted, so a test can wait
  /// for "everyone has settled" before it moves the clock.
  [[nodiscard]] int sleepers() const;

 private:
  struct Sleeper {
    Micros deadline;
    std::stop_token stop;
  };
  std::atomic<Micros> now_;
  mutable std::mutex mu_;
  mutable std::condition_variable_any cv_;
  mutable std::list<Sleeper> sleepers_;  // guarded by mu_
};

}  // namespace floodgate
