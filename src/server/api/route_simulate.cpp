// POST /v1/simulate: the dashboard playground's engine. The trace runs through each strategy on a
// fresh private MemoryStorage and a ManualClock (floodgate::simulate); the service's own storage is
// never touched. Decisions before index "from" are computed but not returned, so a page that
// re-sends its growing trace receives only the new ones.
#include "floodgate/simulate.hpp"
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

std::string simulation_json(const SimulateBody& in, const std::vector<SimLane>& lanes) {
  JsonOut j;
  j.begin_object();
  j.key("limit").str(in.options.limit).key("burst").num(in.options.burst);
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
  j.end().end();
  return j.take();
}

}  // namespace

bool Service::route_simulate(const Request& req, Response& res, Pending&, const Installed&) {
  auto body = parse_simulate_body(req.body());
  if (!body.ok()) {
    respond_error(res, http::status::bad_request, body.status());
    return false;
  }
  auto result = floodgate::simulate(body->options, body->trace);
  if (!result.ok()) {
    respond_error(res, http::status::bad_request, result.status());
    return false;
  }
  respond(res, http::status::ok, simulation_json(*body, *result));
  return false;
}

}  // namespace floodgate::server
