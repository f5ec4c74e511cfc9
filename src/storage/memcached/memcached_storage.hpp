// The memcached storage: memcached only stores; the C++ algorithms decide (storage/decide.hpp).
//
// Opened through open_storage("memcached://host[:port][,host[:port]…][?options]"); the options
// are MemcachedOptions (protocol.hpp) and docs/memcached.md. The client is libmemcached (binary
// protocol, ketama consistent hashing over the servers, a fixed pool of client handles).
//
// One value per (policy, user key) holds the states of all the policy's limits (protocol.hpp has
// its layout and key). A decision reads it with `gets`, runs the algorithm, and writes the new
// states with `cas` (or `add` for an absent key); when another client wrote in between, it starts
// again, at most `cas_retries` times. A denied request, a test and a zero cost write nothing.
// Every value expires when its states all equal "absent" (plus a slack).
//
// Time: the caller's `now` (memcached has no clock a client can read), so every client's clock
// must be synchronised (NTP); expiry uses the machine's wall clock only to place expirations
// beyond memcached's 30-day relative limit.
//
// Errors (never an "allowed"): InvalidArgument for a policy whose state could exceed the item
// size limit; Unavailable when a server cannot be reached or its breaker is open;
// DeadlineExceeded after the timeout; Aborted when the compare-and-swap lost `cas_retries` times;
// Internal for a value floodgate cannot read or a server error.
//
// Thread-safety: every method may be called concurrently.
#pragma once

#include <atomic>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "floodgate/storage.hpp"
#include "storage/memcached/protocol.hpp"
#include "storage/redis/node.hpp"  // redis::Breaker: the same breaker and backoff

struct memcached_st;
struct memcached_pool_st;

namespace floodgate::memcached {

class MemcachedStorage final : public Storage {
 public:
  /// Builds the storage; connects lazily (see open).
  explicit MemcachedStorage(MemcachedOptions options);
  ~MemcachedStorage() override;
  MemcachedStorage(const MemcachedStorage&) = delete;
  MemcachedStorage& operator=(const MemcachedStorage&) = delete;

  /// Builds the storage. With kFailFast, checks that every server answers (Unavailable naming the
  /// servers otherwise); with kBackground, an unreachable server is no error: calls fail (and each
  /// policy's fail mode decides) until it answers, retried with the breaker's backoff.
  static absl::StatusOr<std::shared_ptr<MemcachedStorage>> open(MemcachedOptions options,
                                                                StorageStart start = StorageStart::kFailFast);

  /// Asks every server for its statistics: Unavailable naming them when one does not answer.
  absl::Status probe() override;

  absl::StatusOr<Decision> apply(const Policy& policy, std::string_view key, std::int64_t cost,
                                 Effect effect, Micros now) override;
  absl::Status clear(const Policy& policy, std::string_view key) override;
  /// Reads every item's value with one multi-get (one round trip per server), then decides the
  /// items in order; each admitted hit is one `cas`/`add`. An item whose key an earlier item of
  /// the batch wrote, or whose write lost a race, reads again.
  void apply_batch(std::span<const BatchItem> items, Micros now,
                   std::span<absl::StatusOr<Decision>> out) override;

  [[nodiscard]] std::vector<ServerState> servers() const override;
  /// Reservations: a record item beside the key's value (the same server only by chance: the
  /// two are claimed with add and cas, each atomic on its own). A client that dies between
  /// claiming the record and charging the estimate leaves a record without marks: its settle
  /// gives a bucket nothing back, and a window its estimate back (docs/memcached.md).
  absl::StatusOr<Decision> reserve(const Policy& policy, std::string_view key, std::int64_t cost, std::string_view id,
                                   Micros ttl, Effect effect, Micros now) override;
  absl::StatusOr<Decision> settle(const Policy& policy, std::string_view key, std::string_view id, std::int64_t actual,
                                  Micros now) override;
  absl::StatusOr<bool> known(const Policy& policy, std::string_view key, std::string_view id, Micros now) override;
  /// A lease's renewal: its record claimed with cas (the new time and expiry), then the key's
  /// value updated (its units moved to now) with cas; each atomic on its own, as a settle.
  absl::StatusOr<Decision> renew(const Policy& policy, std::string_view key, std::string_view id, Micros now) override;

  /// Networked; groups are the default test-then-charge (Limiter adds its per-key locks).
  [[nodiscard]] StorageTraits traits() const override { return {.networked = true, .atomic_groups = false}; }

  [[nodiscard]] const MemcachedOptions& options() const noexcept { return options_; }
  /// Writes that lost a compare-and-swap (or an `add`) to another client and were retried.
  [[nodiscard]] std::uint64_t cas_conflicts() const noexcept { return conflicts_.load(); }

  class Connection;  // a client handle borrowed from the pool (memcached_storage.cpp)
  struct Got;   // a value as read, with its CAS

 private:
  // settle, or (`renewal`) renew; `strict`: a lease not outstanding answers NotFound (an explicit
  // settle or a renewal), else the state as it is (Envoy's second call sent again).
  absl::StatusOr<Decision> settle_record(const Policy& policy, std::string_view key, std::string_view id,
                                         std::int64_t actual, Micros now, bool strict, bool renewal);
  // memcached's expiration of a reservation record that expires at `expires` on the decision's
  // clock, written at `now`: long enough (ttl_slack and a second more) never to go before it.
  [[nodiscard]] time_t record_expiration(Micros expires, Micros now) const;
  struct Health {
    std::mutex mu;
    redis::Breaker breaker;
    bool disconnected = false;  // the last failure was a connection failure: back off
    Health(const MemcachedOptions& o, std::uint64_t seed)
        : breaker(o.breaker_failures, o.breaker_cooldown, o.backoff_min, o.backoff_max, seed) {}
  };

  absl::StatusOr<Connection> acquire();
  std::uint32_t server_of(memcached_st* m, const std::string& key) const;
  absl::Status admit(std::uint32_t server);
  absl::Status record(memcached_st* m, std::uint32_t server, int rc);
  absl::StatusOr<Got> get(memcached_st* m, std::uint32_t server, const std::string& key);
  template <class A, class F>
  absl::StatusOr<Decision> update(memcached_st* m, const Policy& policy, const std::string& key, Micros now,
                                  Got* prefetched, F&& f);
  template <class A>
  absl::StatusOr<Decision> decide(memcached_st* m, const Policy& policy, const std::string& key,
                                  std::int64_t cost, Effect effect, Micros now, Got* prefetched);

  const MemcachedOptions options_;
  memcached_st* master_ = nullptr;
  memcached_pool_st* pool_ = nullptr;
  std::vector<std::unique_ptr<Health>> health_;  // one per server, in options_.servers order
  std::atomic<std::uint64_t> conflicts_{0};
};

}  // namespace floodgate::memcached
