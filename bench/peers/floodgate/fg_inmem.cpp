// floodgate's in-memory decision throughput through the public API (Limiter::hit with the
// system clock), measured exactly as the peers are (bench/peers/py_limits.py, GuavaBench.java):
// keys 1 or 100k pre-built strings, regime allow (1e9/hour) or deny (1/hour), a warm-up pass
// over the key space in creation order, then a loop capped by time (clock read every 1024 ops)
// that visits the keys in the shared random order (visit_order: the xorshift32 sequence of
// py_limits.py, node_peers.js and GuavaBench.java). With threads=2 each thread has its own half
// of the keys, visited in that order. One JSON line each.
#include <floodgate/limiter.hpp>
#include <floodgate/memory_storage.hpp>
#include <floodgate/policy.hpp>
#include <floodgate/storage.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#ifndef FG_VERSION
#define FG_VERSION "unknown"
#endif

using namespace floodgate;
using Clk = std::chrono::steady_clock;

struct Result { long ops = 0; long allowed = 0; double secs = 0; };

// 2^20 indices into [0, n) drawn by xorshift32 (seed 2463534242).
static std::vector<uint32_t> visit_order(uint32_t n) {
  std::vector<uint32_t> out(1u << 20);
  uint32_t x = 2463534242u;
  for (auto& o : out) {
    x ^= x << 13; x ^= x >> 17; x ^= x << 5;
    o = x % n;
  }
  return out;
}

static Result run(Limiter& lim, const Policy& p, const std::vector<const std::string*>& keys, double cap) {
  Result r;
  const auto t0 = Clk::now();
  const auto deadline = t0 + std::chrono::duration<double>(cap);
  const size_t n = keys.size();
  size_t i = 0;
  while (r.ops < 400'000'000) {
    for (int j = 0; j < 1024; ++j) {
      auto d = lim.hit(p, *keys[i]);
      if (d.ok() && d->allowed) ++r.allowed;
      if (++i == n) i = 0;
    }
    r.ops += 1024;
    if (Clk::now() > deadline) break;
  }
  r.secs = std::chrono::duration<double>(Clk::now() - t0).count();
  return r;
}

