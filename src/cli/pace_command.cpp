// floodgate pace: lines from stdin to stdout, each when its slot comes — throttling a pipeline.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "floodgate/throttle.hpp"

namespace floodgate::cli {

namespace {
struct PaceArgs {
  std::string limit;
  std::string strategy;  // default: see run()
  std::int64_t burst = 1;
  std::string storage = "memory";
  std::string key = "pace";
  double timeout_s = 3600;
  bool stats = false;
};

// The policy of a run. Burst 1 (the default): the leaky bucket as a shaper: every
// admitted line gets the exact instant it may leave (`delay`), computed from the bucket's level
// rather than from when this thread happened to wake, so scheduling latency never accumulates into
// a lower rate. Its capacity of 2 is slack for that latency, not a burst: a shaper spaces lines by
// 1/rate. Burst N > 1: GCRA with that burst (up to N lines at once).
absl::StatusOr<Policy> pace_policy(const PaceArgs& a) {
  const bool shaper = a.strategy.empty() ? a.burst == 1 : a.strategy == "leaky-bucket";
  auto strategy = parse_strategy(a.strategy.empty() ? (shaper ? "leaky-bucket" : "gcra") : a.strategy);
  if (!strategy.ok()) return strategy.status();
  if (!(a.timeout_s >= 0) || a.timeout_s > 1e9) {
    return absl::InvalidArgumentError("--timeout must be a number of seconds from 0 to 1e9");
  }
  if (a.burst < 1) return absl::InvalidArgumentError("--burst must be at least 1");
  PolicyOptions o;
  if (uses_burst(*strategy)) o.burst = shaper ? std::max<std::int64_t>(2, a.burst) : a.burst;
  o.shape = shaper && *strategy == Strategy::kLeakyBucket;
  return Policy::make("pace", *strategy, a.limit, o);
}

struct PaceStats {
  std::vector<Micros> emitted;
  Micros start = 0;
  Micros total_wait = 0;
  Micros max_wait = 0;
};

void print_stats(const PaceStats& s) {
  if (s.emitted.empty()) return;
  const double span = static_cast<double>(s.emitted.back() - s.emitted.front()) / 1e6;
  std::vector<double> gaps;
  for (std::size_t i = 1; i < s.emitted.size(); ++i) {
    gaps.push_back(static_cast<double>(s.emitted[i] - s.emitted[i - 1]) / 1e3);
  }
  std::sort(gaps.begin(), gaps.end());
  auto pct = [&](double p) {
    return gaps.empty() ? 0.0 : gaps[static_cast<std::size_t>(p * static_cast<double>(gaps.size() - 1))];
  };
  std::fprintf(stderr,
               "pace: %zu lines in %.3f s (first to last %.3f s): %.3f lines/s after the first; "
               "wait mean %.3f ms, max %.3f ms; gaps ms min %.3f p50 %.3f p99 %.3f max %.3f\n",
               s.emitted.size(), static_cast<double>(s.emitted.back() - s.start) / 1e6, span,
               span > 0 ? static_cast<double>(s.emitted.size() - 1) / span : 0.0,
               static_cast<double>(s.total_wait) / static_cast<double>(s.emitted.size()) / 1e3,
               static_cast<double>(s.max_wait) / 1e3, gaps.empty() ? 0.0 : gaps.front(), pct(0.5),
               pct(0.99), gaps.empty() ? 0.0 : gaps.back());
}

int run(const PaceArgs& a) {
  auto policy = pace_policy(a);
  if (!policy.ok()) {
    std::cerr << "floodgate pace: " << policy.status().message() << "\n";
    return 2;
  }
  auto storage = open_storage(a.storage);
  if (!storage.ok()) {
    std::cerr << "floodgate pace: " << storage.status().message() << "\n";
    return 2;
  }
  auto limiter = std::make_shared<Limiter>(*storage);
  Throttle throttle(limiter);
  const Micros timeout = static_cast<Micros>(std::llround(a.timeout_s * 1e6));
  const Clock& clock = limiter->clock();
  PaceStats stats;
  stats.start = clock.now();
  std::size_t number = 0;
  for (std::string line; std::getline(std::cin, line);) {
    ++number;
    const AcquireResult r = throttle.acquire(*policy, a.key, 1, timeout);
    if (!r.acquired()) {
      std::cerr << "floodgate pace: line " << number << " not written: " << r.status.message() << "\n";
      return 1;
    }
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    stats.emitted.push_back(clock.now());
    stats.total_wait += r.waited;
    stats.max_wait = std::max(stats.max_wait, r.waited);
  }
  if (a.stats) print_stats(stats);
  return 0;
}
}  // namespace

std::function<int()> add_pace(CLI::App& app) {
  auto args = std::make_shared<PaceArgs>();
  CLI::App* cmd = app.add_subcommand(
      "pace", "Copy stdin to stdout, one line per slot of a rate limit (throttle a pipeline).");
  cmd->add_option("--limit,-l", args->limit, "e.g. \"5/second\"")->required();
  cmd->add_option("--burst", args->burst, "lines that may go at once (default 1: evenly spaced)");
  cmd->add_option("--strategy", args->strategy,
                  "algorithm (default: leaky-bucket as a shaper for burst 1, else gcra)");
  cmd->add_option("--storage", args->storage,
                  "storage URL; a shared Redis paces several processes together (default memory)");
  cmd->add_option("--key", args->key, "the key the processes share (default \"pace\")");
  cmd->add_option("--timeout", args->timeout_s,
                  "seconds a line may wait for its slot (default 3600); a line that cannot get one "
                  "in time stops the run with an error");
  cmd->add_flag("--stats", args->stats, "print the achieved rate and waits to stderr at the end");
  return [args] { return run(*args); };
}

}  // namespace floodgate::cli
