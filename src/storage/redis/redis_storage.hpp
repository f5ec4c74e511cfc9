// The Redis and Redis Cluster storage: every decision is one Lua script call over all the limits
// of a key (scripts/*.lua mirror src/algorithms/*.cpp line for line).
//
// Opened through open_storage("redis://…" | "redis+unix://…" | "redis-cluster://…" |
// "redis+sentinel://…", and the rediss forms with TLS); the options are RedisOptions (protocol.hpp).
// With Sentinel the storage is the single-server storage whose server is the master the sentinels
// name (asked in turn, checked with ROLE), asked again after an error, a READONLY reply and every
// `sentinel_check_ms` (sentinel.cpp); a replica is never written to (READONLY fails the call). Keys: prefix{user key}:<policy hash>:<limit index>, each with a
// TTL after which its state equals "absent". Scripts run as FCALL of one Redis function library
// (loaded again after "Function not found"), or with EVALSHA where the server or its ACL refuses
// functions (`scripts=eval` from the start); with EVALSHA a NOSCRIPT (a restart, a failover,
// SCRIPT FLUSH, a cluster node that has not seen the script) is answered by EVAL of the same text,
// transparently. Requires Redis 7.0 or later either way (the scripts declare `#!lua`, so that a
// server out of memory refuses the whole script instead of applying part of it).
//
// Errors (never an "allowed"): InvalidArgument for a policy the scripts cannot run exactly
// (check_policy); Unavailable when a server cannot be reached or its breaker is open;
// DeadlineExceeded after the command timeout; Internal for an error reply (wrong type, OOM,
// CROSSSLOT, a corrupt value). The Limiter turns all but InvalidArgument into its fail mode.
//
// Thread-safety: every method may be called concurrently.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <thread>
#include <map>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "floodgate/storage.hpp"
#include "storage/redis/node.hpp"
#include "storage/redis/protocol.hpp"

namespace floodgate::redis {

struct Call;  // one command on its way (call.hpp)

class RedisStorage final : public Storage {
 public:
  /// Builds the storage; connects lazily (see open).
  explicit RedisStorage(RedisOptions options);
  ~RedisStorage() override;

  /// Builds the storage and, with kFailFast, checks that the server answers (`probe`).
  /// Errors: Unavailable.
  static absl::StatusOr<std::shared_ptr<RedisStorage>> open(RedisOptions options,
                                                            StorageStart start = StorageStart::kFailFast);

  /// PING on the server (a cluster: CLUSTER SLOTS, the slot map read again; Sentinel: the master
  /// asked of the sentinels and checked with ROLE).
  absl::Status probe() override;

  absl::StatusOr<Decision> apply(const Policy& policy, std::string_view key, std::int64_t cost,
                                 Effect effect, Micros now) override;
  absl::Status clear(const Policy& policy, std::string_view key) override;
  /// Reservations: one script call each, atomic with the key's state (the record is a key of
  /// the same hash tag: one cluster slot), expiring with its time to live.
  absl::StatusOr<Decision> reserve(const Policy& policy, std::string_view key, std::int64_t cost, std::string_view id,
                                   Micros ttl, Effect effect, Micros now) override;
  absl::StatusOr<Decision> settle(const Policy& policy, std::string_view key, std::string_view id, std::int64_t actual,
                                  Micros now) override;
  absl::StatusOr<bool> known(const Policy& policy, std::string_view key, std::string_view id, Micros now) override;
  absl::StatusOr<Decision> renew(const Policy& policy, std::string_view key, std::string_view id, Micros now) override;
  /// Pipelined: the calls for each server are written together and their replies read together,
  /// one round trip per server (plus one for any NOSCRIPT, MOVED or ASK).
  void apply_batch(std::span<const BatchItem> items, Micros now,
                   std::span<absl::StatusOr<Decision>> out) override;
  /// One call of the group script: atomic across processes. In a cluster whose keys for the items
  /// fall in different slots (different users' keys), or with a key used twice, it falls back to
  /// Storage::apply_group's two calls.
  bool apply_group(std::span<const BatchItem> items, Micros now,
                   std::span<absl::StatusOr<Decision>> out) override;

  /// One call of scripts/quota_share.lua on the bucket's hash, prefix{key}:quota (one slot).
  absl::StatusOr<QuotaShare> share_quota(std::string_view key, std::string_view member, const QuotaClaim& claim,
                                         Micros now) override;

