// floodgate/clock.hpp — time as integer microseconds, and the injectable clock.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>

namespace floodgate {

/// A point in time or a duration, in microseconds. Points are microseconds since the Unix epoch
/// (realtime clock: windows align to the wall clock). Never floating seconds.
using Micros = std::int64_t;

/// A duration that never ends: the `retry_after` of a request that can never be allowed.
inline constexpr Micros kNever = std::numeric_limits<Micros>::max();

inline constexpr Micros kMicrosPerSecond = 1'000'000;

/// Source of the current time. Every component that needs "now" is given a Clock; no algorithm
/// reads the time itself.
///
/// Thread-safety: implementations must be safe to call from any thread.
class Clock {
 public:
  virtual ~Clock() = default;
  /// The current time, microseconds since the Unix epoch.
  [[nodiscard]] virtual Micros now() const noexcept = 0;
};

/// The realtime clock (`std::chrono::system_clock`).
class SystemClock final : public Clock {
 public:
  [[nodiscard]] Micros now() const noexcept override;
  /// A process-wide instance.
  static std::shared_ptr<const SystemClock> instance();
};

/// A clock that moves only when told to: tests, simulations and `floodgate replay`.
///
/// Thread-safety: `now`, `set` and `advance` may be called concurrently (atomic).
class ManualClock final : public Clock {
 public:
  explicit ManualClock(Micros start = 0) noexcept : now_(start) {}
  [[nodiscard]] Micros now() const noexcept override { return now_.load(std::memory_order_acquire); }
  /// Sets the time. Moving it backwards is allowed (algorithms tolerate a clock that steps back:
  /// they treat a time before a key's state as "no time has passed").
  void set(Micros t) noexcept { now_.store(t, std::memory_order_release); }
  void advance(Micros d) noexcept { now_.fetch_add(d, std::memory_order_acq_rel); }

 private:
  std::atomic<Micros> now_;
};

}  // namespace floodgate
