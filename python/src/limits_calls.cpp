// The hot calls of floodgate.limits' strategies, hit(item, *identifiers, cost=1) and test(…), as
// C functions of CPython's fast calling convention: the key is built, the policy found and the
// decision made without a Python frame. A pybind11 binding of the same call spends most of its
// time in argument dispatch and in the Decision object it returns (docs/python.md "Performance").
#include <string>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "py_limiter.hpp"
#include "floodgate/policy.hpp"

namespace floodgate::python {

namespace {

/// A policy and the key's two ends for one item object (held, so its address is not reused).
struct ItemEntry {
  py::object item;
  Policy policy;
  bool native_key = false;  // floodgate.limits' own key_for: namespace/…identifiers…/suffix
  std::string prefix;
  std::string suffix;
};
using Entry = std::shared_ptr<const ItemEntry>;

/// The state behind one strategy's hit, test and policy: its limiter, its strategy, the items seen.
struct LimitsCalls {
  std::shared_ptr<PyLimiter> limiter;
  Strategy strategy;
  Anchor anchor;
  py::object native_key_for;  // floodgate.limits.RateLimitItem.key_for
  bool release_gil;           // a networked storage: the call waits on a round trip
  std::unordered_map<PyObject*, Entry> items;
};

// Items are usually few (one per limit string); code that parses its limit strings on every call
// makes new ones all the time: the cache then starts over when it reaches this many.
constexpr std::size_t kMaxItems = 4096;

/// The entry of `item` (its policy: `amount` per `get_expiry()` seconds of the strategy, as the one
/// policy "limits" whose keys are the items' keys), from the cache or made and cached. A caller
/// holds the entry while the GIL is released or Python code runs (the cache may start over then).
Entry entry_for(LimitsCalls& calls, PyObject* item) {
  if (auto it = calls.items.find(item); it != calls.items.end()) return it->second;
  py::handle h(item);
  const std::int64_t amount = checked_count(h.attr("amount"), "item.amount");
  const std::int64_t expiry = checked_count(h.attr("get_expiry")(), "item.get_expiry()");
  PolicyOptions options;
  options.anchor = calls.anchor;
  auto e = std::make_shared<ItemEntry>(ItemEntry{
      py::reinterpret_borrow<py::object>(h),
      value_or_raise(Policy::make("limits", calls.strategy, fmt::format("{} per {} seconds", amount, expiry), options),
                     "item"),
      false, {}, {}});
  py::object key_for = py::type::of(h).attr("key_for");
  if (key_for.is(calls.native_key_for)) {
    e->native_key = true;
    e->prefix = h.attr("namespace").cast<std::string>();
    e->suffix = h.attr("_suffix").cast<std::string>();
  }
  if (calls.items.size() >= kMaxItems) {
    auto dropped = std::move(calls.items);  // released (items' __del__ may run) once the map is whole
    calls.items.clear();
    calls.items.emplace(item, e);
    return e;
  }
  return calls.items.emplace(item, std::move(e)).first->second;
}

/// `value` as limits' safe_string makes it: bytes decoded as UTF-8, anything else str().
void append_identifier(std::string& key, PyObject* value) {
  Py_ssize_t size = 0;
  if (PyUnicode_CheckExact(value)) {
    const char* s = PyUnicode_AsUTF8AndSize(value, &size);
    if (s == nullptr) throw py::error_already_set();
    key.append(s, static_cast<std::size_t>(size));
    return;
  }
  py::object text = py::reinterpret_steal<py::object>(
      PyBytes_Check(value) ? PyUnicode_FromEncodedObject(value, "utf-8", "strict") : PyObject_Str(value));
  if (!text) throw py::error_already_set();
  const char* s = PyUnicode_AsUTF8AndSize(text.ptr(), &size);
  if (s == nullptr) throw py::error_already_set();
  key.append(s, static_cast<std::size_t>(size));
}

/// The storage key of `args[0]` (the item) for the identifiers `args[1..nargs)`: built here for
/// floodgate.limits' items, by the item's own key_for otherwise (limits' items, subclasses).
std::string key_of(const ItemEntry& e, PyObject* const* args, Py_ssize_t nargs) {
  if (!e.native_key) {
    static PyObject* const name = PyUnicode_InternFromString("key_for");
    py::object key = py::reinterpret_steal<py::object>(
        PyObject_VectorcallMethod(name, args, static_cast<std::size_t>(nargs), nullptr));
    if (!key) throw py::error_already_set();
    if (!PyUnicode_Check(key.ptr())) throw py::type_error("item.key_for() must return a str");
    return key.cast<std::string>();
  }
  std::string key = e.prefix;
  for (Py_ssize_t i = 1; i < nargs; ++i) {
    key.push_back('/');
    append_identifier(key, args[i]);
  }
  key.push_back('/');
  key += e.suffix;
  return key;
}

std::int64_t cost_of(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (kwnames == nullptr) return 1;
  const Py_ssize_t n = PyTuple_GET_SIZE(kwnames);
  std::int64_t cost = 1;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* name = PyTuple_GET_ITEM(kwnames, i);
    if (PyUnicode_CompareWithASCIIString(name, "cost") != 0) {
      throw py::type_error("got an unexpected keyword argument '" + py::str(name).cast<std::string>() + "'");
    }
    cost = checked_count(args[nargs + i], "cost");
  }
  return cost;
}

enum class Call { kHit, kTest };

/// `f()`, a new reference, as a C function of CPython returns it: a C++ exception becomes the
/// Python exception it stands for (pybind11's, or RuntimeError) and nullptr.
template <class F>
PyObject* as_c_call(F&& f) noexcept {
  try {
    return f();
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (py::builtin_exception& e) {
    e.set_error();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

LimitsCalls& calls_of(PyObject* capsule) {
  return *static_cast<LimitsCalls*>(PyCapsule_GetPointer(capsule, "floodgate.limits_calls"));
}

template <Call kCall>
PyObject* decide(PyObject* capsule, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) noexcept {
  return as_c_call([&]() -> PyObject* {
    const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 1) throw py::type_error("missing the required argument 'item'");
    LimitsCalls& calls = calls_of(capsule);
    const std::int64_t cost = cost_of(args, nargs, kwnames);
    const Entry held = entry_for(calls, args[0]);
    const std::string key = key_of(*held, args, nargs);
    Limiter& limiter = *calls.limiter->limiter;
    auto run = [&] {
      return kCall == Call::kHit ? limiter.hit(held->policy, key, cost) : limiter.test(held->policy, key, cost);
    };
    const absl::StatusOr<Decision> d = calls.release_gil ? without_gil(run) : run();
    if (!d.ok()) raise_status(d.status());
    return PyBool_FromLong(d->allowed ? 1 : 0);
  });
}

PyObject* policy_of(PyObject* capsule, PyObject* item) noexcept {
  return as_c_call([&] { return py::cast(entry_for(calls_of(capsule), item)->policy).release().ptr(); });
}

PyMethodDef kPolicyDef{"policy", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&policy_of)), METH_O,
                       "policy(item) -> floodgate.Policy: the policy hit and test decide `item` with."};
PyMethodDef kHitDef{"hit", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&decide<Call::kHit>)),
                    METH_FASTCALL | METH_KEYWORDS,
                    "hit(item, *identifiers, cost=1) -> bool: consumes `cost` if the limit allows it."};
