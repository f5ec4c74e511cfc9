// Decisions per second through RedisStorage::apply_batch against a live Redis, per script, beside
// redis-benchmark running the same FCALL (or EVALSHA) with the same pipeline depth and client count (the
// ratio is the client's overhead); redis-benchmark running the minimal script of the same
// algorithm (bench/redis/minimal/*.lua, the yardstick named in the last column) the same way,
// whose rate over our script's is the server cost of our script in units of the minimal one
// ; the server's own µs per call of each (INFO commandstats, usec_per_call:
// the script's run alone, without request parsing and reply writing; plain connections only) and
// their ratio (the second "cost"); and the latency of single apply() calls (p50, p99).
//
//   floodgate_redis_benchmark --port 6379 [--host 127.0.0.1] [--clients 4] [--pipeline 16]
//                             [--seconds 3] [--keys 10000] [--calls 20000] [--no-redis-benchmark]
//                             [--tls-ca CA_FILE]   (TLS to --port, verified against CA_FILE)
//                             [--eval]             (scripts=eval: EVALSHA, not the library)
//
// Uses the server clock (the default) and the prefix "fgbench:"; run it against a scratch Redis.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <hiredis/hiredis.h>

#include "floodgate/policy.hpp"
#include "storage/redis/protocol.hpp"
#include "storage/redis/redis_storage.hpp"
#include "storage/redis/scripts_gen.hpp"

namespace {

using namespace floodgate;
using namespace floodgate::redis;

struct Args {
  std::string host = "127.0.0.1";
  int port = 6379;
  int clients = 4;
  int pipeline = 16;
  double seconds = 3;
  int keys = 10000;
  int calls = 20000;
  bool redis_benchmark = true;
  std::string tls_ca;  // non-empty: TLS (rediss://) verified against this CA file
  bool eval = false;   // scripts=eval: EVALSHA instead of the function library
};

std::string key_name(int i) { return fmt::format("{:012}", i); }  // as redis-benchmark's __rand_int__

double run_batches(RedisStorage& storage, const Policy& policy, const Args& a) {
  std::atomic<bool> stop{false};
  std::atomic<long long> decisions{0};
  std::atomic<long long> errors{0};
  std::vector<std::thread> threads;
  const auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < a.clients; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::string> keys(static_cast<std::size_t>(a.pipeline));
      std::vector<Storage::BatchItem> items(keys.size());
      std::vector<absl::StatusOr<Decision>> out(keys.size());
      unsigned seed = 12345u + static_cast<unsigned>(t);
      long long n = 0;
      long long e = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        for (std::size_t i = 0; i < keys.size(); ++i) {
          seed = seed * 1103515245u + 12345u;
          keys[i] = key_name(static_cast<int>((seed >> 8) % static_cast<unsigned>(a.keys)));
          items[i] = {&policy, keys[i], 1, Effect::kHit};
        }
        storage.apply_batch(items, 0, out);
        for (const auto& d : out) e += d.ok() ? 0 : 1;
        n += static_cast<long long>(out.size());
      }
      decisions.fetch_add(n);
      errors.fetch_add(e);
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(a.seconds));
  stop.store(true);
  for (auto& t : threads) t.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (errors.load() > 0) std::fprintf(stderr, "  %lld errors\n", errors.load());
  return static_cast<double>(decisions.load()) / secs;
}

std::pair<double, double> latency(RedisStorage& storage, const Policy& policy, const Args& a) {
  std::vector<double> us;
  us.reserve(static_cast<std::size_t>(a.calls));
  for (int i = 0; i < a.calls; ++i) {
    const std::string key = key_name(i % a.keys);
    const auto t0 = std::chrono::steady_clock::now();
    auto d = storage.apply(policy, key, 1, Effect::kHit, 0);
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    if (!d.ok()) std::fprintf(stderr, "  error: %s\n", std::string(d.status().message()).c_str());
  }
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us[us.size() * 99 / 100]};
}

// One command to the server (hiredis, plain connections only); its reply as text ("" on failure).
std::string server_says(const Args& a, const char* command) {
  if (!a.tls_ca.empty()) return {};
  redisContext* c = redisConnect(a.host.c_str(), a.port);
  std::string text;
  if (c != nullptr && c->err == 0) {
    auto* r = static_cast<redisReply*>(redisCommand(c, command));
    if (r != nullptr && r->type == REDIS_REPLY_STRING) text.assign(r->str, r->len);
    if (r != nullptr) freeReplyObject(r);
  }
  if (c != nullptr) redisFree(c);
  return text;
}

// The server's own time per call of `command` (FCALL or EVALSHA) since the last CONFIG RESETSTAT:
// usec_per_call of INFO commandstats (the script's run, without reading the request or writing
// the reply); 0 if unknown.
double usec_per_call(const Args& a, std::string_view command) {
  const std::string info = server_says(a, "INFO commandstats");
  const std::string field = fmt::format("cmdstat_{}:", command == "FCALL" ? "fcall" : "evalsha");
  const std::size_t at = info.find(field);
  const std::size_t u = at == std::string::npos ? at : info.find("usec_per_call=", at);
  return u == std::string::npos ? 0 : std::atof(info.c_str() + u + 14);
}

