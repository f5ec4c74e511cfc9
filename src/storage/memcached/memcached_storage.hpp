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

#include <libmemcached/memcached.h>
#include <libmemcachedutil-1.0/pool.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <ctime>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "floodgate/storage.hpp"
#include "storage/memcached/protocol.hpp"
#include "storage/redis/node.hpp"  // redis::Breaker: the same breaker and backoff

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

  class Connection;  // a client handle borrowed from the pool (cas_update.hpp)
  struct Got;   // a value as read, with its CAS
  struct Record;  // a reservation's record as read (reservations.cpp)

 private:
  // settle, or (`renewal`) renew; `strict`: a lease not outstanding answers NotFound (an explicit
  // settle or a renewal), else the state as it is (Envoy's second call sent again).
  absl::StatusOr<Decision> settle_record(const Policy& policy, std::string_view key, std::string_view id,
                                         std::int64_t actual, Micros now, bool strict, bool renewal);
  // memcached's expiration of a reservation record that expires at `expires` on the decision's
  // clock, written at `now`: long enough (ttl_slack and a second more) never to go before it.
  [[nodiscard]] time_t record_expiration(Micros expires, Micros now) const;
  // Writes a record `v` with add (no `cas`) or cas: true when stored, false when another client
  // changed the item first (read it again), an error when the server failed.
  absl::StatusOr<bool> write_record(memcached_st* m, std::uint32_t server, const std::string& rk, const std::string& v,
                                    time_t exp, std::optional<std::uint64_t> cas);
  // The record of `rk` as read, if any; an error for a value that is not a reservation record.
  absl::StatusOr<std::optional<Record>> read_record(memcached_st* m, std::uint32_t server, const std::string& rk,
                                                    std::uint64_t* cas);
  // A new reservation's record claimed ("P …", with add, or with cas over an expired one): false,
  // or true when the id has a live record (known).
  absl::StatusOr<bool> claim_record(memcached_st* m, std::uint32_t server, const std::string& rk,
                                    const std::string& pending, time_t exp, Micros now);
  // The reservation's estimate charged on key `k`, then its record written with the marks.
  absl::StatusOr<Decision> charge_reserved(memcached_st* m, const Policy& policy, const std::string& k,
                                           const std::string& rk, std::int64_t cost, Micros now, Micros expires,
                                           time_t exp);
  // settle_all on key `k`'s state: `delta` at `at` (a record's marks, or none); the answer says
  // `outcome` of the id.
  absl::StatusOr<Decision> settle_state(memcached_st* m, const Policy& policy, const std::string& k, Micros now,
                                        Micros at, std::int64_t delta, std::span<const Micros> marks,
                                        SettleOutcome outcome);
  // A lease's renewal of its live record `r` (read with `cas`): none when another client changed
  // the record first.
  std::optional<absl::StatusOr<Decision>> renew_record(memcached_st* m, std::uint32_t server, const Policy& policy,
                                                       const std::string& k, const std::string& rk, const Record& r,
                                                       std::uint64_t cas, Micros now);
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

// ---- what the storage's sources (memcached_storage.cpp, reservations.cpp) share: the client
// borrowed from the pool, a value as read, and a key's state read, changed and written back with
// compare-and-swap (update).
/// libmemcached's name of `rc` in lower case, with the system's reason for a connection failure.
std::string error_text(const memcached_st* m, memcached_return_t rc);

/// The wall clock in Unix seconds (memcached's expirations past 30 days are absolute times).
std::int64_t wall_seconds();

class MemcachedStorage::Connection {
 public:
  Connection(memcached_pool_st* pool, memcached_st* m) : pool_(pool), m_(m) {}
  Connection(Connection&& o) noexcept : pool_(o.pool_), m_(o.m_) { o.m_ = nullptr; }
  Connection& operator=(Connection&&) = delete;
  ~Connection() {
    if (m_ != nullptr) memcached_pool_release(pool_, m_);
  }
  [[nodiscard]] memcached_st* get() const noexcept { return m_; }

 private:
  memcached_pool_st* pool_;
  memcached_st* m_;
};

struct MemcachedStorage::Got {
  bool found = false;
  std::string value;
  std::uint64_t cas = 0;
  std::uint32_t flags = 0;
};

template <class A, class F>
absl::StatusOr<Decision> MemcachedStorage::update(memcached_st* m, const Policy& policy, const std::string& key,
                                                  Micros now, Got* prefetched, F&& f) {
  using S = typename A::State;
  const std::vector<Limit>& limits = policy.limits();
  const std::size_t k = limits.size();
  const std::uint32_t server = server_of(m, key);
  std::string value;
  for (int attempt = 0; attempt < options_.cas_retries; ++attempt) {
    if (auto s = admit(server); !s.ok()) return s;
    Got got;
    if (prefetched != nullptr && attempt == 0) {
      got = std::move(*prefetched);
    } else {
      auto read = get(m, server, key);
      if (!read.ok()) return read.status();
      got = *std::move(read);
    }
    std::array<S, kMaxLimitsPerPolicy> st;  // value-initialised: absent
    if (got.found && (got.flags != kValueFlags || !memcached::decode(got.value, st.data(), k))) {
      return absl::InternalError(fmt::format(
          "memcached {}: the value of {} is not a floodgate state of policy \"{}\"",
          options_.servers[server].name(), key, policy.name()));
    }
    const auto [d, write] = f(st.data());
    if (!write) return d;  // nothing to write
    Micros absent_from = 0;
    for (std::size_t i = 0; i < k; ++i) {
      absent_from = std::max(absent_from, A::expires_at(st[i], limits[i]));
    }
    const auto exp = static_cast<time_t>(
        expiration(time_to_live(absent_from, now, options_.ttl_slack), wall_seconds()));
    memcached::encode(st.data(), k, value);
    const memcached_return_t rc =
        got.found ? memcached_cas(m, key.data(), key.size(), value.data(), value.size(), exp,
                                  kValueFlags, got.cas)
                  : memcached_add(m, key.data(), key.size(), value.data(), value.size(), exp,
                                  kValueFlags);
    if (auto s = record(m, server, rc); !s.ok()) return s;
    if (rc == MEMCACHED_SUCCESS) return d;
    if (rc != MEMCACHED_DATA_EXISTS && rc != MEMCACHED_NOTSTORED && rc != MEMCACHED_NOTFOUND) {
      return absl::InternalError(fmt::format("memcached {}: {}: {}",
                                             options_.servers[server].name(),
                                             got.found ? "cas" : "add",
                                             error_text(m, rc)));
    }
    conflicts_.fetch_add(1, std::memory_order_relaxed);  // another client wrote: again
  }
  return absl::AbortedError(fmt::format(
      "memcached {}: {} lost the compare-and-swap {} times in a row (cas_retries)",
      options_.servers[server].name(), key, options_.cas_retries));
}

}  // namespace floodgate::memcached
