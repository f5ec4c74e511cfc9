// The pieces of the module floodgate._floodgate (module.cpp puts them together).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include <pybind11/pybind11.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "floodgate/clock.hpp"
#include "floodgate/policy.hpp"

namespace floodgate::python {

namespace py = pybind11;

/// Raises the Python exception of floodgate.errors that matches `status`'s code, with its
/// message (prefixed by `argument` and ": " when the status is about that argument).
[[noreturn]] void raise_status(const absl::Status& status, std::string_view argument = {});

/// The status of a wait (Limiter.acquire, Limiter.lease): floodgate.Timeout for DeadlineExceeded
/// (no slot in time), else as raise_status.
[[noreturn]] void raise_wait_status(const absl::Status& status, std::string_view argument);

/// The value, or the status raised as raise_status does.
template <class T>
T value_or_raise(absl::StatusOr<T>&& result, std::string_view argument = {}) {
  if (!result.ok()) raise_status(result.status(), argument);
  return *std::move(result);
}

/// Runs `f` with the GIL released (it may wait or touch a store) and returns its result; raise
/// Python exceptions only after it returns.
template <class F>
auto without_gil(F&& f) {
  py::gil_scoped_release release;
  return f();
}

/// A cost or an amount given from Python: an int (not a bool) in [0, 2^53]; otherwise a TypeError
/// or floodgate.InvalidArgument naming `argument`.
std::int64_t checked_count(py::handle value, const char* argument);

/// Seconds (a float or an int) as microseconds; floodgate.InvalidArgument naming `argument` when
/// not finite or outside [min_seconds, 2^53 µs].
Micros checked_seconds(py::handle value, const char* argument, double min_seconds);

/// Microseconds as float seconds; kNever as math.inf.
inline double to_seconds(Micros d) noexcept {
  return d == kNever ? INFINITY : static_cast<double>(d) / 1e6;
}

/// "clock" or "first-hit" (also "first_hit"); floodgate.InvalidArgument naming `anchor` otherwise.
Anchor parse_anchor(const std::string& anchor);

void bind_errors(py::module_& m);
void bind_clock(py::module_& m);
void bind_policy(py::module_& m);
void bind_limiter(py::module_& m);
void bind_limits_calls(py::module_& m);

}  // namespace floodgate::python
