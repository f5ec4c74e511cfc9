// floodgate simulate: one trace through several strategies; a summary table and a chart.
#include <fstream>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "floodgate/replay.hpp"
#include "floodgate/simulate.hpp"

namespace floodgate::cli {

namespace {

struct SimulateArgs {
  std::string limit;
  std::int64_t burst = 0;
  std::string strategies = "all";
  std::string traffic;
  std::uint64_t seed = 1;
  std::string out;
};

std::string html_page(std::string_view title, std::string_view svg) {
  return fmt::format(
      "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<title>{0}</title><style>body{{font-family:sans-serif;margin:1rem}}"
      "svg{{max-width:100%;height:auto}}</style></head>\n<body>\n<h1>{0}</h1>\n{1}</body></html>\n",
      title, svg);
}

int run(const SimulateArgs& a) {
  const bool svg = a.out.ends_with(".svg");
  const bool html = a.out.ends_with(".html") || a.out.ends_with(".htm");
  if (!a.out.empty() && !svg && !html) {
    std::cerr << "floodgate simulate: --out \"" << a.out << "\" must end in .svg or .html\n";
    return 2;
  }
  auto lanes = parse_lanes(a.strategies);
  if (!lanes.ok()) {
    std::cerr << "floodgate simulate: " << lanes.status().message() << "\n";
    return 2;
  }
  auto limits = parse_limits(a.limit);
  if (!limits.ok()) {
    std::cerr << "floodgate simulate: " << limits.status().message() << "\n";
    return 2;
  }
  auto trace = make_traffic(a.traffic, a.seed);
  if (!trace.ok()) {
    std::cerr << "floodgate simulate: " << trace.status().message() << "\n";
    return 2;
  }
  SimulateOptions o;
  o.limit = a.limit;
  o.burst = a.burst;
  o.lanes = *lanes;
  auto result = simulate(o, *trace);
  if (!result.ok()) {
    std::cerr << "floodgate simulate: " << result.status().message() << "\n";
    return 2;
  }
  const Limit& first = limits->front();
  const Micros span = trace->empty() ? 0 : trace->back().t;
  std::cout << fmt::format("{} requests over {} s ({}), limit {}{}\n", trace->size(),
                           format_seconds(span), a.traffic, a.limit,
                           a.burst > 0 ? fmt::format(", burst {}", a.burst) : "");
  const LaneSummary probe = summarize(result->front(), *trace, first.amount, first.period);
  const std::string period_col = fmt::format("max in {}s", format_seconds(probe.period));
  const std::string burst_col = fmt::format("worst burst ({}s)", format_seconds(probe.burst_span));
  std::cout << fmt::format("{:<24} {:>9} {:>9} {:>16} {:>20}\n", "strategy", "allowed", "blocked",
                           period_col, burst_col);
  for (const SimLane& lane : *result) {
    const LaneSummary s = summarize(lane, *trace, first.amount, first.period);
    std::cout << fmt::format("{:<24} {:>9} {:>9} {:>16} {:>20}\n", lane.name, s.allowed, s.blocked,
                             s.max_in_period, s.worst_burst);
  }
  if (!a.out.empty()) {
    const std::string title = fmt::format("floodgate simulate: {} — {}", a.limit, a.traffic);
    const std::string chart = render_svg(*result, *trace, title);
    std::ofstream file(a.out, std::ios::binary);
    if (!file) {
      std::cerr << "floodgate simulate: cannot write " << a.out << "\n";
      return 1;
    }
    if (svg) {
      file << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" << chart;
    } else {
      std::string escaped;
      for (char c : title) escaped += c == '<' ? std::string("&lt;") : c == '&' ? std::string("&amp;") : std::string(1, c);
      file << html_page(escaped, chart);
    }
    file.close();
    if (!file) {
      std::cerr << "floodgate simulate: cannot write " << a.out << "\n";
      return 1;
    }
    std::cout << "wrote " << a.out << "\n";
  }
  return 0;
}

}  // namespace

std::function<int()> add_simulate(CLI::App& app) {
  auto args = std::make_shared<SimulateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "simulate", "Run traffic through several strategies side by side: a summary table and a "
                  "chart of allowed and blocked requests per strategy.");
  cmd->add_option("--limit,-l", args->limit, "e.g. \"3/minute\" or \"2/second; 10/minute\"")->required();
  cmd->add_option("--burst", args->burst, "bucket capacity of token-bucket, leaky-bucket and gcra");
  cmd->add_option("--strategies,-s", args->strategies,
                  "all (default) or a comma-separated list: fixed-window, fixed-window-first-hit, "
                  "moving-window, sliding-window-counter, token-bucket, leaky-bucket, gcra");
  cmd->add_option("--traffic,-t", args->traffic,
                  "poisson:rate=2/s,duration=60s | burst:n=20,at=30s (join with +) | a JSONL trace file")
      ->required();
  cmd->add_option("--seed", args->seed, "seed of the Poisson generator (default 1)");
  cmd->add_option("--out,-o", args->out, "write the chart: FILE.svg or FILE.html");
  return [args] { return run(*args); };
}

}  // namespace floodgate::cli
