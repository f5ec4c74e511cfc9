// One Redis server as the storage sees it: a fixed pool of blocking hiredis connections, a
// reconnect backoff with jitter and a circuit breaker.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <initializer_list>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/redis/protocol.hpp"

struct redisContext;
struct redisReply;
typedef struct ssl_st SSL;

namespace floodgate::redis {

using SteadyTime = std::chrono::steady_clock::time_point;

/// The breaker and backoff of one server, as pure logic on an explicit time (unit-tested).
/// After `failures` consecutive failures it opens for `cooldown`: calls fail at once. When the
/// cool-down is over, calls go through again; the first success closes it, another failure opens
/// it again. Connection attempts after a failed one wait a backoff that doubles from `min` to
/// `max`, with ±25% jitter, so that many clients do not reconnect in step.
/// Not thread-safe: Node guards it.
class Breaker {
 public:
  Breaker(int failures, std::chrono::milliseconds cooldown, std::chrono::milliseconds backoff_min,
          std::chrono::milliseconds backoff_max, std::uint64_t seed = 1);
  /// Whether a call may go to the server now.
  [[nodiscard]] bool allows_call(SteadyTime now) const noexcept { return now >= open_until_; }
  /// Whether a new connection may be attempted now.
  [[nodiscard]] bool allows_connect(SteadyTime now) const noexcept {
    return allows_call(now) && now >= next_connect_;
  }
  void on_success() noexcept;
  void on_failure(SteadyTime now) noexcept;
  void on_connect_failure(SteadyTime now) noexcept;
  void on_connect_success() noexcept;
  [[nodiscard]] bool open(SteadyTime now) const noexcept { return now < open_until_; }
  [[nodiscard]] bool backing_off(SteadyTime now) const noexcept { return now < next_connect_; }

 private:
  int threshold_;
  std::chrono::milliseconds cooldown_;
  std::chrono::milliseconds backoff_min_;
  std::chrono::milliseconds backoff_max_;
  std::chrono::milliseconds backoff_{0};
  int consecutive_ = 0;
  SteadyTime open_until_{};
  SteadyTime next_connect_{};
  std::minstd_rand rng_;
};

/// One connection: a hiredis context, and its TLS session (null for a plain connection).
struct Conn {
  redisContext* ctx = nullptr;
  SSL* ssl = nullptr;
};

/// A connection borrowed from a Node; returns itself on destruction (healthy unless `broken()`).
/// Its I/O goes through `append`/`flush`/`reply` (tls.hpp), the same for plain and TLS.
class Node;
class PooledConnection {
 public:
  PooledConnection() = default;
  PooledConnection(Node* node, Conn conn) : node_(node), conn_(conn) {}
  PooledConnection(PooledConnection&& o) noexcept
      : node_(o.node_), conn_(o.conn_), broken_(o.broken_), out_(std::move(o.out_)) {
    o.node_ = nullptr;
    o.conn_ = {};
  }
  PooledConnection& operator=(PooledConnection&&) = delete;
  ~PooledConnection();
  [[nodiscard]] redisContext* get() const noexcept { return conn_.ctx; }
  /// The connection failed (I/O error, timeout): it is closed instead of going back.
  void set_broken() noexcept { broken_ = true; }
  /// Queues a command (written by `flush`).
  void append(int argc, const char** argv, const std::size_t* lens);
  /// REDIS_OK or REDIS_ERR (get()->errstr says why; errno kept).
  int flush();
  /// The next reply: REDIS_OK or REDIS_ERR, as redisGetReply.
  int reply(void** out);
  /// One command and its reply; null on an I/O error (get()->errstr says why).
  redisReply* command(std::initializer_list<std::string_view> args);

 private:
  Node* node_ = nullptr;
  Conn conn_;
  bool broken_ = false;
  std::string out_;  // commands formatted (append_resp), not yet written
};

/// Thread-safe.
class Node {
 public:
  Node(Endpoint endpoint, const RedisOptions& options);
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  /// Borrows a connection, connecting one if the pool is not full; waits up to the command
  /// timeout for a free one. Errors: Unavailable (breaker open, connection refused, backoff),
  /// DeadlineExceeded (no free connection in time).
  absl::StatusOr<PooledConnection> acquire();
  /// Reports the outcome of a call for the breaker.
  void record(bool ok);

  [[nodiscard]] const Endpoint& endpoint() const noexcept { return endpoint_; }
  struct State {
    bool breaker_open;
    bool reconnecting;  // no connection, and a new one waits for the backoff
    std::size_t connections;
  };
  [[nodiscard]] State state();

 private:
  friend class PooledConnection;
  void release(Conn conn, bool broken);
  absl::StatusOr<Conn> connect();
  absl::Status handshake_commands(Conn conn);

  const Endpoint endpoint_;
  const RedisOptions& options_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Conn> idle_;           // guarded by mu_
  std::size_t open_ = 0;             // connections in existence (idle or lent); guarded by mu_
  Breaker breaker_;                  // guarded by mu_
};

}  // namespace floodgate::redis
