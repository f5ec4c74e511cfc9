// Policy (a strategy and its limits, from the rate notation) and Decision.
#include <string>

#include <fmt/format.h>

#include "bindings.hpp"
#include "floodgate/decision.hpp"
#include "floodgate/policy.hpp"

namespace floodgate::python {

namespace {

FailMode parse_fail(const std::string& fail) {
  if (fail == "open") return FailMode::kOpen;
  if (fail == "closed") return FailMode::kClosed;
  raise_status(absl::InvalidArgumentError(fmt::format("unknown fail mode \"{}\": expected open or closed", fail)),
               "fail");
}

Policy make_policy(const std::string& limits, const std::string& strategy, const std::string& name,
                   const std::string& anchor, py::handle burst, bool shape, const std::string& fail,
                   py::handle blocked_cache) {
  PolicyOptions options;
  options.anchor = parse_anchor(anchor);
  options.burst = checked_count(burst, "burst");
  options.shape = shape;
  options.fail = parse_fail(fail);
  options.blocked_cache = static_cast<std::size_t>(checked_count(blocked_cache, "blocked_cache"));
  const Strategy s = value_or_raise(parse_strategy(strategy), "strategy");
  return value_or_raise(Policy::make(name, s, limits, options), "limits");
}

std::string describe_decision(const Decision& d) {
  return fmt::format("Decision(allowed={}, limit={}, remaining={}, reset_after={}, retry_after={}{}{})",
                     d.allowed ? "True" : "False", d.limit, d.remaining, to_seconds(d.reset_after),
                     to_seconds(d.retry_after), d.delay > 0 ? fmt::format(", delay={}", to_seconds(d.delay)) : "",
                     d.degraded ? ", degraded=True" : "");
}

}  // namespace

Anchor parse_anchor(const std::string& anchor) {
  if (anchor == "clock") return Anchor::kClock;
  if (anchor == "first-hit" || anchor == "first_hit") return Anchor::kFirstHit;
  raise_status(absl::InvalidArgumentError(
                   fmt::format("unknown anchor \"{}\": expected clock or first-hit", anchor)),
               "anchor");
}

void bind_policy(py::module_& m) {
  py::class_<Policy>(m, "Policy", R"(A strategy and one or more limits that a request must all satisfy.

    Policy("10/second; 100/minute", "gcra")
    Policy("5 per 2 seconds", "fixed-window", anchor="first-hit")

`limits` is the rate notation ("10/minute", "10 per minute", "5 per 2 seconds", "3/second burst 5",
"20 concurrent for 5 minutes"; several joined by ";"). `strategy`: fixed-window, moving-window,
sliding-window-counter, token-bucket, leaky-bucket, gcra or concurrency. `name` is the policy's
identity: two policies with the same name and strategy share the state of a key (a change of the
amounts keeps the usage). `anchor` (fixed window): "clock" (epoch-aligned windows) or "first-hit".
`burst` (bucket strategies): the capacity, 0 = the amount. `shape` (leaky bucket): decisions carry a
`delay`. `fail`: what a decision is when the storage fails, "open" (allowed) or "closed" (denied);
either way it is marked `degraded`. `blocked_cache`: how many denied keys a Limiter remembers to
deny again without a storage call (0 = off).

Raises floodgate.InvalidArgument naming the argument and quoting the bad text. Immutable; safe to
share between threads.)")
      .def(py::init(&make_policy), py::arg("limits"), py::arg("strategy") = "fixed-window", py::kw_only(),
           py::arg("name") = "default", py::arg("anchor") = "clock", py::arg("burst") = py::int_(0),
           py::arg("shape") = false, py::arg("fail") = "open", py::arg("blocked_cache") = py::int_(0))
      .def_property_readonly("name", &Policy::name)
      .def_property_readonly("strategy", [](const Policy& p) { return std::string(to_string(p.strategy())); })
      .def_property_readonly("limits", [](const Policy& p) { return to_string(p.limits()); },
                             "The limits in the rate notation.")
      .def("__repr__", [](const Policy& p) { return fmt::format("<floodgate.Policy {}: {}>", p.name(), p.describe()); });

  py::class_<Decision>(m, "Decision", R"(The answer to one request against one key of a policy.

Durations are float seconds from the decision: `reset_after` (until the key is back to full
capacity), `retry_after` (0 when allowed; otherwise the shortest wait after which the same request
would be allowed, math.inf if its cost exceeds a limit), `delay` (a shaping leaky bucket's wait
before acting). `remaining`: how many more unit-cost requests fit now. `limit` and `period` name the
most constraining limit. `degraded`: the storage failed and the policy's fail mode decided.
A Decision is true when allowed.)")
      .def_readonly("allowed", &Decision::allowed)
      .def_readonly("limit", &Decision::limit)
      .def_readonly("remaining", &Decision::remaining)
      .def_readonly("degraded", &Decision::degraded)
      .def_property_readonly("period", [](const Decision& d) { return to_seconds(d.period); })
      .def_property_readonly("reset_after", [](const Decision& d) { return to_seconds(d.reset_after); })
      .def_property_readonly("limit_reset_after",
                             [](const Decision& d) { return to_seconds(d.limit_reset_after); })
      .def_property_readonly("retry_after", [](const Decision& d) { return to_seconds(d.retry_after); })
      .def_property_readonly("delay", [](const Decision& d) { return to_seconds(d.delay); })
      .def("__bool__", [](const Decision& d) { return d.allowed; })
      .def("__repr__", &describe_decision);
}

}  // namespace floodgate::python
