// The realtime clock in microseconds, for SystemClock::now(): the decision path reads it once per
// decision, and the system call's vDSO costs 25–30 ns here, more than the rest of a decision on a
// known key (issue 17's profile: 14% of Limiter::hit).
#pragma once

#include "floodgate/clock.hpp"

namespace floodgate::detail {

/// Microseconds since the Unix epoch (CLOCK_REALTIME). Where the kernel keeps time with the CPU's
/// time-stamp counter (x86-64, clocksource "tsc": invariant and synchronized across CPUs), each
/// thread reads the system clock once per millisecond and extrapolates in between from the TSC at
/// a rate calibrated against the system clock over 20 ms periods: the reading is within a
/// microsecond of clock_gettime's (NTP slews at most 0.05%, 0.5 µs over a millisecond), a step of
/// the system clock is followed within a millisecond, and one thread never sees time go back by
/// less than a millisecond (a larger step back, set by an operator, is followed). Elsewhere it is
/// clock_gettime. Thread-safe.
Micros realtime_micros() noexcept;

/// clock_gettime(CLOCK_REALTIME) in microseconds, always (the reference for the above).
Micros system_realtime_micros() noexcept;

/// Whether realtime_micros() extrapolates from the TSC now (its rate is calibrated): false before
/// two 20 ms periods have passed, and always where the kernel does not keep time with the TSC.
bool realtime_extrapolates() noexcept;

}  // namespace floodgate::detail
