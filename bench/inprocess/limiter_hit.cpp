// Limiter::hit with the system clock on the in-memory storage, in the scenarios of the peers
// harness (bench/peers): one key or 100k keys visited
// round-robin, "allow" (1e9/hour: never reached) or "deny" (1/hour: every timed decision is a
// rejection), one thread or two threads on distinct halves of the keys, after one warm-up pass.
// Scenarios 6 and 7 visit the 100k keys in a shuffled order instead (the warm-up still adds them
// in order): a round-robin visits them in the order they were added, which a store that lays
// records out in insertion order turns into a sequential scan the CPU prefetches, and a service's
// traffic does not (bench/inprocess/visit_order.sh puts Guava beside it).
// It reports the median of REPS runs per scenario, so that a change to the decision path shows
// here before the side-by-side run. The harness's own program, bench/peers/floodgate/fg_inmem.cpp,
// visits the 100k keys in the order every peer shares (xorshift32) and prints JSON lines; it is
// built against an installed floodgate, this one in the tree.
//
//   build/release/bench/limiter_hit [seconds=1] [reps=3] [algorithms=all, comma-separated]
//                                   [scenarios=all: indexes into kScenarios, e.g. 01]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "floodgate/limiter.hpp"
#include "floodgate/memory_storage.hpp"

namespace {

using floodgate::Limiter;
using floodgate::Policy;
using floodgate::Strategy;
using Clk = std::chrono::steady_clock;

struct Algorithm {
  const char* name;
  Strategy strategy;
};
constexpr Algorithm kAlgorithms[] = {{"fixed_window", Strategy::kFixedWindow},
                                     {"moving_window", Strategy::kMovingWindow},
                                     {"sliding_window_counter", Strategy::kSlidingWindowCounter},
                                     {"token_bucket", Strategy::kTokenBucket},
                                     {"leaky_bucket", Strategy::kLeakyBucket},
                                     {"gcra", Strategy::kGcra}};

struct Scenario {
  int keys;
  bool allow;
  int threads;
  bool shuffled = false;  // visit the keys in a random order (fixed seed), not the order added
};
constexpr Scenario kScenarios[] = {{1, true, 1},      {1, false, 1},      {100000, true, 1},
                                   {100000, false, 1}, {100000, true, 2}, {100000, false, 2},
                                   {100000, true, 1, true}, {100000, false, 1, true}};

// Decisions per second of one thread over `keys` for about `seconds` (clock read every 1024).
double run_thread(Limiter& limiter, const Policy& policy, const std::vector<std::string>& keys,
                  double seconds, long& allowed) {
  const auto t0 = Clk::now();
  const auto deadline = t0 + std::chrono::duration<double>(seconds);
  long ops = 0;
  std::size_t i = 0;
  do {
    for (int j = 0; j < 1024; ++j) {
      const auto d = limiter.hit(policy, keys[i]);
      allowed += (d.ok() && d->allowed) ? 1 : 0;
      if (++i == keys.size()) i = 0;
    }
    ops += 1024;
  } while (Clk::now() < deadline);
  return static_cast<double>(ops) / std::chrono::duration<double>(Clk::now() - t0).count();
}

double run_scenario(const Algorithm& a, const Scenario& s, const std::vector<std::string>& all,
                    double seconds) {
  const auto policy = Policy::make("bench", a.strategy, s.allow ? "1000000000/hour" : "1/hour");
  if (!policy.ok()) {
    std::fprintf(stderr, "%s\n", policy.status().ToString().c_str());
    std::exit(1);
  }
  Limiter limiter(std::make_shared<floodgate::MemoryStorage>());
  std::vector<std::vector<std::string>> parts(static_cast<std::size_t>(s.threads));
  for (int k = 0; k < s.keys; ++k) parts[static_cast<std::size_t>(k % s.threads)].push_back(all[k]);
  for (const auto& part : parts) {
    for (const auto& k : part) (void)limiter.hit(*policy, k);  // warm-up: every key present
  }
  if (s.shuffled) {
    std::mt19937 random(42);
    for (auto& part : parts) std::shuffle(part.begin(), part.end(), random);
  }
  std::vector<double> rate(parts.size());
  std::vector<long> allowed(parts.size());
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < parts.size(); ++t) {
    threads.emplace_back([&, t] { rate[t] = run_thread(limiter, *policy, parts[t], seconds, allowed[t]); });
  }
  for (auto& t : threads) t.join();
  const long any = std::max(allowed.front(), allowed.back());
  if (s.allow ? any == 0 : any > 0) {
    std::fprintf(stderr, "%s: the regime was not what was asked\n", a.name);
    std::exit(1);
  }
  double sum = 0;
  for (double r : rate) sum += r;
  return sum;
}

bool wanted(const char* only, const char* name) {
  if (only == nullptr) return true;
  const std::string list = std::string(",") + only + ",";
  return list.find(std::string(",") + name + ",") != std::string::npos;
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 1.0;
  const int reps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
  const char* only = argc > 3 && std::string(argv[3]) != "all" ? argv[3] : nullptr;
  const std::string scenarios = argc > 4 ? argv[4] : "01234567";
  std::vector<std::string> all;
  for (int i = 0; i < 100000; ++i) all.push_back("user:" + std::to_string(i));
  std::printf("%-24s %7s %6s %7s %9s %12s\n", "algorithm", "keys", "regime", "threads", "order", "M/s median");
  for (const Algorithm& a : kAlgorithms) {
    if (!wanted(only, a.name)) continue;
    for (std::size_t n = 0; n < std::size(kScenarios); ++n) {
      if (scenarios.find(static_cast<char>('0' + n)) == std::string::npos) continue;
      const Scenario& s = kScenarios[n];
      std::vector<double> runs;
      for (int r = 0; r < reps; ++r) runs.push_back(run_scenario(a, s, all, seconds));
      std::sort(runs.begin(), runs.end());
      std::printf("%-24s %7d %6s %7d %9s %12.2f\n", a.name, s.keys, s.allow ? "allow" : "deny", s.threads,
                  s.shuffled ? "shuffled" : "as added", runs[runs.size() / 2] / 1e6);
      std::fflush(stdout);
    }
  }
}
