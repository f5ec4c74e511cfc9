// Helpers of the Redis integration tests: the fixture's ports, storages with a unique key prefix,
// a private server a test may kill, and a raw command line to a server.
#pragma once

#include <hiredis/hiredis.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "storage/redis/redis_storage.hpp"
#include "storage/url.hpp"

namespace floodgate::redis::testing {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

// One executable per suite serves plain and TLS runs: for a TLS run ctest sets
// FLOODGATE_REDIS_TLS_DIR (the single server's TLS fixture) or FLOODGATE_REDIS_TLS_CLUSTER_DIR
// (the TLS cluster's); the compiled-in directories are the plain fixtures'.
inline std::string env_dir(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}
inline bool tls_single() { return !env_dir("FLOODGATE_REDIS_TLS_DIR").empty(); }
inline bool tls_cluster() { return !env_dir("FLOODGATE_REDIS_TLS_CLUSTER_DIR").empty(); }
inline std::string single_dir() { return tls_single() ? env_dir("FLOODGATE_REDIS_TLS_DIR") : FLOODGATE_REDIS_SINGLE_DIR; }
inline std::string cluster_dir() {
  return tls_cluster() ? env_dir("FLOODGATE_REDIS_TLS_CLUSTER_DIR") : FLOODGATE_REDIS_CLUSTER_DIR;
}

inline int single_port() { return std::stoi(read_file(single_dir() + "/port")); }

inline std::vector<int> ports_in(const std::string& file) {
  std::vector<int> out;
  const std::string s = read_file(file);
  std::size_t start = 0;
  while (start < s.size()) {
    std::size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    out.push_back(std::stoi(s.substr(start, comma - start)));
    start = comma + 1;
  }
  return out;
}

/// The cluster's plain ports (set-up with Raw; over TLS, the same nodes' plain ports).
inline std::vector<int> cluster_ports() { return ports_in(cluster_dir() + "/ports"); }

/// A prefix no other test run uses: keys never meet state from another test.
inline std::string unique_prefix(const std::string& what) {
  static int counter = 0;
  return "fgtest:" + std::to_string(getpid()) + ":" +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + ":" +
         std::to_string(counter++) + ":" + what + ":";
}

// Over TLS (the fixture's start-tls): rediss:// with the CA the fixture made, as the ACL user it
// created (Redis 7's AUTH user password); single_port() stays the plain port of the same server,
// for set-up with Raw.
inline std::string tls_dir() { return single_dir() + "/tls"; }
inline int tls_port() { return std::stoi(read_file(single_dir() + "/tls_port")); }
inline std::string single_url(const std::string& query) {
  if (tls_single()) {
    return "rediss://floodgate:s3cret@127.0.0.1:" + std::to_string(tls_port()) + "?tls_ca_file=" + tls_dir() +
           "/ca.crt&" + query;
  }
  return "redis://127.0.0.1:" + std::to_string(single_port()) + "?" + query;
}

// Over TLS (the fixture's start-tls-cluster): rediss-cluster:// to the TLS ports; the nodes
// announce their TLS ports to TLS clients, so redirects stay on TLS.
inline std::string cluster_url(const std::string& query) {
  const bool tls = tls_cluster();
  std::string url = tls ? "rediss-cluster://" : "redis-cluster://";
  const auto ports = tls ? ports_in(cluster_dir() + "/tls_ports") : cluster_ports();
  for (std::size_t i = 0; i < ports.size(); ++i) url += (i > 0 ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(ports[i]);
  return url + (tls ? "?tls_ca_file=" + cluster_dir() + "/tls/ca.crt&" : "?") + query;
}

inline std::shared_ptr<RedisStorage> open_url(const std::string& url) {
  auto parsed = parse_storage_url(url);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  auto options = parse_redis_url(*parsed);
  EXPECT_TRUE(options && options->ok());
  auto storage = RedisStorage::open(**options);
  EXPECT_TRUE(storage.ok()) << storage.status();
  return storage.ok() ? *storage : nullptr;
}

/// A raw connection for test set-up (SET, SCRIPT FLUSH, CLUSTER …).
class Raw {
 public:
  explicit Raw(int port) : c_(redisConnect("127.0.0.1", port)) {}
  ~Raw() { redisFree(c_); }
  Raw(const Raw&) = delete;
  Raw& operator=(const Raw&) = delete;
  /// The reply as text: a string, an integer, "ERR …" for an error, elements joined by '\n'.
  std::string cmd(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(c_, static_cast<int>(args.size()), argv.data(), lens.data()));
    if (r == nullptr) return "<io error>";
    std::string out = text(r);
    freeReplyObject(r);
    return out;
  }

 private:
  static std::string text(const redisReply* r) {
    switch (r->type) {
      case REDIS_REPLY_STRING:
      case REDIS_REPLY_STATUS:
        return std::string(r->str, r->len);
      case REDIS_REPLY_ERROR:
        return "ERR " + std::string(r->str, r->len);
      case REDIS_REPLY_INTEGER:
        return std::to_string(r->integer);
      case REDIS_REPLY_ARRAY: {
        std::string out;
        for (std::size_t i = 0; i < r->elements; ++i) {
          if (i > 0) out += "\n";
          out += text(r->element[i]);
        }
        return out;
      }
      default:
        return "";
    }
  }
  redisContext* c_;
};

/// A redis-server of the test's own (it may kill or pause it); stopped by the destructor and,
/// should the test crash, by the fixture's cleanup.
class PrivateServer {
 public:
  explicit PrivateServer(const std::string& extra = "") {
    const std::string cmd = std::string(FLOODGATE_REDIS_FIXTURE) + " start-server " +
                            FLOODGATE_REDIS_PRIVATE_DIR + " " + extra;
    FILE* p = popen(cmd.c_str(), "r");
    char buf[4096] = {0};
    if (p != nullptr && fgets(buf, sizeof buf, p) != nullptr) {
      std::string line(buf);
      while (!line.empty() && line.back() == '\n') line.pop_back();
      const std::size_t space = line.find(' ');
      port_ = std::atoi(line.substr(0, space).c_str());
      if (space != std::string::npos) dir_ = line.substr(space + 1);
    }
    if (p != nullptr) pclose(p);
  }
  ~PrivateServer() { kill(SIGTERM); }
  PrivateServer(const PrivateServer&) = delete;
  PrivateServer& operator=(const PrivateServer&) = delete;

  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] int pid() const { return std::atoi(read_file(dir_ + "/redis.pid").c_str()); }
  void kill(int sig) {
    const int p = pid();
    if (p > 0) ::kill(p, sig);
    if (sig == SIGKILL || sig == SIGTERM) {
      for (int i = 0; i < 200 && p > 0 && alive(p); ++i) usleep(10000);
      std::remove((dir_ + "/redis.pid").c_str());
    }
  }
  /// Starts the server again on the same port (after kill).
  bool restart() {
    const std::string cmd = "redis-server --port " + std::to_string(port_) +
                            " --bind 127.0.0.1 --dir " + dir_ + " --daemonize yes --pidfile " +
                            dir_ + "/redis.pid --logfile " + dir_ +
                            "/redis.log --save '' --appendonly no";
    if (std::system(cmd.c_str()) != 0) return false;
    for (int i = 0; i < 200; ++i) {
      Raw r(port_);
      if (r.cmd({"PING"}) == "PONG") return true;
      usleep(10000);
    }
    return false;
  }

