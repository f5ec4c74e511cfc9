// Clocks: the system clock and the manual clock of tests, in float seconds.
#include <memory>

#include "bindings.hpp"

namespace floodgate::python {

void bind_clock(py::module_& m) {
  py::class_<Clock, std::shared_ptr<Clock>>(m, "Clock", R"(A source of the current time.

A Limiter reads every "now" from its clock; no algorithm reads the time itself. Times are float
seconds since the Unix epoch (the engine counts integer microseconds).)")
      .def("now", [](const Clock& c) { return static_cast<double>(c.now()) / 1e6; },
           "The current time in seconds since the Unix epoch.");

  m.def("system_clock", []() -> std::shared_ptr<Clock> {
        return std::const_pointer_cast<SystemClock>(SystemClock::instance());
      }, "The realtime clock (the default of every Limiter).");

  py::class_<ManualClock, Clock, std::shared_ptr<ManualClock>>(m, "ManualClock", R"(A clock that moves only when told to.

For tests and simulations: `advance` steps it instead of sleeping, and threads waiting on it (in
Limiter.acquire or Limiter.lease with a timeout) wake when it reaches their deadline.
Thread-safety: every method may be called from any thread.)")
      .def(py::init([](py::handle start) {
             return std::make_shared<ManualClock>(checked_seconds(start, "start", 0.0));
           }),
           py::arg("start") = 0.0, "A clock at `start` seconds since the epoch (µs resolution).")
      .def("advance", [](ManualClock& c, py::handle seconds) {
             const Micros d = checked_seconds(seconds, "seconds", 0.0);
             py::gil_scoped_release release;
             c.advance(d);
           }, py::arg("seconds"), "Moves the clock forward by `seconds` (≥ 0) and wakes the waiters it reaches.")
      .def("set", [](ManualClock& c, py::handle seconds) {
             const Micros t = checked_seconds(seconds, "seconds", 0.0);
             py::gil_scoped_release release;
             c.set(t);
           }, py::arg("seconds"), "Sets the time (it may step back: the algorithms take no time to have passed).")
      .def("sleepers", &ManualClock::sleepers, "How many threads wait on this clock for a deadline ahead.");
}

}  // namespace floodgate::python
