// floodgate._floodgate: the C++ library for Python. The package floodgate (python/floodgate/)
// re-exports it; docs/python.md describes the API.
#include "bindings.hpp"

PYBIND11_MODULE(_floodgate, m) {
  m.doc() =
      "floodgate's C++ engine: policies, limiters over a storage, clocks. Import `floodgate`, which "
      "re-exports it.";
  floodgate::python::bind_errors(m);
  floodgate::python::bind_clock(m);
  floodgate::python::bind_policy(m);
  floodgate::python::bind_limiter(m);
  floodgate::python::bind_limits_calls(m);
}
