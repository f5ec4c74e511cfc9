// floodgate simulate --charge and --concurrency: requests that last (a cost known at their end, a
// lease held from their start to their end), read from a log or generated.
#include <iostream>

#include <fmt/format.h>

#include "cli/simulate_command.hpp"
#include "floodgate/replay.hpp"
#include "floodgate/sim/charge.hpp"
#include "floodgate/sim/concurrency.hpp"
#include "floodgate/sim/simulate.hpp"

namespace floodgate::cli::simulate_cmd {

namespace {

// Requests logged out of order: a note in the report, and on stderr.
void note_reordered(const LogStats& st, std::vector<std::string>& notes) {
  if (st.reordered == 0) return;
  notes.push_back(fmt::format("{} requests were logged before earlier ones; each is taken at the latest time seen",
                              st.reordered));
  std::cerr << "floodgate simulate: " << notes.back() << "\n";
}

// --charge's table on stdout, and its chart (.svg) or page in --out.
int report_charge(const SimulateArgs& a, const ChargeResult& result, const Estimate& estimate,
                  const std::vector<std::string>& notes) {
  const std::string table = format_charge_table(result, a.traffic, estimate);
  std::cout << table;
  if (a.out.empty()) return 0;
  std::string limits;
  for (const std::string& l : a.limits) limits += (limits.empty() ? "" : " | ") + l;
  const std::string title = fmt::format("floodgate simulate --charge: {} — {}", limits, a.traffic);
  const std::string page = a.out.ends_with(".svg")
                               ? "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + render_charge_svg(result, title)
                               : render_charge_html(result, title, table, notes);
  return write_page(a.out, page);
}

// --concurrency's table on stdout, and its lane (.svg) or page in --out.
int report_concurrency(const SimulateArgs& a, const ConcurrencyLane& lane, const std::vector<TraceEvent>& trace,
                       const std::vector<std::string>& notes) {
  const std::string table = format_concurrency_table(lane, a.traffic);
  std::cout << table;
  if (a.out.empty()) return 0;
  const std::string title = fmt::format("floodgate simulate --concurrency {}: {}", a.concurrency, a.traffic);
  const std::string page = a.out.ends_with(".svg")
                               ? "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + render_concurrency_svg(lane, trace, title)
                               : render_concurrency_html(lane, trace, title, table, notes);
  return write_page(a.out, page);
}

// --concurrency on a log: each request's start, key and duration (-1: the log has none, so
// co.default_duration) into `trace` and `durations`; what was read into `notes`.
absl::Status read_concurrency_log(const SimulateArgs& a, const ConcurrencyOptions& co, std::vector<TraceEvent>& trace,
                                  std::vector<Micros>& durations, std::vector<std::string>& notes) {
  if (absl::Status s = check_traffic(a.traffic); !s.ok()) return s;
  auto o = reader_options(a);
  if (!o.ok()) return o.status();
  auto unit = duration_unit(a.duration_unit);
  if (!unit.ok()) return unit.status();
  o->duration_field = a.duration_field == "auto" ? "auto" : canonical_field(a.duration_field);
  o->duration_unit = *unit;
  o->require_duration = co.default_duration < 0;
  o->strict = true;
  auto reader = LogReader::open(a.traffic, *o);
  if (!reader.ok()) return reader.status();
  while (auto r = (*reader)->next()) {
    if (trace.size() == co.max_events) {
      return absl::InvalidArgumentError(
          fmt::format("{}: more than {} requests: --concurrency draws each one", a.traffic, co.max_events));
    }
    trace.push_back({r->time, r->key, 1});
    durations.push_back(r->duration ? *r->duration : -1);
  }
  if (!(*reader)->status().ok()) return (*reader)->status();
  const LogStats& st = (*reader)->stats();
  if (st.records == 0) return absl::InvalidArgumentError(fmt::format("{}: no request in the log", a.traffic));
  notes.push_back(fmt::format("{}: {} log, key {}, {}; {} requests", a.traffic, format_name((*reader)->format()),
                              a.key,
                              co.default_duration >= 0
                                  ? fmt::format("duration {} where the log has none", a.duration)
                                  : fmt::format("duration {}", a.duration_field),
                              st.records));
  note_reordered(st, notes);
  return absl::OkStatus();
}

}  // namespace

// --charge: the log's requests (start, duration, actual cost) charged after the response and
// reserved+settled; the table on stdout, the chart or page in --out.
int run_charge(const SimulateArgs& a) {
  if (generated(a.traffic)) {
    return fail("--charge needs a log with a cost per request (and durations): generated traffic costs 1 per request");
  }
  if (a.estimate.empty()) return fail("--charge needs --estimate N (units reserved per request) or mean:N");
  auto estimate = Estimate::parse(a.estimate);
  if (!estimate.ok()) return fail(std::string(estimate.status().message()));
  auto lanes = parse_lanes(a.strategies);
  if (!lanes.ok()) return fail(std::string(lanes.status().message()));
  auto o = reader_options(a);
  if (!o.ok()) return fail(std::string(o.status().message()));
  auto unit = duration_unit(a.duration_unit);
  if (!unit.ok()) return fail(std::string(unit.status().message()));
  std::optional<Micros> fallback;
  if (!a.duration.empty()) {
    fallback = parse_log_duration(a.duration, kMicrosPerSecond);
    if (!fallback) return fail(fmt::format("--duration \"{}\": give e.g. 30s, 500ms (at most 23 hours)", a.duration));
  }
  o->cost_field = canonical_field(a.cost_field);
  o->require_cost = true;
  o->duration_field = a.duration_field == "auto" ? "auto" : canonical_field(a.duration_field);
  o->duration_unit = *unit;
  o->require_duration = !fallback.has_value();
  o->strict = true;
  ChargeOptions co;
  co.limits = a.limits;
  co.burst = a.burst;
  co.lanes = *lanes;
  co.estimate = *estimate;
  co.check_cost = a.check_cost;
  auto sim = ChargeSimulation::make(co);
  if (!sim.ok()) return fail(std::string(sim.status().message()));
  if (absl::Status s = check_traffic(a.traffic); !s.ok()) return fail(std::string(s.message()));
  auto reader = LogReader::open(a.traffic, *o);
  if (!reader.ok()) return fail(std::string(reader.status().message()));
  while (auto r = (*reader)->next()) {
    const Micros d = r->duration ? *r->duration : *fallback;
    if (absl::Status s = (*sim)->add(r->time, d, r->key, r->cost); !s.ok()) {
      return fail(fmt::format("{}: {}", a.traffic, std::string(s.message())));
    }
  }
  if (!(*reader)->status().ok()) return fail(std::string((*reader)->status().message()));
  const LogStats& st = (*reader)->stats();
  if (st.records == 0) return fail(fmt::format("{}: no request in the log", a.traffic));
  std::vector<std::string> notes{fmt::format("{}: {} log, key {}, cost {}, {}; {} requests", a.traffic,
                                             format_name((*reader)->format()), a.key, o->cost_field,
                                             fallback ? fmt::format("duration {} where the log has none", a.duration)
                                                      : fmt::format("duration {}", a.duration_field),
                                             st.records)};
  note_reordered(st, notes);
  auto result = (*sim)->finish();
  if (!result.ok()) return fail(std::string(result.status().message()));
  for (const std::string& skip : result->skipped) {
    std::cerr << "floodgate simulate: " << skip << "\n";
    notes.push_back(skip);
  }
  return report_charge(a, *result, *estimate, notes);
}

// --concurrency N: the traffic's requests, each holding a lease from its start to its end (the
// log's duration field, or --duration), through "N concurrent for T"; the table on stdout, the
// lane in --out.
int run_concurrency(const SimulateArgs& a) {
  if (!a.limits.empty()) {
    return fail("--concurrency draws one lane, N concurrent for --lease-ttl: --limit does not apply to it");
  }
  ConcurrencyOptions co;
  co.limit = a.concurrency;
  if (!a.lease_ttl.empty()) {
    const auto ttl = parse_log_duration(a.lease_ttl, kMicrosPerSecond);
    if (!ttl || *ttl < 1) return fail(fmt::format("--lease-ttl \"{}\": give e.g. 30s, 5m (more than 0)", a.lease_ttl));
    co.lease_ttl = *ttl;
  }
  if (!a.duration.empty()) {
    const auto d = parse_log_duration(a.duration, kMicrosPerSecond);
    if (!d) return fail(fmt::format("--duration \"{}\": give e.g. 30s, 500ms (at most 23 hours)", a.duration));
    co.default_duration = *d;
  }
  // Checks N and T before reading anything.
  if (auto empty = simulate_concurrency(co, {}); !empty.ok()) return fail(std::string(empty.status().message()));
  std::vector<TraceEvent> trace;
  std::vector<Micros> durations;
  std::vector<std::string> notes;
  if (generated(a.traffic)) {
    if (co.default_duration < 0) return fail("--concurrency with generated traffic needs --duration (e.g. 2s)");
    auto t = make_traffic(a.traffic, a.seed);
    if (!t.ok()) return fail(std::string(t.status().message()));
    trace = *std::move(t);
    notes.push_back(fmt::format("{}: every request lasts {}", a.traffic, a.duration));
  } else if (absl::Status s = read_concurrency_log(a, co, trace, durations, notes); !s.ok()) {
    return fail(std::string(s.message()));
  }
  auto lane = simulate_concurrency(co, trace, durations);
  if (!lane.ok()) return fail(fmt::format("{}: {}", a.traffic, std::string(lane.status().message())));
  return report_concurrency(a, *lane, trace, notes);
}


}  // namespace floodgate::cli::simulate_cmd
