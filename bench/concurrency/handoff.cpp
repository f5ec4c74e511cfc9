// How long a freed slot of a concurrency policy takes to reach a waiter (bench/concurrency/
// handoff.sh). Policy `1 concurrent for 10 seconds`, one key. Each round: holder A takes the lease
// with Limiter::acquire; waiter B calls Throttle::acquire_lease (deadline --timeout-ms); once B is
// waiting, A sleeps a random delay (uniform in [--min-delay-ms, --max-delay-ms], so that B polls
// in its 16 ms regime), releases, and notes the instant its release call returned (the slot is
// free in the store by then); B notes when acquire_lease returned, then releases its lease. The
// hand-off is B's instant minus A's, both on one steady clock (A and B are two threads of this
// process). It can be slightly negative: B's poll may run between the release's script and A's
// reading of the reply.
//
// With a storage URL other than memory, A and B each open their own storage (separate
// connections: two instances on one store) and their own Limiter. With `memory` both use ONE
// Limiter (one process, one store): A's release still wakes nobody, B finds the slot by polling.
//
// The waiter's store calls are counted through Limiter::observe_storage_latency (called after
// every storage call, on the calling thread): the calls B's thread made during acquire_lease,
// the denied polls and the admitting one.
//
//   handoff --storage URL [--rounds 300] [--min-delay-ms 20] [--max-delay-ms 80]
//           [--timeout-ms 3000] [--seed N]
// Prints one JSON line; exits 1 if a round failed (an error, or no slot by the deadline).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "floodgate/limiter.hpp"
#include "floodgate/throttle.hpp"

namespace {

using Steady = std::chrono::steady_clock;

thread_local std::uint64_t store_calls = 0;  // this thread's storage calls (the observer counts them)

double ms(Steady::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// The q-quantile of sorted values (nearest rank).
template <class T>
T quantile(const std::vector<T>& sorted, double q) {
  const auto n = sorted.size();
  auto i = static_cast<std::size_t>(q * static_cast<double>(n) + 0.999999);
  i = std::clamp<std::size_t>(i, 1, n);
  return sorted[i - 1];
}

}  // namespace

int main(int argc, char** argv) {
  std::string url = "memory";
  int rounds = 300;
  int min_delay_ms = 20;
  int max_delay_ms = 80;
  int timeout_ms = 3000;
  std::uint64_t seed = std::random_device{}();
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (i + 1 >= argc) {
      std::cerr << "option " << k << " needs a value\n";
      return 2;
    }
    const std::string v = argv[i + 1];
    if (k == "--storage") url = v;
    else if (k == "--rounds") rounds = std::stoi(v);
    else if (k == "--min-delay-ms") min_delay_ms = std::stoi(v);
    else if (k == "--max-delay-ms") max_delay_ms = std::stoi(v);
    else if (k == "--timeout-ms") timeout_ms = std::stoi(v);
    else if (k == "--seed") seed = std::stoull(v);
    else {
      std::cerr << "unknown option " << k << "\n";
      return 2;
    }
  }
  if (rounds < 1 || min_delay_ms < 0 || max_delay_ms < min_delay_ms || timeout_ms < 1) {
    std::cerr << "--rounds ≥ 1, 0 ≤ --min-delay-ms ≤ --max-delay-ms, --timeout-ms ≥ 1\n";
    return 2;
  }

