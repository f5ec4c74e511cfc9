// floodgate replay: a JSONL trace through a policy on the trace's own clock.
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "floodgate/storage.hpp"
#include "floodgate/policy.hpp"
#include "floodgate/replay.hpp"

namespace floodgate::cli {

namespace {
struct ReplayArgs {
  std::string strategy;
  std::string limit;
  std::int64_t burst = 0;
  std::string anchor = "clock";
  bool shape = false;
  std::string storage = "memory";
  std::string policy_name = "replay";
};

// The options of `floodgate replay`, into `args`.
void add_replay_options(CLI::App& cmd, ReplayArgs& args) {
  cmd.add_option("--strategy,-s", args.strategy,
                 "fixed-window, moving-window, sliding-window-counter, token-bucket, "
                 "leaky-bucket, gcra or concurrency")
      ->required();
  cmd.add_option("--limit,-l", args.limit, "limits, e.g. \"10/minute\" or \"2/second; 10/minute\"")
      ->required();
  cmd.add_option("--burst", args.burst, "bucket capacity (token-bucket, leaky-bucket, gcra)");
  cmd.add_option("--anchor", args.anchor, "fixed-window windows: clock (default) or first-hit")
      ->check(CLI::IsMember({"clock", "first-hit"}));
  cmd.add_flag("--shape", args.shape, "leaky-bucket as a shaper: decisions carry \"delay\"");
  cmd.add_option("--storage", args.storage,
                 "storage URL: memory (default), redis://host:port, redis+unix:///path, "
                 "redis-cluster://host:port,…; a Redis storage runs on the trace's clock "
                 "(clock=client is added; clock=redis is refused)");
  cmd.add_option("--name", args.policy_name, "policy name (default \"replay\")");
}

// Runs a replay by `args`: the exit status (2: bad arguments, 1: a bad trace or storage error).
int run_replay(const ReplayArgs& args) {
  auto strategy = parse_strategy(args.strategy);
  if (!strategy.ok()) {
    std::cerr << "floodgate replay: " << strategy.status().message() << "\n";
    return 2;
  }
  if (args.burst < 0) {
    std::cerr << "floodgate replay: --burst must be at least 1\n";
    return 2;
  }
  PolicyOptions options;
  options.anchor = args.anchor == "first-hit" ? Anchor::kFirstHit : Anchor::kClock;
  options.shape = args.shape;
  options.burst = args.burst;
  auto policy = Policy::make(args.policy_name, *strategy, args.limit, options);
  if (!policy.ok()) {
    std::cerr << "floodgate replay: " << policy.status().message() << "\n";
    return 2;
  }
  auto url = replay_storage_url(args.storage);
  if (!url.ok()) {
    std::cerr << "floodgate replay: " << url.status().message() << "\n";
    return 2;
  }
  auto storage = open_storage(*url);
  if (!storage.ok()) {
    std::cerr << "floodgate replay: " << storage.status().message() << "\n";
    return 2;
  }
  std::ios::sync_with_stdio(false);
  const absl::Status status = replay(*policy, **storage, std::cin, std::cout);
  std::cout.flush();
  if (!status.ok()) {
    std::cerr << "floodgate replay: " << status.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

std::function<int()> add_replay(CLI::App& app) {
  auto args = std::make_shared<ReplayArgs>();
  CLI::App* cmd = app.add_subcommand(
      "replay",
      "Run a JSONL trace ({\"t\": seconds, \"key\": \"…\", \"cost\": n} per line, on stdin) through a "
      "policy; print one decision per line.\n"
      "A line may also reserve and settle: {\"t\": 10, \"key\": \"u\", \"cost\": 100, \"reservation\": \"r1\", "
      "\"ttl_ms\": 60000} reserves 100 units under the id r1 for 60 s (ttl_ms 1 to 86400000, default 10 minutes); "
      "{\"t\": 12, \"key\": \"u\", \"reservation\": \"r1\", \"actual\": 130} settles it (\"settle\": true "
      "may be added) and prints the state after it. Under --strategy concurrency a reservation is a lease, "
      "its settle releases it (a lease takes no ttl_ms), and the release of a lease not outstanding prints "
      "{\"allowed\": false, \"not_outstanding\": true}.");
  add_replay_options(*cmd, *args);
  return [args]() -> int { return run_replay(*args); };
}

}  // namespace floodgate::cli
