// Redis Sentinel: the storage's one server is the master that the sentinels name. Every sentinel
// is asked (SENTINEL get-master-addr-by-name, and SENTINEL MASTER for its config-epoch), and the
// answer of the highest configuration epoch is followed: during a failover the sentinels that have
// not heard of it yet still name the deposed master, which says it is a master until the sentinels
// reconfigure it, so "the first sentinel that answers" may keep the storage on it for seconds.
// The node chosen is checked with ROLE when it changes (and on every probe); when it is not a
// master, the next answer (by epoch, then the sentinels' order) is tried. A thread of the storage
// asks the sentinels when it starts, every `sentinel_check_ms`, and soon after a failed call
// (connection error, timeout, READONLY: run.cpp wakes it; at most every 100 ms), so a failover
// that breaks no connection (SENTINEL FAILOVER leaves the old master writable until the sentinels
// turn it into a replica) is seen within that time. A decision never waits for the sentinels:
// their commands and the ROLE check take `sentinel_timeout_ms`, not a decision's `timeout_ms`, so
// that a machine under load, whose sentinels answer later than a decision may take, still learns
// of the new master (with the decisions' timeout, the one answer that named it was lost whenever
// it came late, and the storage stayed on the deposed master). While no sentinel names a master
// that says it is one, the storage keeps the master it had: sentinels that are all down do not
// stop a working master.
#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "storage/redis/call.hpp"
#include "storage/redis/redis_storage.hpp"

namespace floodgate::redis {

namespace {

using detail::io_error;
using detail::ReplyPtr;

constexpr std::int64_t kAskAtMostEveryMicros = 100'000;  // after errors; the thread is slower

timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<decltype(tv.tv_sec)>(ms.count() / 1000);
  tv.tv_usec = static_cast<decltype(tv.tv_usec)>((ms.count() % 1000) * 1000);
  return tv;
}

std::int64_t steady_micros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One command on a node's connection, with the node's breaker told of the outcome. With `timeout`,
// the command waits that long, and the connection gets `restore` back after it (a data connection
// asked on the sentinels' behalf).
absl::StatusOr<ReplyPtr> command(Node& node, std::initializer_list<std::string_view> args,
                                 std::optional<std::chrono::milliseconds> timeout = std::nullopt,
                                 std::chrono::milliseconds restore = {}) {
  auto conn = node.acquire();
  if (!conn.ok()) return conn.status();
  if (timeout && redisSetTimeout(conn->get(), to_timeval(*timeout)) != REDIS_OK) {
    conn->set_broken();
    return absl::UnavailableError(fmt::format("redis {}: cannot set the timeout", node.endpoint().name()));
  }
  ReplyPtr r(conn->command(args));
  if (r == nullptr) {
    const absl::Status s = io_error(node, conn->get(), errno);
    conn->set_broken();
    node.record(false);
    return s;
  }
  node.record(true);
  if (timeout && redisSetTimeout(conn->get(), to_timeval(restore)) != REDIS_OK) conn->set_broken();
  return r;
}

}  // namespace

void RedisStorage::start_sentinels() {
  for (const Endpoint& e : options_.seeds) sentinels_.push_back(std::make_unique<Node>(e, sentinel_options_));
  {
    std::unique_lock<std::shared_mutex> lock(mu_);
    master_error_ = "not asked yet";
  }
  watcher_ = std::thread([this] { watch_sentinels(); });
}

void RedisStorage::stop_sentinels() {
  if (!watcher_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    stop_ = true;
  }
  watch_cv_.notify_all();
  watcher_.join();
}

void RedisStorage::watch_sentinels() {
  using Clock = std::chrono::steady_clock;
  std::unique_lock<std::mutex> lock(watch_mu_);
  while (!stop_) {
    wake_ = false;
    lock.unlock();
    (void)resolve_master(false);
    lock.lock();
    const Clock::time_point due = Clock::now() + options_.sentinel_check;
    if (!watch_cv_.wait_until(lock, due, [this] { return stop_ || wake_; })) continue;
    // Woken by a failed call: again once 100 ms have passed since the last round.
    const Clock::time_point soonest{std::chrono::microseconds(last_refresh_.load() + kAskAtMostEveryMicros)};
    watch_cv_.wait_until(lock, std::min(due, soonest), [this] { return stop_; });
  }
}