  const auto policy =
      floodgate::Policy::make("handoff", floodgate::Strategy::kConcurrency, "1 concurrent for 10 seconds");
  if (!policy.ok()) {
    std::cerr << policy.status() << "\n";
    return 2;
  }
  const bool memory = url == "memory" || url.starts_with("memory:");
  auto open = [&]() -> std::shared_ptr<floodgate::Limiter> {
    auto storage = floodgate::open_storage(url);
    if (!storage.ok()) {
      std::cerr << storage.status() << "\n";
      return nullptr;
    }
    auto limiter = std::make_shared<floodgate::Limiter>(*storage);
    limiter->observe_storage_latency([](floodgate::Micros) { ++store_calls; });
    return limiter;
  };
  const auto holder = open();  // A
  const auto waiter = memory ? holder : open();  // B
  if (!holder || !waiter) return 2;
  floodgate::Throttle throttle(waiter);
  const std::string key = fmt::format("handoff-{}", seed);

  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> delay_us(min_delay_ms * 1000, max_delay_ms * 1000);
  std::vector<double> handoff_ms, release_call_ms;
  std::vector<std::uint64_t> calls;
  int failed = 0;
  int early = 0;  // hand-offs B saw before A's release call returned
  for (int round = 0; round < rounds; ++round) {
    auto held = holder->acquire(*policy, key);
    if (!held.ok() || !held->held()) {
      std::cerr << "round " << round << ": the holder did not get the slot: "
                << (held.ok() ? "denied" : held.status().ToString()) << "\n";
      return 1;
    }
    std::atomic<bool> waiting{false};
    Steady::time_point acquired{};
    std::uint64_t waiter_calls = 0;
    bool ok = false;
    std::thread b([&] {
      const std::uint64_t before = store_calls;
      waiting.store(true, std::memory_order_release);
      auto r = throttle.acquire_lease(*policy, key, 1, floodgate::Micros{timeout_ms} * 1000);
      acquired = Steady::now();
      waiter_calls = store_calls - before;
      ok = r.acquired() && r.lease.held();
      if (!ok) std::cerr << "round " << round << ": the waiter: " << r.status << "\n";
      if (r.lease.held()) {
        auto rel = r.lease.release();
        if (!rel.ok()) {
          std::cerr << "round " << round << ": the waiter's release: " << rel.status() << "\n";
          ok = false;
        }
      }
    });
    while (!waiting.load(std::memory_order_acquire)) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us(rng)));
    const auto release_start = Steady::now();
    auto rel = held->release();
    const auto released = Steady::now();
    b.join();
    if (!rel.ok()) {
      std::cerr << "round " << round << ": the holder's release: " << rel.status() << "\n";
      return 1;
    }
    if (!ok) {
      ++failed;
      continue;
    }
    handoff_ms.push_back(ms(acquired - released));
    release_call_ms.push_back(ms(released - release_start));
    calls.push_back(waiter_calls);
    if (acquired < released) ++early;
  }

  if (handoff_ms.empty()) {
    std::cerr << "no round succeeded\n";
    return 1;
  }
  std::sort(handoff_ms.begin(), handoff_ms.end());
  std::sort(release_call_ms.begin(), release_call_ms.end());
  std::sort(calls.begin(), calls.end());
  double mean = 0;
  for (double h : handoff_ms) mean += h;
  mean /= static_cast<double>(handoff_ms.size());
  double calls_mean = 0;
  for (auto c : calls) calls_mean += static_cast<double>(c);
  calls_mean /= static_cast<double>(calls.size());
  const std::string storage_name = memory ? "memory" : url.substr(0, url.find(':'));
  fmt::print(
      "{{\"storage\": \"{}\", \"instances\": {}, \"policy\": \"1 concurrent for 10 seconds\", \"rounds\": {}, "
      "\"failed\": {}, \"delay_ms\": [{}, {}], \"handoff_ms\": {{\"p50\": {:.3f}, \"p90\": {:.3f}, \"p99\": {:.3f}, "
      "\"max\": {:.3f}, \"min\": {:.3f}, \"mean\": {:.3f}}}, \"early\": {}, \"release_call_ms_p50\": {:.3f}, "
      "\"waiter_store_calls\": {{\"mean\": {:.2f}, \"p50\": {}, \"max\": {}}}, \"seed\": {}}}\n",
      storage_name, memory ? 1 : 2, rounds, failed, min_delay_ms, max_delay_ms, quantile(handoff_ms, 0.5),
      quantile(handoff_ms, 0.9), quantile(handoff_ms, 0.99), handoff_ms.back(), handoff_ms.front(), mean, early,
      quantile(release_call_ms, 0.5), calls_mean, quantile(calls, 0.5), calls.back(), seed);
  return failed > 0 ? 1 : 0;
}
