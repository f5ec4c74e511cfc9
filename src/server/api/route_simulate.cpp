// POST /v1/simulate: the dashboard playground's engine. The trace runs through each strategy on a
// fresh private MemoryStorage and a ManualClock (floodgate::simulate), and through a concurrency
// limit whose leases last each request's duration (floodgate::simulate_concurrency, as `floodgate
// simulate --concurrency`); the service's own storage is never touched. Decisions before index
// "from" are computed but not returned, so a page that re-sends its growing trace receives only
// the new ones.
#include <optional>

#include "floodgate/sim/concurrency.hpp"
#include "floodgate/sim/simulate.hpp"
#include "server/api/json_out.hpp"
#include "server/api/requests.hpp"
#include "server/api/service.hpp"

namespace floodgate::server {

namespace {

void write_step(JsonOut& j, const SimStep& st) {
  j.begin_object();
  j.key("allowed").boolean(st.allowed).key("remaining").num(st.remaining);
  j.key("retry_after").seconds(st.retry_after).key("reset_after").seconds(st.reset_after);
  j.key("level").num(st.level).key("capacity").num(st.capacity);
  j.end();
}

// The concurrency lane: totals, a decision per request from "from" on, and the busiest key's
// leases held over time (whole: it changes after the last request as leases end).
void write_concurrency(JsonOut& j, const SimulateBody& in, const ConcurrencyLane& c) {
  j.begin_object();
  j.key("policy").str(c.lane.policy).key("limit").num(c.limit).key("lease_ttl").seconds(c.lease_ttl);
  j.key("admitted").num(c.lane.allowed).key("denied").num(c.lane.blocked);
  j.key("max_held").num(c.max_held).key("expired").num(c.expired);
  j.key("key").str(c.key).key("keys").num(c.keys).key("last").seconds(c.last);
  j.key("decisions").begin_array();
  for (std::size_t i = in.from; i < c.lane.steps.size() && i < c.spans.size(); ++i) {
    j.begin_object();
    j.key("admitted").boolean(c.lane.steps[i].allowed).key("start").seconds(in.trace[i].t);
    j.key("end").seconds(c.spans[i].end).key("expired").boolean(c.spans[i].expired);
    j.key("held").num(c.lane.steps[i].level);
    j.end();
  }
  j.end();
  j.key("held").begin_array();
  for (const HeldChange& h : c.held) j.begin_object().key("t").seconds(h.t).key("held").num(h.held).end();
  j.end().end();
}

std::string simulation_json(const SimulateBody& in, const std::vector<SimLane>& lanes,
                            const ConcurrencyLane* concurrency) {
  JsonOut j;
  j.begin_object();
  if (in.rate_lanes) j.key("limit").str(in.options.limit).key("burst").num(in.options.burst);
  j.key("events").num(in.trace.size()).key("from").num(in.from);
  j.key("strategies").begin_array();
  for (const SimLane& lane : lanes) {
    j.begin_object();
    j.key("strategy").str(lane.name).key("policy").str(lane.policy);
    j.key("allowed").num(lane.allowed).key("blocked").num(lane.blocked);
    j.key("decisions").begin_array();
    for (std::size_t i = in.from; i < lane.steps.size(); ++i) write_step(j, lane.steps[i]);
    j.end().end();
  }
  j.end();
  if (concurrency != nullptr) {
    j.key("concurrency");
    write_concurrency(j, in, *concurrency);
  }
  j.end();
  return j.take();
}

}  // namespace

bool Service::route_simulate(const Request& req, Response& res, Pending&, const Installed&) {
  auto body = parse_simulate_body(req.body());
  if (!body.ok()) {
    respond_error(res, http::status::bad_request, body.status());
    return false;
  }
  std::vector<SimLane> lanes;
  if (body->rate_lanes) {
    auto result = floodgate::simulate(body->options, body->trace);
    if (!result.ok()) {
      respond_error(res, http::status::bad_request, result.status());
      return false;
    }
    lanes = *std::move(result);
  }
  std::optional<ConcurrencyLane> concurrency;
  if (body->concurrency) {
    // Every input simulate_concurrency checks was checked (and named as a body field) by the parser.
    auto c = simulate_concurrency(body->concurrency->options, body->trace, body->concurrency->durations);
    if (!c.ok()) {
      respond_error(res,
                    c.status().code() == absl::StatusCode::kInvalidArgument ? http::status::bad_request
                                                                            : http::status::internal_server_error,
                    c.status());
      return false;
    }
    concurrency = *std::move(c);
  }
  respond(res, http::status::ok, simulation_json(*body, lanes, concurrency ? &*concurrency : nullptr));
  return false;
}

}  // namespace floodgate::server