// Runs redis-benchmark with `command` (the words after its options; "__rand_int__" in a key is
// replaced by one of a.keys random numbers); returns requests per second, 0 on failure, and sets
// `usec` to the server's time per call (usec_per_call).
double redis_benchmark(const Args& a, const std::string& command, std::string& line, double& usec) {
  const long long n = std::max<long long>(100000, static_cast<long long>(a.seconds * 100000));
  line = fmt::format("redis-benchmark -h {} -p {} -c {} -P {} -n {} -r {} -q {}", a.host, a.port,
                     a.clients, a.pipeline, n, a.keys, command);
  server_says(a, "CONFIG RESETSTAT");
  FILE* p = popen((line + " 2>&1").c_str(), "r");
  if (p == nullptr) return 0;
  std::string out;
  char buf[4096];
  for (std::size_t r; (r = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, r);
  pclose(p);
  usec = usec_per_call(a, command.substr(0, command.find(' ')));
  // "...: 12345.67 requests per second, p50=..." (the last report line)
  const std::size_t at = out.rfind(" requests per second");
  if (at == std::string::npos) {
    std::fprintf(stderr, "  redis-benchmark said: %s\n", out.c_str());
    return 0;
  }
  std::size_t start = out.rfind(' ', at - 1);
  return std::atof(out.substr(start + 1, at - start - 1).c_str());
}

// Our script as the storage sends it (FCALL of the library the storage loaded, or EVALSHA), for
// the key "__rand_int__".
std::string our_command(const Policy& policy, bool fcall) {
  const auto& script = scripts::kAll[static_cast<std::size_t>(script_for(policy))];
  std::string keys;
  for (std::size_t i = 0; i < policy.limits().size(); ++i) {
    keys += " '" + state_key("fgbench:", "__rand_int__", policy_hash(policy), i) + "'";
  }
  std::vector<std::string> argv;
  script_args(policy, 1, true, std::nullopt, 0, argv, floodgate::SystemClock::instance()->now());
  std::string args;
  for (const auto& s : argv) args += " '" + s + "'";
  return fmt::format("{} {} {}{}{}", fcall ? "FCALL" : "EVALSHA", fcall ? script.function : script.sha,
                     policy.limits().size(), keys, args);
}

// The minimal script (bench/redis/minimal) that is the yardstick of a policy's script: the
// fixed window aligned to the clock against fixed_window_aligned.lua (TIME, a counter per window),
// the one anchored at the first hit against fixed_window.lua (INCR, PEXPIRE), a bucket policy of
// several limits against gcra_limits.lua, each other algorithm against its own. `file` gets its
// name; a non-empty `file` (gcra_reply) names the yardstick of a one-limit bucket policy instead.
std::string minimal_args(const Policy& policy, std::string& file) {
  const Limit& l = policy.limits().front();
  const long long ms = l.period / 1000;
  switch (policy.strategy()) {
    case Strategy::kFixedWindow:
      file = policy.anchor() == Anchor::kFirstHit ? "fixed_window" : "fixed_window_aligned";
      return fmt::format("1 'fgminimal:{}:__rand_int__' {} {}", file, l.amount, ms);
    case Strategy::kSlidingWindowCounter:
      file = "sliding_window";
      return fmt::format("1 'fgminimal:{}:__rand_int__' {} {}", file, l.amount, ms);
    case Strategy::kMovingWindow:
      file = "moving_window";
      return fmt::format("1 'fgminimal:{}:__rand_int__' {} {}", file, l.amount, l.period);
    default:  // the bucket family: GCRA's emission interval and burst tolerance per limit
      break;
  }
  const auto& limits = policy.limits();
  if (file.empty() || limits.size() > 1) file = limits.size() == 1 ? "gcra" : "gcra_limits";
  std::string keys;
  std::string args;
  for (std::size_t i = 0; i < limits.size(); ++i) {
    keys += limits.size() == 1 ? fmt::format(" 'fgminimal:{}:__rand_int__'", file)
                               : fmt::format(" 'fgminimal:gcra:{{__rand_int__}}:{}'", i);
    args += fmt::format(" {} {}", std::max<long long>(1, limits[i].period / limits[i].amount),
                        limits[i].period);
  }
  return fmt::format("{}{}{}", limits.size(), keys, args);
}

// The minimal script of the policy's algorithm, loaded into the server, as a redis-benchmark
// command; empty if it cannot be loaded. `file` gets the yardstick's name.
std::string minimal_command(const Policy& policy, const Args& a, std::string& file) {
  const std::string args = minimal_args(policy, file);
  FILE* f = std::fopen((std::string(FLOODGATE_MINIMAL_DIR "/") + file + ".lua").c_str(), "r");
  if (f == nullptr) return {};
  std::string text;
  char buf[4096];
  for (std::size_t r; (r = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, r);
  std::fclose(f);
  redisContext* c = redisConnect(a.host.c_str(), a.port);
  if (c == nullptr || c->err != 0) {
    if (c != nullptr) redisFree(c);
    return {};
  }
  auto* r = static_cast<redisReply*>(redisCommand(c, "SCRIPT LOAD %b", text.data(), text.size()));
  std::string sha;
  if (r != nullptr && r->type == REDIS_REPLY_STRING) sha.assign(r->str, r->len);
  if (r != nullptr) freeReplyObject(r);
  redisFree(c);
  if (sha.empty()) return {};
  return fmt::format("EVALSHA {} {}", sha, args);
}

// One row of the table for `p`: our rates, the yardstick's, the server's µs per call, latency.
// `yardstick`: the minimal script to hold it to, if not its algorithm's own (minimal_args).
void measure(RedisStorage& storage, const Policy& p, const Args& a, std::string yardstick = {}) {
  const auto [p50, p99] = latency(storage, p, a);  // also loads the script
  const double ours = run_batches(storage, p, a);
  std::string line;
  std::string minimal_line;
  double theirs = 0;
  double minimal = 0;
  double us = 0;
  double min_us = 0;
  if (a.redis_benchmark) {
    theirs = redis_benchmark(a, our_command(p, storage.uses_functions()), line, us);
    const std::string m = a.tls_ca.empty() ? minimal_command(p, a, yardstick) : std::string();
    if (!m.empty()) minimal = redis_benchmark(a, m, minimal_line, min_us);
  }
  std::printf("%-22s %12.0f %14.0f %6.2f %12.0f %6.2f %7.2f %7.2f %6.2f %8.1f %8.1f  %s\n",
              p.name().c_str(), ours, theirs, theirs > 0 ? ours / theirs : 0.0, minimal,
              theirs > 0 ? minimal / theirs : 0.0, us, min_us, min_us > 0 ? us / min_us : 0.0, p50,
              p99, yardstick.c_str());
  if (!line.empty()) std::printf("  %s\n", line.c_str());
  if (!minimal_line.empty()) std::printf("  %s\n", minimal_line.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (f == "--host") a.host = next();
    else if (f == "--port") a.port = std::stoi(next());
    else if (f == "--clients") a.clients = std::stoi(next());
    else if (f == "--pipeline") a.pipeline = std::stoi(next());
    else if (f == "--seconds") a.seconds = std::stod(next());
    else if (f == "--keys") a.keys = std::stoi(next());
    else if (f == "--calls") a.calls = std::stoi(next());
    else if (f == "--no-redis-benchmark") a.redis_benchmark = false;
    else if (f == "--tls-ca") a.tls_ca = next();
    else if (f == "--eval") a.eval = true;
    else {
      std::fprintf(stderr, "unknown flag %s\n", f.c_str());
      return 2;
    }
  }
  RedisOptions o;
  o.seeds.push_back(Endpoint{a.host, a.port, ""});
  o.pool = static_cast<std::size_t>(a.clients);
  o.prefix = "fgbench:";
  o.timeout = std::chrono::milliseconds(1000);
  o.tls.enabled = !a.tls_ca.empty();
  o.tls.ca_file = a.tls_ca;
  o.functions = !a.eval;
  auto storage = RedisStorage::open(o);
  if (!storage.ok()) {
    std::fprintf(stderr, "%s\n", std::string(storage.status().message()).c_str());
    return 1;
  }
  const std::vector<Policy> policies = {
      Policy::make("bench-fixed", Strategy::kFixedWindow, "1000000/second").value(),
      Policy::make("bench-first-hit", Strategy::kFixedWindow, "1000000/second",
                   PolicyOptions{.anchor = Anchor::kFirstHit}).value(),
      Policy::make("bench-moving", Strategy::kMovingWindow, "1000000/second").value(),
      Policy::make("bench-sliding", Strategy::kSlidingWindowCounter, "1000000/second").value(),
      Policy::make("bench-gcra", Strategy::kGcra, "1000000/second").value(),
      Policy::make("bench-gcra-2-limits", Strategy::kGcra, "1000000/second; 100000000/hour").value(),
  };
  std::printf("clients %d, pipeline %d, %d keys, %.1f s per run; single calls: %d\n", a.clients,
              a.pipeline, a.keys, a.seconds, a.calls);
  std::printf("%-22s %12s %14s %6s %12s %6s %7s %7s %6s %8s %8s  %s\n", "policy", "floodgate/s",
              "redis-bench/s", "ratio", "minimal/s", "cost", "us/call", "min us", "cost", "p50 µs",
              "p99 µs", "yardstick");
  for (const Policy& p : policies) measure(**storage, p, a);
  // GCRA once more, against a minimal GCRA that also answers remaining, retry and reset.
  if (a.redis_benchmark) measure(**storage, policies[4], a, "gcra_reply");
  return 0;
}
