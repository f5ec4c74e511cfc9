// floodgate simulate: traffic (generated, or an access log of any size) through several strategies
// and policies side by side; a summary table and a chart or an HTML report.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.hpp"
#include "cli/simulate_command.hpp"
#include "floodgate/replay.hpp"
#include "floodgate/sim/stream.hpp"
#include "floodgate/sim/simulate.hpp"

namespace floodgate::cli {
namespace simulate_cmd {

int fail(std::string_view message, int code) {
  std::cerr << "floodgate simulate: " << message << "\n";
  return code;
}

// Writes the report (--out) and says so; 1 when it cannot be written.
int write_page(const std::string& path, const std::string& page) {
  std::ofstream file(path, std::ios::binary);
  file << page;
  file.close();
  if (!file) return fail("cannot write " + path, 1);
  std::cout << "wrote " << path << " (" << page.size() << " bytes)\n";
  return 0;
}

bool generated(std::string_view traffic) {
  return traffic.starts_with("poisson:") || traffic.starts_with("burst:");
}

// "poison:rate=…": a misspelt kind of generated traffic, not a log file to open.
absl::Status check_traffic(const std::string& traffic) {
  if (generated(traffic) || std::filesystem::exists(traffic)) return absl::OkStatus();
  const std::size_t colon = traffic.find(':');
  if (colon == std::string::npos || colon == 0) return absl::OkStatus();
  const std::string kind = traffic.substr(0, colon);
  if (kind.find_first_not_of("abcdefghijklmnopqrstuvwxyz") != std::string::npos) return absl::OkStatus();
  return absl::InvalidArgumentError(fmt::format(
      "--traffic \"{}\": unknown kind \"{}\" (poisson:rate=R,duration=D or burst:n=N,at=T, parts joined "
      "with +), and no file of that name",
      traffic, kind));
}

// The reader's options shared by both kinds of simulation.
absl::StatusOr<LogReaderOptions> reader_options(const SimulateArgs& a) {
  LogReaderOptions o;
  auto format = parse_log_format(a.format);
  if (!format.ok()) return format.status();
  auto key = KeySpec::parse(a.key);
  if (!key.ok()) return key.status();
  o.format = *format;
  o.key = *key;
  o.layout = a.layout;
  o.time_field = a.time_field.empty() ? "" : canonical_field(a.time_field);
  return o;
}

absl::StatusOr<Micros> duration_unit(std::string_view unit) {
  if (unit.empty()) return 0;
  if (unit == "s") return kMicrosPerSecond;
  if (unit == "ms") return 1000;
  if (unit == "us") return 1;
  return absl::InvalidArgumentError(fmt::format("--duration-unit \"{}\": give s, ms or us", unit));
}

namespace {

absl::Status feed_generated(const SimulateArgs& a, StreamingSimulation& sim) {
  auto trace = make_traffic(a.traffic, a.seed);
  if (!trace.ok()) return trace.status();
  for (const TraceEvent& e : *trace) {
    if (absl::Status s = sim.add(e.t, e.key, e.cost); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// Streams the log into the simulation; `notes` says what was read and what was skipped.
absl::Status feed_log(const SimulateArgs& a, StreamingSimulation& sim, std::vector<std::string>& notes) {
  auto options = reader_options(a);
  if (!options.ok()) return options.status();
  LogReaderOptions& o = *options;
  o.cost_field = canonical_field(a.cost_field);
  auto reader = LogReader::open(a.traffic, o);
  if (!reader.ok()) return reader.status();
  while (auto r = (*reader)->next()) {
    if (absl::Status s = sim.add(r->time, r->key, r->cost); !s.ok()) return s;
  }
  if (!(*reader)->status().ok()) return (*reader)->status();
  const LogStats& st = (*reader)->stats();
  notes.push_back(fmt::format("{}: {} log, key {}; {} lines, {} requests", a.traffic,
                              format_name((*reader)->format()), a.key, st.lines, st.records));
  if (st.bad > 0) {
    notes.push_back(fmt::format("{} line{} skipped (did not parse):", st.bad, st.bad == 1 ? "" : "s"));
    for (const std::string& e : st.examples) notes.push_back("  " + e);
  }
  if (st.reordered > 0) {
    notes.push_back(fmt::format("{} requests were logged before earlier ones; each is taken at the latest time seen",
                                st.reordered));
  }
  if (st.records == 0) {
    std::string message = fmt::format("{}: no request could be read", a.traffic);
    for (const std::string& n : notes) message += "\n  " + n;
    return absl::InvalidArgumentError(message);
  }
  // A key field that no line has (a typo, a header the format does not log) would put every
  // request under one key "-" and change every figure: refused. Some lines without it: a warning.
  const std::string known = st.fields.empty() ? std::string("none") : fmt::format("{}", fmt::join(st.fields, ", "));
  if (!o.key.parts.empty() && st.key_missing == st.records) {
    return absl::InvalidArgumentError(fmt::format(
        "--key {}: no request of {} has that field, so every key would be \"-\"; the log's fields: {}", a.key,
        a.traffic, known));
  }
  if (st.key_missing * 10 > st.records) {
    notes.push_back(fmt::format("warning: --key {}: {} of {} requests lack a field of the key and count under \"-\" "
                                "(the log's fields: {})",
                                a.key, st.key_missing, st.records, known));
  }
  return absl::OkStatus();
}

void print_table(const StreamResult& r, std::string_view traffic) {
  const Micros span = r.requests ? r.last - r.first : 0;
  std::cout << fmt::format("{} requests over {} s ({}), {} key{}\n", r.requests, format_seconds(span), traffic, r.keys,
                           r.keys == 1 ? "" : "s");
  std::string limit;
  for (const StreamRow& row : r.rows) {
    if (row.limit != limit || &row == &r.rows.front()) {
      limit = row.limit;
      const LaneSummary& s = row.summary;
      std::cout << fmt::format("limit {}\n{:<24} {:>9} {:>9} {:>16} {:>20} {:>14}\n", limit, "strategy", "allowed", "blocked",
                               fmt::format("max in {}s", format_seconds(s.period)),
                               fmt::format("worst burst ({}s)", format_seconds(s.burst_span)), "keys blocked");
    }
    std::cout << fmt::format("{:<24} {:>9} {:>9} {:>16} {:>20} {:>14}\n", row.lane, row.summary.allowed, row.summary.blocked,
                             row.summary.max_in_period, row.summary.worst_burst, row.keys_blocked);
  }
}

int write_output(const SimulateArgs& a, const StreamResult& r, const std::vector<std::string>& notes) {
  std::string limits;
  for (const std::string& l : a.limits) limits += (limits.empty() ? "" : " | ") + l;
  const std::string title = fmt::format("floodgate simulate: {} — {}", limits, a.traffic);
  std::string page;
  if (a.out.ends_with(".svg")) {
    page = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" +
           (r.all_marked ? render_svg(marked_lanes(r), r.marked, title) : render_bins_svg(r, title));
  } else {
    page = render_report_html(r, title, notes);
  }
  return write_page(a.out, page);
}

int run(const SimulateArgs& a) {
  if (!a.out.empty() && !a.out.ends_with(".svg") && !a.out.ends_with(".html") && !a.out.ends_with(".htm")) {
    return fail("--out \"" + a.out + "\" must end in .svg or .html");
  }
  if (a.charge && a.concurrency_given) return fail("--charge and --concurrency are two modes: give one");
  if (a.charge) return run_charge(a);
  if (a.concurrency_given) return run_concurrency(a);
  if (!a.lease_ttl.empty()) return fail("--lease-ttl needs --concurrency N");
  if (!a.duration.empty() || !a.duration_unit.empty() || a.duration_field != "auto") {
    return fail("--duration, --duration-field and --duration-unit need --charge or --concurrency");
  }
  if (a.limits.empty()) return fail("--limit is required (e.g. --limit 3/minute)");
  auto lanes = parse_lanes(a.strategies);
  if (!lanes.ok()) return fail(std::string(lanes.status().message()));
  StreamOptions o;
  o.limits = a.limits;
  o.burst = a.burst;
  o.lanes = *lanes;
  o.focus = a.focus;
  o.columns = a.columns;
  auto sim = StreamingSimulation::make(o);
  if (!sim.ok()) return fail(std::string(sim.status().message()));
  std::vector<std::string> notes;
  if (absl::Status s = check_traffic(a.traffic); !s.ok()) return fail(std::string(s.message()));
  const absl::Status fed = generated(a.traffic) ? feed_generated(a, **sim) : feed_log(a, **sim, notes);
  if (!fed.ok()) return fail(std::string(fed.message()));
  for (std::size_t i = 1; i < notes.size(); ++i) std::cerr << "floodgate simulate: " << notes[i] << "\n";
  const StreamResult r = (*sim)->result();
  for (const std::string& skip : r.skipped) {
    std::cerr << "floodgate simulate: " << skip << "\n";
    notes.push_back(skip);
  }
  if (!a.focus.empty() && r.marked.empty()) {
    std::string top;
    for (std::size_t i = 0; i < std::min<std::size_t>(r.top.size(), 5); ++i) top += (i == 0 ? "" : ", ") + r.top[i].key;
    std::cerr << "floodgate simulate: warning: --focus \"" << a.focus << "\": no request has this key"
              << (top.empty() ? std::string() : " (the most blocked: " + top + ")") << "\n";
  }
  print_table(r, a.traffic);
  return a.out.empty() ? 0 : write_output(a, r, notes);
}

}  // namespace
}  // namespace simulate_cmd


std::function<int()> add_simulate(CLI::App& app) {
  auto args = std::make_shared<simulate_cmd::SimulateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "simulate", "Run traffic or an access log through several strategies and limits side by side: "
                  "a summary table, and a chart or an HTML report.");
  cmd->add_option("--limit,-l", args->limits,
                  "e.g. \"3/minute\" or \"2/second; 10/minute\"; repeat to compare policies (required but with "
                  "--concurrency)");
  cmd->add_option("--burst", args->burst, "bucket capacity of token-bucket, leaky-bucket and gcra");
  cmd->add_option("--strategies,-s", args->strategies,
                  "all (default) or a comma-separated list: fixed-window, fixed-window-first-hit, "
                  "moving-window, sliding-window-counter, token-bucket, leaky-bucket, gcra");
  cmd->add_option("--traffic,-t", args->traffic,
                  "poisson:rate=2/s,duration=60s | burst:n=20,at=30s (join with +) | a log file "
                  "(plain or .gz)")->required();
  cmd->add_option("--format,-f", args->format, "log format: auto (default), jsonl, combined, envoy, csv");
  cmd->add_option("--key,-k", args->key,
                  "the key of a request: auto (default), ip, ip/64, a field ($http_x_api_key, "
                  "%REQ(X-API-KEY)%, a JSON or CSV name), or several joined by +");
  cmd->add_option("--log-format", args->layout,
                  "the nginx log_format or Envoy format string the log was written with "
                  "(default: combined, or Envoy's default)");
  cmd->add_option("--time-field", args->time_field, "the field holding the time (default: the format's)");
  cmd->add_option("--focus", args->focus, "a key whose requests are drawn one by one in the report");
  cmd->add_option("--columns", args->columns, "time bins of the chart (default 600)");
  cmd->add_option("--seed", args->seed, "seed of the Poisson generator (default 1)");
  cmd->add_option("--out,-o", args->out, "write FILE.svg (the chart) or FILE.html (the report)");
  CLI::Option* charge = cmd->add_flag("--charge", args->charge,
                "costs known after the response (tokens): compare charging them after the response with "
                "reserving --estimate at the start and settling the actual cost at the end");
  cmd->add_option("--cost-field", args->cost_field, "the field holding a request's cost (default cost)");
  cmd->add_option("--duration-field", args->duration_field,
                  "--charge, --concurrency: the field holding a request's duration (default auto: request_time, "
                  "upstream_response_time, duration, duration_ms, response_time, latency_ms)");
  cmd->add_option("--duration-unit", args->duration_unit,
                  "--charge, --concurrency: the unit of a bare number in the duration field: s, ms or us (default: "
                  "ms for duration and *_ms, us for *_us, else s)");
  cmd->add_option("--duration", args->duration,
                  "--charge, --concurrency: the duration of requests whose line has none, or of every generated "
                  "request (e.g. 30s); without it such a line is an error");
  cmd->add_option("--estimate", args->estimate,
                  "--charge: units reserved at a request's start: N, or mean:N (the mean of the key's last 8 "
                  "actual costs, N before any)")->needs(charge);
  cmd->add_option("--check-cost", args->check_cost,
                  "--charge: the cost charged-after tests at the start: 1 (default: admitted while usage < "
                  "limit) or 0 (while usage <= limit)")->needs(charge);
  CLI::Option* concurrency = cmd->add_option("--concurrency", args->concurrency,
                  "draw a concurrency lane instead: each request holds a lease from its start to its end "
                  "(--duration-field, --duration) under \"N concurrent for --lease-ttl\"; N from 1");
  cmd->add_option("--lease-ttl", args->lease_ttl,
                  "--concurrency: a lease frees itself this long after its start if its request has not "
                  "ended (default 1 day: every lease is released at its request's end)");
  return [args, concurrency] {
    args->concurrency_given = concurrency->count() > 0;
    return simulate_cmd::run(*args);
  };
}

}  // namespace floodgate::cli