 private:
  // A daemonized server is reparented to pid 1, which may not reap it here: a zombie is dead.
  static bool alive(int pid) {
    if (::kill(pid, 0) != 0) return false;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const std::size_t close = line.rfind(')');
    return close == std::string::npos || close + 2 >= line.size() || line[close + 2] != 'Z';
  }
  int port_ = 0;
  std::string dir_;
};

/// A policy for each script (two with two limits), for tests that go through every script.
inline std::vector<Policy> one_policy_per_script() {
  return {Policy::make("s-fixed", Strategy::kFixedWindow, "10/minute; 100/hour").value(),
          Policy::make("s-first", Strategy::kFixedWindow, "10/minute",
                       PolicyOptions{.anchor = Anchor::kFirstHit}).value(),
          Policy::make("s-moving", Strategy::kMovingWindow, "10/minute; 100/hour").value(),
          Policy::make("s-sliding", Strategy::kSlidingWindowCounter, "10/minute").value(),
          Policy::make("s-bucket", Strategy::kTokenBucket, "10/minute; 100/hour").value()};
}

struct RunResult {
  int calls = 0;
  int errors = 0;
};

/// Three threads decide on every script for 1.2 s while another sends `flush` (SCRIPT FLUSH,
/// FUNCTION FLUSH) to the single server every 100 ms.
inline RunResult decide_while_flushing(RedisStorage& redis, const std::vector<std::string>& flush) {
  const auto policies = one_policy_per_script();
  std::atomic<bool> stop{false};
  std::thread flusher([&] {
    Raw raw(single_port());
    while (!stop.load()) {
      raw.cmd(flush);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::atomic<int> errors{0}, calls{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < 3; ++t) {
    workers.emplace_back([&, t] {
      const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(1200);
      for (int i = 0; std::chrono::steady_clock::now() < end; ++i) {
        const auto d = redis.apply(policies[static_cast<std::size_t>(i) % policies.size()],
                                   "k" + std::to_string(t * 1000 + i % 50), 1, Effect::kHit, 0);
        calls.fetch_add(1);
        if (!d.ok()) errors.fetch_add(1);
      }
    });
  }
  for (auto& w : workers) w.join();
  stop.store(true);
  flusher.join();
  return {calls.load(), errors.load()};
}

}  // namespace floodgate::redis::testing