// Redis mode (`fg_inmem CAP REP redis PORT`): one client process on a private redis-server, allow
// regime, 1 and 100k keys; "seq" is one Limiter::hit at a time (as the peers' sequential runs),
// "batch64" hands 64 requests at a time to Storage::apply_batch (one pipelined round trip, the
// counterpart of the peers' 64 requests in flight).
static int redis_mode(double cap, int rep, int port) {
  auto storage = open_storage("redis://127.0.0.1:" + std::to_string(port) + "?timeout_ms=1000");
  if (!storage.ok()) { std::fprintf(stderr, "%s\n", storage.status().ToString().c_str()); return 1; }
  std::vector<std::string> all;
  for (int i = 0; i < 100000; ++i) all.push_back("user:" + std::to_string(i));
  const std::vector<uint32_t> order = visit_order(100000);
  struct S { const char* name; Strategy s; };
  const S strategies[] = {{"fixed_window", Strategy::kFixedWindow},
                          {"moving_window", Strategy::kMovingWindow},
                          {"sliding_window_counter", Strategy::kSlidingWindowCounter},
                          {"gcra", Strategy::kGcra}};
  for (const auto& st : strategies) {
    auto policy = Policy::make("bench", st.s, "1000000000/hour");
    Limiter lim(*storage);
    for (int nk : {1, 100000}) {
      for (const char* mode : {"seq", "batch64"}) {
        const bool seq = std::string(mode) == "seq";
        long ops = 0, allowed = 0, errors = 0;
        const auto t0 = Clk::now();
        const auto deadline = t0 + std::chrono::duration<double>(cap);
        size_t i = 0;
        std::vector<Storage::BatchItem> items(64);
        std::vector<absl::StatusOr<Decision>> out(64);
        while (Clk::now() < deadline && ops < 5'000'000) {
          if (seq) {
            for (int j = 0; j < 64; ++j) {
              auto d = lim.hit(*policy, all[nk == 1 ? 0 : order[i]]);
              if (d.ok() && d->allowed && !d->degraded) ++allowed; else ++errors;
              if (++i == order.size()) i = 0;
            }
          } else {
            for (int j = 0; j < 64; ++j) {
              items[j] = {&*policy, all[nk == 1 ? 0 : order[i]], 1, Effect::kHit};
              if (++i == order.size()) i = 0;
            }
            const Micros now = std::chrono::duration_cast<std::chrono::microseconds>(
                std::chrono::system_clock::now().time_since_epoch()).count();
            (*storage)->apply_batch(items, now, out);
            for (auto& d : out) { if (d.ok() && d->allowed) ++allowed; else ++errors; }
          }
          ops += 64;
        }
        const double secs = std::chrono::duration<double>(Clk::now() - t0).count();
        std::printf("{\"bench\": \"redis\", \"peer\": \"floodgate\", \"lang\": \"c++\", \"version\": \"" FG_VERSION "\", "
                    "\"storage\": \"RedisStorage\", \"algorithm\": \"%s\", \"api\": \"%s\", \"keys\": %d, "
                    "\"regime\": \"allow\", \"ops\": %ld, \"seconds\": %.6f, \"ops_per_s\": %.1f, \"allowed\": %ld, "
                    "\"errors\": %ld, \"threads\": 1, \"concurrency\": %d, \"run\": %d}\n",
                    st.name, seq ? "Limiter::hit" : "Storage::apply_batch(64)", nk, ops, secs, ops / secs,
                    allowed, errors, seq ? 1 : 64, rep);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  const double cap = argc > 1 ? std::atof(argv[1]) : 2.0;
  const int rep = argc > 2 ? std::atoi(argv[2]) : 0;
  if (argc > 4 && std::string(argv[3]) == "redis") return redis_mode(cap, rep, std::atoi(argv[4]));
  struct S { const char* name; Strategy s; };
  const S strategies[] = {{"fixed_window", Strategy::kFixedWindow},
                          {"moving_window", Strategy::kMovingWindow},
                          {"sliding_window_counter", Strategy::kSlidingWindowCounter},
                          {"token_bucket", Strategy::kTokenBucket},
                          {"gcra", Strategy::kGcra}};
  std::vector<std::string> all;
  for (int i = 0; i < 100000; ++i) all.push_back("user:" + std::to_string(i));
  const std::vector<uint32_t> order = visit_order(100000);
  // FG_ALGOS=gcra,fixed_window limits the algorithms (default: all).
  const char* only = std::getenv("FG_ALGOS");
  for (const auto& st : strategies) {
    if (only != nullptr && std::string(",") .append(only).append(",").find(std::string(",") + st.name + ",") == std::string::npos) continue;
    for (int threads : {1, 2}) {
      for (int nk : {1, 100000}) {
        if (threads == 2 && nk == 1) continue;
        for (const char* regime : {"allow", "deny"}) {
          const bool allow = std::string(regime) == "allow";
          auto policy = Policy::make("bench", st.s, allow ? "1000000000/hour" : "1/hour");
          if (!policy.ok()) { std::fprintf(stderr, "%s\n", policy.status().ToString().c_str()); return 1; }
          Limiter lim(std::make_shared<MemoryStorage>());
          std::vector<std::vector<std::string>> parts(threads);
          for (int k = 0; k < nk; ++k) parts[k % threads].push_back(all[k]);
          for (auto& part : parts) for (auto& k : part) (void)lim.hit(*policy, k);  // warm-up
          std::vector<std::vector<const std::string*>> visits(threads);
          if (nk == 1) visits[0].push_back(&all[0]);
          else for (uint32_t k : order) visits[k % threads].push_back(&all[k]);
          std::vector<Result> res(threads);
          std::vector<std::thread> ts;
          for (int t = 0; t < threads; ++t)
            ts.emplace_back([&, t] { res[t] = run(lim, *policy, visits[t], cap); });
          for (auto& t : ts) t.join();
          long ops = 0, allowed = 0; double secs = 0;
          for (auto& r : res) { ops += r.ops; allowed += r.allowed; secs = std::max(secs, r.secs); }
          std::printf("{\"bench\": \"inmem\", \"peer\": \"floodgate\", \"lang\": \"c++\", \"version\": \"" FG_VERSION "\", "
                      "\"storage\": \"MemoryStorage\", \"algorithm\": \"%s\", \"api\": \"Limiter::hit(policy, key)\", "
                      "\"keys\": %d, \"order\": \"%s\", \"regime\": \"%s\", \"ops\": %ld, \"seconds\": %.6f, "
                      "\"ops_per_s\": %.1f, \"allowed\": %ld, \"threads\": %d, \"concurrency\": %d, \"run\": %d}\n",
                      st.name, nk, nk == 1 ? "one" : "random", regime, ops, secs, ops / secs, allowed, threads, threads, rep);
          std::fflush(stdout);
        }
      }
    }
  }
}
