// Storage, open_storage and Limiter: every call that touches a storage or waits releases the GIL.
#include <string>

#include "py_limiter.hpp"

namespace floodgate::python {

namespace {

std::shared_ptr<Storage> open_url(const std::string& url, bool background) {
  absl::StatusOr<std::shared_ptr<Storage>> opened;
  {
    py::gil_scoped_release release;
    opened = open_storage(url, background ? StorageStart::kBackground : StorageStart::kFailFast);
  }
  return value_or_raise(std::move(opened), "url");
}

std::shared_ptr<PyLimiter> make_limiter(py::handle storage, std::shared_ptr<Clock> clock) {
  auto l = std::make_shared<PyLimiter>();
  if (py::isinstance<py::str>(storage)) {
    l->storage = open_url(storage.cast<std::string>(), false);
  } else if (py::isinstance<Storage>(storage)) {
    l->storage = storage.cast<std::shared_ptr<Storage>>();
  } else {
    throw py::type_error("storage: expected a floodgate.Storage or a storage URL (str), got " +
                         std::string(py::str(py::type::of(storage).attr("__name__"))));
  }
  l->clock = clock ? std::move(clock) : std::const_pointer_cast<SystemClock>(SystemClock::instance());
  l->limiter = std::make_shared<Limiter>(l->storage, l->clock);
  return l;
}

Decision decided(absl::StatusOr<Decision>&& d) { return value_or_raise(std::move(d)); }

Decision acquire(PyLimiter& l, const Policy& p, const std::string& key, py::handle cost, py::handle timeout) {
  const std::int64_t c = checked_count(cost, "cost");
  const Micros t = checked_seconds(timeout, "timeout", 0.0);
  AcquireResult r = without_gil([&] { return l.throttle().acquire(p, key, c, t); });
  if (!r.status.ok()) raise_wait_status(r.status, "cost");
  return r.decision;
}

constexpr const char* kLimiterDoc = R"(A storage and a clock: the decisions of any number of policies.

    limiter = floodgate.Limiter(floodgate.open_storage("memory://"))
    api = floodgate.Policy("10/second", "gcra")
    if not limiter.hit(api, "user-42"):
        ...  # 429

Every decision goes through the C++ library's one pipeline: the cost is checked
(floodgate.InvalidArgument naming `cost` outside 0..2^53, nothing charged), then the storage
applies the policy's algorithm atomically to the key's state; when the storage fails, the policy's
fail mode decides and the decision says `degraded` (a storage error is never a plain "allowed").

`storage`: a floodgate.Storage or a storage URL. `clock`: a floodgate.ManualClock for tests (the
system clock by default; with Redis, give the URL `?clock=client` to decide on this clock).

Thread-safety: every method is thread-safe and releases the GIL while it works, so threads decide
in parallel. Keys are str or bytes.)";

}  // namespace

void bind_limiter(py::module_& m) {
  py::class_<Storage, std::shared_ptr<Storage>>(m, "Storage", R"(Where the state of keys lives (open_storage).

Thread-safe: one storage may be shared by several Limiters and threads.)")
      .def("probe", [](Storage& s) {
             absl::Status st;
             {
               py::gil_scoped_release release;
               st = s.probe();
             }
             if (!st.ok()) raise_status(st);
           }, "One round trip to the storage's servers; raises floodgate.StorageError if they do not answer.");

  m.def("open_storage", &open_url, py::arg("url"), py::kw_only(), py::arg("background") = false,
        R"(Opens a storage by URL: "memory://" (options as a query: ?max_keys=100000&shards=64),
"redis://[user:password@]host[:port][/db][?options]", "rediss://…" (TLS), "redis+unix:///path",
"redis-cluster://host:port[,host:port…]", "redis+sentinel://master@host:port[,…]",
"memcached://host:port[,host:port…]" (docs/redis.md and docs/memcached.md list the options).
Raises floodgate.InvalidArgument naming the bad URL or option, floodgate.StorageError when a
server cannot be reached (unless `background`: then calls fail, and the fail mode decides, until it
answers).)");

  py::class_<PyLimiter, std::shared_ptr<PyLimiter>> limiter(m, "Limiter", kLimiterDoc);
  limiter
      .def(py::init(&make_limiter), py::arg("storage"), py::arg("clock") = nullptr)
      .def_property_readonly("storage", [](const PyLimiter& l) { return l.storage; })
      .def_property_readonly("clock", [](const PyLimiter& l) { return l.clock; })
      .def("hit", [](PyLimiter& l, const Policy& p, const std::string& key, py::handle cost) {
             const std::int64_t c = checked_count(cost, "cost");
             return decided(without_gil([&] { return l.limiter->hit(p, key, c); }));
           }, py::arg("policy"), py::arg("key"), py::arg("cost") = py::int_(1),
           "Consumes `cost` units of `key` if every limit of `policy` allows it; a denied hit consumes nothing.")
      .def("test", [](PyLimiter& l, const Policy& p, const std::string& key, py::handle cost) {
             const std::int64_t c = checked_count(cost, "cost");
             return decided(without_gil([&] { return l.limiter->test(p, key, c); }));
           }, py::arg("policy"), py::arg("key"), py::arg("cost") = py::int_(1),
           "Whether `hit` would allow `cost` now, consuming nothing.")
      .def("stats", [](PyLimiter& l, const Policy& p, const std::string& key) {
             return decided(without_gil([&] { return l.limiter->stats(p, key); }));
           }, py::arg("policy"), py::arg("key"), "The key's state: `remaining` and `reset_after` (a test of cost 0).")
      .def("clear", [](PyLimiter& l, const Policy& p, const std::string& key) {
             absl::Status st;
             {
               py::gil_scoped_release release;
               st = l.limiter->clear(p, key);
             }
             if (!st.ok()) raise_status(st);
           }, py::arg("policy"), py::arg("key"), "Forgets the key's state under `policy`.")
      .def_property_readonly("degraded_count", [](const PyLimiter& l) { return l.limiter->degraded_count(); },
                             "Decisions made by a fail mode because the storage failed, since construction.")
      .def("acquire", &acquire, py::arg("policy"), py::arg("key"), py::arg("cost") = py::int_(1), py::kw_only(), py::arg("timeout"),
           R"(Waits until `cost` units of `key` are admitted, at most `timeout` seconds, and returns the
decision that admitted them. Raises floodgate.Timeout (a TimeoutError) at once when the slot cannot
come before the deadline. Waiters of this Limiter on one key are served first come, first served;
the wait runs on the limiter's clock (a ManualClock's `advance` wakes it), without the GIL.)");
  bind_leases(m, limiter);
}

}  // namespace floodgate::python