void RedisStorage::wake_watcher() {
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    wake_ = true;
  }
  watch_cv_.notify_all();
}

std::optional<Endpoint> RedisStorage::master() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  if (master_ == nullptr) return std::nullopt;
  return master_->endpoint();
}

absl::Status RedisStorage::no_master() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return absl::UnavailableError(
      fmt::format("redis sentinel: no master \"{}\" found yet: {}", options_.sentinel_master, master_error_));
}

absl::StatusOr<RedisStorage::SentinelAnswer> RedisStorage::ask_sentinel(Node& sentinel) {
  auto r = command(sentinel, {"SENTINEL", "get-master-addr-by-name", options_.sentinel_master});
  if (!r.ok()) return r.status();
  auto addr = parse_master_addr(r->get(), options_.sentinel_master);
  if (!addr.ok()) {
    return absl::Status(addr.status().code(),
                        fmt::format("sentinel {}: {}", sentinel.endpoint().name(), std::string(addr.status().message())));
  }
  SentinelAnswer answer{*std::move(addr), -1};
  // Without an epoch (an old sentinel, a refused command) the address still counts, after others.
  if (auto m = command(sentinel, {"SENTINEL", "MASTER", options_.sentinel_master}); m.ok()) {
    if (auto epoch = parse_config_epoch(m->get()); epoch.ok()) answer.epoch = *epoch;
  }
  return answer;
}

absl::Status RedisStorage::check_master(Node& node) {
  // A data connection: the sentinels' timeout for this command, the decisions' after it.
  auto r = command(node, {"ROLE"}, options_.sentinel_timeout, options_.timeout);
  if (!r.ok()) return r.status();
  if (!role_is_master(r->get())) {
    return absl::UnavailableError(
        fmt::format("redis {}: named master by the sentinels, but ROLE says it is not", node.endpoint().name()));
  }
  return absl::OkStatus();
}

absl::Status RedisStorage::resolve_master(bool force) {
  std::unique_lock<std::mutex> refresh(refresh_mu_, std::try_to_lock);
  if (!refresh.owns_lock()) {
    if (!force) return absl::OkStatus();  // another thread is asking
    refresh.lock();
  }
  if (!force && steady_micros() - last_refresh_.load() < kAskAtMostEveryMicros) return absl::OkStatus();
  last_refresh_.store(steady_micros());
  absl::Status last = absl::UnavailableError("no sentinel");
  std::vector<SentinelAnswer> answers;
  for (const auto& sentinel : sentinels_) {
    auto answer = ask_sentinel(*sentinel);
    if (answer.ok()) {
      answers.push_back(*std::move(answer));
    } else {
      last = answer.status();
    }
  }
  // The latest configuration first; among equal epochs, the sentinels' order.
  std::stable_sort(answers.begin(), answers.end(),
                   [](const SentinelAnswer& a, const SentinelAnswer& b) { return a.epoch > b.epoch; });
  if (!answers.empty()) {
    const absl::Status s = adopt_master(answers, force);
    if (s.ok()) return s;
    last = s;
  }
  std::unique_lock<std::shared_mutex> lock(mu_);
  master_error_ = std::string(last.message());
  return absl::UnavailableError(fmt::format("redis sentinel: no master \"{}\" found: {}",
                                            options_.sentinel_master, master_error_));
}

// The first of `answers` (in order) whose node says it is a master becomes the master.
absl::Status RedisStorage::adopt_master(const std::vector<SentinelAnswer>& answers, bool force) {
  absl::Status last;
  std::vector<std::string> tried;
  for (const SentinelAnswer& answer : answers) {
    std::string name = answer.master.name();
    if (std::find(tried.begin(), tried.end(), name) != tried.end()) continue;
    tried.push_back(std::move(name));
    Node& node = node_named(answer.master);
    bool same = false;
    {
      std::shared_lock<std::shared_mutex> lock(mu_);
      same = master_ == &node;
    }
    // ROLE when the sentinels name another node, and on a probe (is the master up?).
    if (auto s = same && !force ? absl::OkStatus() : check_master(node); !s.ok()) {
      last = s;
      continue;
    }
    std::unique_lock<std::shared_mutex> lock(mu_);
    master_ = &node;
    return absl::OkStatus();
  }
  return last;
}

}  // namespace floodgate::redis
