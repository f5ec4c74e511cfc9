// Reservations (reserve → settle) and leases of concurrency policies (a context manager).
#include <string>

#include "py_limiter.hpp"

namespace floodgate::python {

namespace {

PyReservation reserve(const std::shared_ptr<PyLimiter>& l, const Policy& p, const std::string& key,
                      py::handle estimate, std::string id, py::handle ttl) {
  const std::int64_t e = checked_count(estimate, "estimate");
  const Micros t = checked_seconds(ttl, "ttl", 0.001);
  absl::StatusOr<Reservation> r;
  {
    py::gil_scoped_release release;
    r = l->limiter->reserve(p, key, e, std::move(id), t);
  }
  return PyReservation{l, p, key, value_or_raise(std::move(r))};
}

Decision settle(PyReservation& r, py::handle actual) {
  const std::int64_t a = checked_count(actual, "actual");
  absl::StatusOr<Decision> d;
  {
    py::gil_scoped_release release;
    d = r.owner->limiter->settle(r.policy, r.key, r.reservation.id, a);
  }
  return value_or_raise(std::move(d));
}

std::shared_ptr<PyLease> lease(const std::shared_ptr<PyLimiter>& l, const Policy& p, const std::string& key,
                               py::handle cost, py::handle timeout) {
  const std::int64_t c = checked_count(cost, "cost");
  const Micros t = checked_seconds(timeout, "timeout", 0.0);
  LeaseResult r = without_gil([&] { return l->throttle().acquire_lease(p, key, c, t); });
  if (!r.status.ok()) raise_wait_status(r.status, "policy");
  return std::make_shared<PyLease>(PyLease{l, std::move(r.lease)});
}

// Releases the lease if it holds a slot; an expired lease (NotFound) has nothing left to free.
Decision release_lease(PyLease& l, bool quiet_if_expired) {
  if (!l.lease.held()) return l.lease.decision();
  absl::StatusOr<Decision> d;
  {
    py::gil_scoped_release release;
    d = l.lease.release();
  }
  if (!d.ok() && quiet_if_expired && d.status().code() == absl::StatusCode::kNotFound) return l.lease.decision();
  return value_or_raise(std::move(d));
}

}  // namespace

void bind_leases(py::module_& m, py::class_<PyLimiter, std::shared_ptr<PyLimiter>>& limiter) {
  py::class_<PyReservation>(m, "Reservation", R"(A cost reserved before it is known (Limiter.reserve).

`decision` is the decision on the estimate; `reserved` whether it was admitted and remembered.
`settle(actual)` makes the key's state what it would be had the request cost `actual` when it was
reserved (a refund, or more taken even past the limit); a second settle changes nothing. Dropped
unsettled, the estimate stays charged and the storage forgets the id after the time to live.)")
      .def_property_readonly("id", [](const PyReservation& r) { return r.reservation.id; })
      .def_property_readonly("decision", [](const PyReservation& r) { return r.reservation.decision; })
      .def_property_readonly("reserved", [](const PyReservation& r) { return r.reservation.reserved(); })
      .def("settle", &settle, py::arg("actual"), "Settles the reservation with the actual usage; returns the state after it.")
      .def("__bool__", [](const PyReservation& r) { return r.reservation.reserved(); });

  py::class_<PyLease, std::shared_ptr<PyLease>>(m, "Lease", R"(A slot of a concurrency policy (Limiter.lease).

A context manager: the slot is released when the `with` block ends. `held` says whether it holds a
slot (false when the storage failed and the fail mode let the request through: `decision.degraded`).
A lease not released ends after its time to live (the limit's period); `renew` starts it again.)")
      .def_property_readonly("held", [](const PyLease& l) { return l.lease.held(); })
      .def_property_readonly("id", [](const PyLease& l) { return l.lease.id(); })
      .def_property_readonly("decision", [](const PyLease& l) { return l.lease.decision(); })
      .def("release", [](PyLease& l) { return release_lease(l, false); },
           "Frees the slot now. Raises floodgate.NotFound if it had expired.")
      .def("renew", [](PyLease& l) {
             absl::StatusOr<Decision> d;
             {
               py::gil_scoped_release release;
               d = l.lease.renew();
             }
             return value_or_raise(std::move(d));
           }, "Starts the lease's time to live again. Raises floodgate.NotFound if it had expired.")
      .def("__enter__", [](std::shared_ptr<PyLease> l) { return l; })
      .def("__exit__", [](PyLease& l, py::handle, py::handle, py::handle) {
        release_lease(l, true);
        return false;
      });

  limiter
      .def("reserve", &reserve, py::arg("policy"), py::arg("key"), py::arg("estimate"), py::kw_only(),
           py::arg("id") = "", py::arg("ttl") = 60.0,
           R"(Reserves `estimate` units for a request whose cost is known later (a hit of `estimate`
remembered under `id`, a random one when empty, for `ttl` seconds); settle it with the actual usage.)")
      .def("settle", [](PyLimiter& l, const Policy& p, const std::string& key, const std::string& id, py::handle actual) {
             const std::int64_t a = checked_count(actual, "actual");
             return value_or_raise(without_gil([&] { return l.limiter->settle(p, key, id, a); }));
           }, py::arg("policy"), py::arg("key"), py::arg("id"), py::arg("actual"),
           "Settles reservation `id` of `key` (from another process, say); an unknown id charges `actual` now.")
      .def("lease", &lease, py::arg("policy"), py::arg("key"), py::arg("cost") = py::int_(1), py::kw_only(),
           py::arg("timeout") = 0.0,
           R"(Takes `cost` slots of a concurrency policy ("20 concurrent for 5 minutes") for `key`, waiting
at most `timeout` seconds; a context manager that releases them:

    with limiter.lease(uploads, user, timeout=2.0):
        ...

Raises floodgate.Timeout when no slot frees in time, floodgate.InvalidArgument for a policy that is
not a concurrency policy.)");
}

}  // namespace floodgate::python
