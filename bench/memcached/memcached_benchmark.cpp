// Decisions per second and latency (p50, p99) of MemcachedStorage against a live memcached, per
// algorithm, from one client process on one thread: sequential apply() calls, and apply_batch()
// of --batch items. One JSON line per measurement (bench/memcached/run.sh sets it beside Python
// `limits` on the same server).
//
//   floodgate_memcached_benchmark --port 11211 [--seconds 2] [--keys 100000] [--batch 64] [--run 0]
//
// The regime is "allow" (10^9 per hour: every decision reads and writes its key) over --keys
// pre-built keys taken round-robin, after one warm-up pass, on the system clock.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "floodgate/clock.hpp"
#include "floodgate/policy.hpp"
#include "storage/memcached/memcached_storage.hpp"

namespace {

using namespace floodgate;
using Steady = std::chrono::steady_clock;

struct Args {
  int port = 11211;
  double seconds = 2;
  int keys = 100000;
  int batch = 64;
  int run = 0;
};

Micros wall_now() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v.end());
  return v[i];
}

void report(const Args& a, const char* algorithm, const char* mode, long long decisions,
            long long errors, double seconds, std::vector<double>& us) {
  std::printf(
      "{\"bench\": \"memcached\", \"peer\": \"floodgate\", \"algorithm\": \"%s\", \"mode\": \"%s\", "
      "\"keys\": %d, \"batch\": %d, \"run\": %d, \"ops_per_s\": %.0f, \"p50_us\": %.1f, "
      "\"p99_us\": %.1f, \"errors\": %lld}\n",
      algorithm, mode, a.keys, std::strcmp(mode, "batched") == 0 ? a.batch : 1, a.run,
      static_cast<double>(decisions) / seconds, percentile(us, 0.50), percentile(us, 0.99), errors);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string name = argv[i];
    const char* v = argv[i + 1];
    if (name == "--port") a.port = std::atoi(v);
    else if (name == "--seconds") a.seconds = std::atof(v);
    else if (name == "--keys") a.keys = std::max(1, std::atoi(v));
    else if (name == "--batch") a.batch = std::max(1, std::atoi(v));
    else if (name == "--run") a.run = std::atoi(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", name.c_str());
      return 2;
    }
  }
  memcached::MemcachedOptions o;
  o.servers.push_back({"127.0.0.1", a.port});
  o.prefix = fmt::format("fgbench{}:", a.run);
  o.timeout = std::chrono::milliseconds(1000);
  auto opened = memcached::MemcachedStorage::open(o);
  if (!opened.ok()) {
    std::fprintf(stderr, "%s\n", std::string(opened.status().message()).c_str());
    return 1;
  }
  memcached::MemcachedStorage& storage = **opened;
  std::vector<std::string> keys;
  keys.reserve(static_cast<std::size_t>(a.keys));
  for (int i = 0; i < a.keys; ++i) keys.push_back(fmt::format("user:{}", i));

  const struct {
    const char* name;
    Strategy strategy;
  } algorithms[] = {{"fixed_window", Strategy::kFixedWindow},
                    {"moving_window", Strategy::kMovingWindow},
                    {"sliding_window_counter", Strategy::kSlidingWindowCounter},
                    {"token_bucket", Strategy::kTokenBucket},
                    {"leaky_bucket", Strategy::kLeakyBucket},
                    {"gcra", Strategy::kGcra}};
  for (const auto& alg : algorithms) {
    // The moving window's log holds one entry per admitted unit: 1000 per hour keeps it small
    // (it stays in the allow regime: each key gets a few hundred hits at most here).
    const std::string limit = alg.strategy == Strategy::kMovingWindow ? "1000/hour" : "1000000000/hour";
    const Policy policy = Policy::make(alg.name, alg.strategy, limit).value();
    for (const std::string& k : keys) (void)storage.apply(policy, k, 1, Effect::kHit, wall_now());

    // Sequential: one apply() at a time.
    {
      std::vector<double> us;
      us.reserve(1 << 20);
      long long n = 0, errors = 0;
      const auto start = Steady::now();
      const auto deadline = start + std::chrono::duration<double>(a.seconds);
      for (std::size_t i = 0; Steady::now() < deadline; ++i) {
        const auto t0 = Steady::now();
        const auto d = storage.apply(policy, keys[i % keys.size()], 1, Effect::kHit, wall_now());
        us.push_back(std::chrono::duration<double, std::micro>(Steady::now() - t0).count());
        ++n;
        errors += d.ok() ? 0 : 1;
      }
      report(a, alg.name, "sequential", n, errors,
             std::chrono::duration<double>(Steady::now() - start).count(), us);
    }
    // Batched: apply_batch of a.batch items (latency per batch).
    {
      std::vector<double> us;
      std::vector<Storage::BatchItem> items(static_cast<std::size_t>(a.batch));
      std::vector<absl::StatusOr<Decision>> out(items.size());
      long long n = 0, errors = 0;
      std::size_t next = 0;
      const auto start = Steady::now();
      const auto deadline = start + std::chrono::duration<double>(a.seconds);
      while (Steady::now() < deadline) {
        for (auto& item : items) item = {&policy, keys[next++ % keys.size()], 1, Effect::kHit};
        const auto t0 = Steady::now();
        storage.apply_batch(items, wall_now(), out);
        us.push_back(std::chrono::duration<double, std::micro>(Steady::now() - t0).count());
        n += static_cast<long long>(items.size());
        for (const auto& d : out) errors += d.ok() ? 0 : 1;
      }
      report(a, alg.name, "batched", n, errors,
             std::chrono::duration<double>(Steady::now() - start).count(), us);
    }
  }
  return 0;
}