PyMethodDef kTestDef{"test", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&decide<Call::kTest>)),
                     METH_FASTCALL | METH_KEYWORDS,
                     "test(item, *identifiers, cost=1) -> bool: whether a hit of `cost` would be allowed now."};

py::tuple make_limits_calls(std::shared_ptr<PyLimiter> limiter, const std::string& strategy,
                            const std::string& anchor, py::object native_key_for) {
  auto calls = std::make_unique<LimitsCalls>();
  calls->strategy = value_or_raise(parse_strategy(strategy), "strategy");
  calls->anchor = parse_anchor(anchor);
  calls->release_gil = limiter->storage->traits().networked;
  calls->limiter = std::move(limiter);
  calls->native_key_for = std::move(native_key_for);
  py::capsule capsule(calls.get(), "floodgate.limits_calls", [](PyObject* c) {
    delete static_cast<LimitsCalls*>(PyCapsule_GetPointer(c, "floodgate.limits_calls"));
  });
  calls.release();
  py::object hit = py::reinterpret_steal<py::object>(PyCFunction_New(&kHitDef, capsule.ptr()));
  py::object test = py::reinterpret_steal<py::object>(PyCFunction_New(&kTestDef, capsule.ptr()));
  py::object policy = py::reinterpret_steal<py::object>(PyCFunction_New(&kPolicyDef, capsule.ptr()));
  if (!hit || !test || !policy) throw py::error_already_set();
  return py::make_tuple(hit, test, policy);
}

}  // namespace

void bind_limits_calls(py::module_& m) {
  m.def("limits_calls", &make_limits_calls, py::arg("limiter"), py::arg("strategy"), py::arg("anchor"),
        py::arg("native_key_for"),
        R"(The (hit, test, policy) functions of one floodgate.limits strategy: hit(item, *identifiers,
cost=1) and test(…) decide in C++ from the item (cached by identity with its policy) and the
identifiers (joined as `limits` joins them); policy(item) is that policy, for the strategy's other
methods. The GIL is released while a networked storage answers; on the
in-memory storage the decision (about 0.1 µs) is made holding it.)");
}

}  // namespace floodgate::python
