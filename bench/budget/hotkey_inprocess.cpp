// One hot key decided by one Limiter from several threads, for a time, with or without budget
// slices (bench/hotkey/run.sh runs it beside the `floodgate serve` processes).
//
//   hotkey_inprocess --storage URL [--threads 2] [--seconds 5] [--limit 50000] [--max-slice 500]
//                    [--slices 0|1]
// prints "decisions N admitted N seconds S start_us N end_us N lease_store_calls N".
#include <atomic>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "floodgate/limiter.hpp"

int main(int argc, char** argv) {
  std::string url;
  int threads = 2;
  double seconds = 5;
  std::int64_t limit = 50000;
  std::int64_t max_slice = 500;
  bool slices = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const std::string v = argv[i + 1];
    if (k == "--storage") url = v;
    else if (k == "--threads") threads = std::stoi(v);
    else if (k == "--seconds") seconds = std::stod(v);
    else if (k == "--limit") limit = std::stoll(v);
    else if (k == "--max-slice") max_slice = std::stoll(v);
    else if (k == "--slices") slices = v != "0";
    else {
      std::cerr << "unknown option " << k << "\n";
      return 2;
    }
  }
  auto storage = floodgate::open_storage(url.empty() ? "memory" : url);
  if (!storage.ok()) {
    std::cerr << storage.status() << "\n";
    return 2;
  }
  floodgate::PolicyOptions o;
  o.blocked_cache = 1000;
  if (slices) o.budget.max_slice = max_slice;
  const auto policy =
      floodgate::Policy::make("hot", floodgate::Strategy::kFixedWindow, fmt::format("{}/second", limit), o);
  if (!policy.ok()) {
    std::cerr << policy.status() << "\n";
    return 2;
  }
  floodgate::Limiter limiter(*storage);
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> decisions{0}, admitted{0}, errors{0};
  const auto start = floodgate::SystemClock::instance()->now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      std::int64_t n = 0, a = 0, e = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        const auto d = limiter.hit(*policy, "hot");
        ++n;
        if (!d.ok() || d->degraded) ++e;
        else if (d->allowed) ++a;
      }
      decisions += n;
      admitted += a;
      errors += e;
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& th : pool) th.join();
  const auto end = floodgate::SystemClock::instance()->now();
  limiter.flush_budgets();
  if (errors.load() > 0) {
    std::cerr << errors.load() << " decisions failed\n";
    return 1;
  }
  fmt::print("decisions {} admitted {} seconds {:.3f} start_us {} end_us {} lease_store_calls {}\n", decisions.load(),
             admitted.load(), static_cast<double>(end - start) / 1e6, start, end,
             limiter.budget_stats().store_calls);
  return 0;
}