  /// Every server known (the cluster's masters once the slot map is read), with its breaker.
  [[nodiscard]] std::vector<ServerState> servers() const override;
  /// Networked; groups atomic on a single Redis (in a cluster a group whose keys span slots
  /// falls back to two calls, so Limiter adds its per-key locks there; so does a group with
  /// envoyproxy-layout keys, which are tested then charged key by key).
  [[nodiscard]] StorageTraits traits() const override {
    return {.networked = true, .atomic_groups = !options_.cluster && !options_.envoyproxy_keys,
            .envoyproxy_keys = options_.envoyproxy_keys, .shared = true};
  }

  /// Reads the cluster's slot map now (also done on MOVED, at most every 100 ms); with Sentinel,
  /// asks the sentinels for the master now (the storage's thread also does after an error, at
  /// most every 100 ms).
  absl::Status refresh_topology();
  /// Sentinel: the master's address now (nullopt before one is found).
  [[nodiscard]] std::optional<Endpoint> master() const;

  [[nodiscard]] const RedisOptions& options() const noexcept { return options_; }
  /// Times a script was sent again with EVAL after NOSCRIPT, and redirects followed.
  [[nodiscard]] std::uint64_t noscript_retries() const noexcept { return noscript_.load(); }
  /// Times the function library was loaded into a server (after "Function not found").
  [[nodiscard]] std::uint64_t library_loads() const noexcept { return library_loads_.load(); }
  /// Whether scripts go as FCALL of the function library (false: EVALSHA; see `scripts=`).
  [[nodiscard]] bool uses_functions() const noexcept { return functions_.load(); }
  [[nodiscard]] std::uint64_t redirects() const noexcept { return redirects_.load(); }

 private:
  Node* node_for_slot(int slot);  // null: Sentinel, no master found yet
  Node& node_named(const Endpoint& e);
  struct Flight;  // one server's share of an attempt (redis_storage.cpp)
  void run(std::span<Call> calls);
  std::map<Node*, std::vector<Call*>> by_node(std::span<Call> calls);
  std::optional<Flight> send(Node& node, std::vector<Call*> calls);
  bool receive(Flight& flight);
  bool follow(Call& c, const NextStep& step, const redisReply* reply);
  void library_loaded(Call& c, void* reply);
  void remap_slot(int slot, const Node& target);
  absl::Status refresh_topology_locked_out(bool force);
  // sentinel.cpp
  [[nodiscard]] bool sentinel() const noexcept { return !options_.sentinel_master.empty(); }
  void start_sentinels();
  void stop_sentinels();
  absl::Status resolve_master(bool force);
  // One sentinel's view: the master's address and the configuration epoch it belongs to (-1: the
  // sentinel did not say; such an answer comes after any with an epoch).
  struct SentinelAnswer {
    Endpoint master;
    std::int64_t epoch = -1;
  };
  absl::StatusOr<SentinelAnswer> ask_sentinel(Node& sentinel);
  absl::Status adopt_master(const std::vector<SentinelAnswer>& answers, bool force);
  absl::Status check_master(Node& node);
  absl::Status no_master() const;
  void watch_sentinels();
  void wake_watcher();  // an error: the watcher asks now (at most every 100 ms)

  const RedisOptions options_;
  mutable std::shared_mutex mu_;                           // guards nodes_, by_name_, slots_
  std::vector<std::unique_ptr<Node>> nodes_;               // grow only
  absl::flat_hash_map<std::string, Node*> by_name_;
  std::vector<std::uint16_t> slots_;                       // cluster: slot → index in nodes_
  std::mutex refresh_mu_;
  std::atomic<std::int64_t> last_refresh_{0};              // steady clock, µs
  std::atomic<std::uint64_t> noscript_{0};
  std::atomic<std::uint64_t> library_loads_{0};
  std::atomic<bool> functions_{true};  // options_.functions until the library is refused
  std::atomic<std::uint64_t> redirects_{0};
  // Sentinel (sentinel.cpp): the sentinels, with their own credentials; the master now.
  const RedisOptions sentinel_options_;
  std::vector<std::unique_ptr<Node>> sentinels_;
  Node* master_ = nullptr;                                 // guarded by mu_
  std::string master_error_;                               // guarded by mu_: why none yet
  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  bool stop_ = false;                                      // guarded by watch_mu_
  bool wake_ = false;                                      // guarded by watch_mu_
  std::thread watcher_;                                    // asks every sentinel_check, and when woken
};

}  // namespace floodgate::redis
