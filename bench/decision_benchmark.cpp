// ns per decision through the in-memory storage, per algorithm, for 1, 10k and 1M keys and 1 or
// 2 threads on distinct keys; and bytes per key at 1M keys. docs/benchmarks.md quotes the figures.
//
//   build/release/bench/floodgate_benchmark --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
#include <malloc.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "floodgate/limiter.hpp"
#include "floodgate/memory_storage.hpp"
#include "support/variants.hpp"

namespace floodgate {
namespace {

constexpr Micros kT0 = 1'700'000'000'000'000;

using testing::kVariants;
using testing::Variant;

std::vector<std::string> make_keys(std::size_t n, std::uint64_t seed) {
  std::vector<std::string> keys;
  keys.reserve(n);
  for (std::size_t i = 0; i < n; ++i) keys.push_back("user-" + std::to_string(1'000'000 + i));
  std::shuffle(keys.begin(), keys.end(), std::mt19937_64(seed));
  return keys;
}

// One storage shared by the threads of a run; each thread works on its own keys.
struct Fixture {
  std::unique_ptr<MemoryStorage> storage;
  std::unique_ptr<Policy> policy;
  std::vector<std::vector<std::string>> keys;  // per thread
};
Fixture* g_fixture = nullptr;

// Runs once before the threads of a run start (args: variant index, key count).
void SetUpDecision(const benchmark::State& state) {
  const Variant& v = kVariants[state.range(0)];
  const auto key_count = static_cast<std::size_t>(state.range(1));
  MemoryStorageOptions o;
  o.max_keys = std::max<std::size_t>(key_count * 2, std::size_t{1} << 20);
  // A limit most requests meet (the moving window keeps its log of 100 per key per second).
  auto* f = new Fixture{std::make_unique<MemoryStorage>(o),
                        std::make_unique<Policy>(v.policy("100/second", "bench")), {}};
  const auto per_thread =
      std::max<std::size_t>(1, key_count / static_cast<std::size_t>(state.threads()));
  for (int t = 0; t < state.threads(); ++t) {
    f->keys.push_back(make_keys(per_thread, static_cast<std::uint64_t>(t)));
    const char suffix[] = {'-', static_cast<char>('a' + t), '\0'};
    for (auto& k : f->keys.back()) k.append(suffix);
  }
  for (const auto& ks : f->keys) {  // warm: every key present
    for (const auto& k : ks) {
      benchmark::DoNotOptimize(f->storage->apply(*f->policy, k, 1, Effect::kHit, kT0));
    }
  }
  g_fixture = f;
}

void TearDownDecision(const benchmark::State&) {
  delete g_fixture;
  g_fixture = nullptr;
}

void BM_Decision(benchmark::State& state) {
  const auto& keys = g_fixture->keys[static_cast<std::size_t>(state.thread_index())];
  MemoryStorage& storage = *g_fixture->storage;
  const Policy& policy = *g_fixture->policy;
  std::size_t i = 0;
  Micros now = kT0 + 1'000'000;
  for (auto _ : state) {
    auto d = storage.apply(policy, keys[i], 1, Effect::kHit, now);
    benchmark::DoNotOptimize(d);
    if (++i == keys.size()) i = 0;
    now += 1;
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    state.counters["evictions"] = static_cast<double>(storage.evictions());
  }
}

void DecisionArgs(benchmark::internal::Benchmark* b) {
  for (int v = 0; v < static_cast<int>(std::size(kVariants)); ++v) {
    for (int keys : {1, 10'000, 1'000'000}) b->Args({v, keys});
  }
}

BENCHMARK(BM_Decision)->Apply(DecisionArgs)->Threads(1)->Threads(2)->UseRealTime()
    ->Setup(SetUpDecision)->Teardown(TearDownDecision);

// Bytes allocated and not freed: glibc's heap (uordblks) and its blocks served by mmap (hblkhd).
// Without the latter an index array above the mmap threshold went uncounted, but only until the
// first such block was freed (glibc then raises the threshold), so the first variant measured
// ~8 bytes less than the same variant run after another.
std::size_t heap_bytes() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

// Heap bytes per key with 1M keys present, from glibc's allocator statistics (not RSS).
void BM_BytesPerKey(benchmark::State& state) {
  const Variant& v = kVariants[state.range(0)];
  constexpr std::size_t kKeys = 1'000'000;
  const auto keys = make_keys(kKeys, 1);  // "user-1xxxxxx": 12 characters, inside std::string's SSO
  double per_key = 0;
  for (auto _ : state) {
    const Policy p = v.policy("100/second", "bytes");
    MemoryStorageOptions o;
    o.max_keys = kKeys * 2;
    const std::size_t before = heap_bytes();
    {
      MemoryStorage storage(o);
      for (const auto& k : keys) benchmark::DoNotOptimize(storage.apply(p, k, 1, Effect::kHit, kT0));
      per_key = static_cast<double>(heap_bytes() - before) / kKeys;
    }
  }
  state.counters["bytes_per_key"] = per_key;
}
BENCHMARK(BM_BytesPerKey)->DenseRange(0, static_cast<int>(std::size(kVariants)) - 1)->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// The whole public path: Limiter::hit with the system clock, 10k keys, one thread.
void BM_LimiterHitSystemClock(benchmark::State& state) {
  Limiter limiter(std::make_shared<MemoryStorage>());
  const Policy p = Policy::make("api", Strategy::kGcra, "100/second").value();
  const auto keys = make_keys(10'000, 3);
  for (const auto& k : keys) benchmark::DoNotOptimize(limiter.hit(p, k));
  std::size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(limiter.hit(p, keys[i]));
    if (++i == keys.size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LimiterHitSystemClock);

// A reservation and its settle against a plain hit, through Limiter on a manual clock, 10k keys,
// one thread, every algorithm (range 0: the variant; range 1: 0 hit, 1 reserve + settle). An
// iteration of the second is two calls (the reserve and the settle): compare per request.
void BM_Reservation(benchmark::State& state) {
  const Variant& v = kVariants[state.range(0)];
  const bool reserve = state.range(1) == 1;
  auto clock = std::make_shared<ManualClock>(kT0);
  Limiter limiter(std::make_shared<MemoryStorage>(), clock);
  const Policy p = v.policy("1000000000/hour", "reserve");
  const auto keys = make_keys(10'000, 4);
  for (const auto& k : keys) benchmark::DoNotOptimize(limiter.hit(p, k));
  std::size_t i = 0;
  std::uint64_t n = 0;
  std::string id;
  for (auto _ : state) {
    if (reserve) {
      id.assign("r");
      id += std::to_string(n++);
      auto r = limiter.reserve(p, keys[i], 100, id, kMinReservationTtl);
      benchmark::DoNotOptimize(r);
      benchmark::DoNotOptimize(limiter.settle(p, keys[i], id, 90));
    } else {
      benchmark::DoNotOptimize(limiter.hit(p, keys[i], 100));
    }
    if (++i == keys.size()) i = 0;
    clock->advance(1);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(reserve ? "reserve+settle" : "hit");
}
BENCHMARK(BM_Reservation)->ArgsProduct({benchmark::CreateDenseRange(0, static_cast<int>(std::size(kVariants)) - 1, 1), {0, 1}});

}  // namespace
}  // namespace floodgate

BENCHMARK_MAIN();
