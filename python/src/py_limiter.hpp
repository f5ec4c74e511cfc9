// The Limiter as Python holds it: the C++ Limiter, and the Throttle that waits for its slots.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "bindings.hpp"
#include "floodgate/limiter.hpp"
#include "floodgate/throttle.hpp"

namespace floodgate::python {

struct PyLimiter {
  std::shared_ptr<Storage> storage;
  std::shared_ptr<Clock> clock;
  std::shared_ptr<Limiter> limiter;

  /// The Throttle of `acquire` and `lease(timeout=…)`, made on first use.
  Throttle& throttle() {
    std::call_once(throttle_once_, [this] { throttle_ = std::make_unique<Throttle>(limiter); });
    return *throttle_;
  }

 private:
  std::once_flag throttle_once_;
  std::unique_ptr<Throttle> throttle_;
};

/// A reservation with what its settle needs (Limiter.reserve).
struct PyReservation {
  std::shared_ptr<PyLimiter> owner;
  Policy policy;
  std::string key;
  Reservation reservation;
};

/// A lease with its limiter kept alive (Limiter.lease).
struct PyLease {
  std::shared_ptr<PyLimiter> owner;
  Lease lease;
};

void bind_leases(py::module_& m, py::class_<PyLimiter, std::shared_ptr<PyLimiter>>& limiter);

}  // namespace floodgate::python
