// floodgate/storage.hpp — the narrow interface every storage implements.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "floodgate/clock.hpp"
#include "floodgate/decision.hpp"
#include "floodgate/policy.hpp"

namespace floodgate {

/// What `Storage::apply` does with the state.
enum class Effect : std::uint8_t {
  kHit,   ///< consume `cost` if every limit allows it (all or nothing)
  kTest,  ///< only evaluate: the state is not changed
  /// A hit that is also remembered under a reservation id for a time to live (Storage::reserve):
  /// a later kSettle of the id charges the actual usage instead of `cost`.
  kReserve,
  /// Settles a reservation with `cost` as the actual usage (Storage::settle): always applied.
  kSettle,
  /// kSettle if the id is known to the storage (reserved, or settled within its time to live),
  /// else kReserve: Envoy's two calls of one request, at its start and at its end, carry the same
  /// id and cannot say which they are.
  kReserveOrSettle,
  /// Renews a lease of a concurrency policy (Storage::renew): its time to live starts again now.
  kRenew,
};

/// Whether the effect names a reservation (BatchItem::reservation).
constexpr bool reserves(Effect e) noexcept {
  return e == Effect::kReserve || e == Effect::kSettle || e == Effect::kReserveOrSettle || e == Effect::kRenew;
}

/// Bounds of a reservation's time to live and id, checked by Limiter (and the service, which
/// names the field): 1 ms to 24 hours; ids of 1 to 256 bytes.
inline constexpr Micros kMinReservationTtl = 1000;
inline constexpr Micros kMaxReservationTtl = Micros{24} * 3600 * 1000000;
inline constexpr Micros kDefaultReservationTtl = Micros{10} * 60 * 1000000;
inline constexpr std::size_t kMaxReservationId = 256;

/// What a storage can do, for the layers above it (they never test its concrete type).
struct StorageTraits {
  /// Answers over a network: worth coalescing concurrent requests into one apply_batch (a round
  /// trip); the in-memory store answers in nanoseconds and is called directly.
  bool networked = false;
  /// apply_group is atomic by itself, also against other processes. When false, Limiter holds
  /// per-key locks of this process around a group call.
  bool atomic_groups = false;
  /// The rules of the gRPC service that qualify (envoyproxy_window, storage/envoyproxy_layout.hpp)
  /// are kept in envoyproxy/ratelimit's keys: the service then passes their keys in that form
  /// (Redis with `key_layout=envoyproxy`, docs/envoy.md "Rolling migration").
  bool envoyproxy_keys = false;
  /// Its state is seen by every process that opens it (Redis), not this process's alone: the
  /// Rate Limit Quota Service then shares each bucket's rate with the other instances on it.
  bool shared = false;
};

/// One counter (or gauge) of a storage's own, for /metrics (e.g. the memory store's evictions).
struct StorageCounter {
  std::string name;  ///< a Prometheus metric name, "floodgate_memory_evictions_total"
  std::string help;
  std::uint64_t value = 0;
  bool gauge = false;  ///< a level that goes up and down ("floodgate_memory_log_bytes"), not a count
};

/// A member's part of a quota shared by several processes (Storage::share_quota): the Rate Limit
/// Quota Service's instances on one store, each a member, share each bucket's rate.
struct QuotaClaim {
  /// The wants of the member's clients, tokens per fill each (kNoHistory: a client without
  /// history yet). At most kMaxQuotaWants entries, each kNoHistory or 0 to `total`.
  std::vector<std::int64_t> wants;
  std::uint64_t requested = 0;  ///< the grant the member asks for, tokens per fill (≤ total)
  std::uint64_t total = 0;      ///< the bucket's tokens per fill, 1 to 2^32 − 1
  Micros expiry = 0;            ///< when the member's record ends, on the caller's clock (> now)
};

/// What share_quota answers.
struct QuotaShare {
  std::uint64_t granted = 0;          ///< the member's grant now recorded (≤ requested)
  std::vector<std::int64_t> others;  ///< every other live member's wants, one list
};

inline constexpr std::int64_t kNoHistory = -1;
inline constexpr std::size_t kMaxQuotaWants = 4096;
inline constexpr std::size_t kMaxQuotaMember = 128;  ///< a member's name: 1 to 128 bytes, no ':' or ','

/// The shared quota's step, which every storage applies atomically to the members of one key:
/// drops the members whose expiry is ≤ `now`, grants min(requested, max(0, total − the other live
/// members' grants)), records the member {wants, granted, expiry} and answers the grant with the
/// others' wants. The grants of live members thus never sum past `total`.
struct QuotaMember {
  std::vector<std::int64_t> wants;
  std::uint64_t granted = 0;
  Micros expiry = 0;
};
QuotaShare share_quota_step(std::vector<std::pair<std::string, QuotaMember>>& members, std::string_view member,
                            const QuotaClaim& claim, Micros now);
/// InvalidArgument naming the field when the claim or member is out of its bounds above.
absl::Status check_quota_claim(std::string_view member, const QuotaClaim& claim, Micros now);

/// A storage applies a policy's algorithm atomically to the state of one key: all the limits of
/// the key at once. It decides nothing itself; the algorithms in algorithms.hpp do.
///
/// Thread-safety: every method may be called concurrently from any thread.
class Storage {
 public:
  virtual ~Storage() = default;

  /// Evaluates a request of `cost` units for `key` under `policy` at time `now` (µs since the
  /// epoch) and, for Effect::kHit, commits it to every limit if all of them allow it.
  /// For Effect::kTest, `remaining` and `reset_after` describe the current state (nothing is
  /// consumed) while `allowed` and `retry_after` say what a hit would get.
  ///
  /// Preconditions (checked by Limiter): 0 ≤ cost ≤ kMaxAmount, now ≥ 0.
  /// Errors: Unavailable / DeadlineExceeded / Internal from a storage that failed; the caller
  /// applies the policy's failure mode. An error is never an "allowed". A storage may also refuse
  /// the request itself, committing nothing: InvalidArgument (a key it cannot hold),
  /// ResourceExhausted (a memory bound the hit would pass: MemoryStorageOptions); those reach the
  /// caller as they are (Limiter, refused_request).
  virtual absl::StatusOr<Decision> apply(const Policy& policy, std::string_view key,
                                         std::int64_t cost, Effect effect, Micros now) = 0;

  /// Forgets all state of `key` under `policy`. Clearing an absent key is not an error.
  virtual absl::Status clear(const Policy& policy, std::string_view key) = 0;

  /// Frees what the storage holds for `policy`'s state id (Policy::state_id) in this process:
  /// called when a reload leaves no policy with that state id (a policy removed, or its strategy
  /// or periods changed; a change of amounts keeps the state id and the usage). The memory store
  /// frees the table; networked storages hold nothing here (their keys expire by TTL).
  /// Default: nothing.
  virtual void forget(const Policy& policy) { (void)policy; }

  /// One request of a batch.
  struct BatchItem {
    const Policy* policy;
    std::string_view key;
    std::int64_t cost;
    Effect effect;
    /// For apply_group only: a denial of this item does not stop the others (a shadow rule).
    bool optional = false;
    /// kReserve, kSettle, kReserveOrSettle, kRenew: the reservation's (or lease's) id (1 to
    /// kMaxReservationId bytes) and, for a reservation, its time to live (kMinReservationTtl to
    /// kMaxReservationTtl; a lease lives for its limit's period instead).
    std::string_view reservation = {};
    Micros ttl = kDefaultReservationTtl;
  };

  /// Reservations (docs/algorithms.md, "Reservations"). `reserve` is a hit of `cost` (the
  /// estimate) that, when admitted, is remembered under (policy state id, key, id) until `now +
  /// ttl`, with what each limit's settle needs (the time `now`, the estimate, the limits' marks);
  /// a denied reservation reserves nothing. Atomic with the hit, as a hit is. An id already known
  /// (outstanding, or settled within its time to live): AlreadyExists for Effect::kReserve, a
  /// settle of `cost` for Effect::kReserveOrSettle. Errors as `apply`; ResourceExhausted when the
  /// storage's bound on reservations is reached (the memory store's `max_reservations`).
  /// Default: Unimplemented (a storage that keeps no reservations).
  virtual absl::StatusOr<Decision> reserve(const Policy& policy, std::string_view key, std::int64_t cost,
                                           std::string_view id, Micros ttl, Effect effect, Micros now);
  /// Settles reservation `id` of `key` with the actual usage `actual` ≥ 0: every limit's settle
  /// with delta = actual − estimate at the reservation's time; the id is then remembered as
  /// settled until its time to live ends, so that a second settle changes nothing. An id the
  /// storage does not know (never reserved, or expired): `actual` is charged now (delta = actual
  /// at `now`), even past the limit. Always applied; the decision is the state after it, allowed,
  /// with `settle` saying what happened to the id (SettleOutcome), decided in the same atomic step.
  /// Default: Unimplemented.
  virtual absl::StatusOr<Decision> settle(const Policy& policy, std::string_view key, std::string_view id,
                                          std::int64_t actual, Micros now);

  /// Leases (a policy of Strategy::kConcurrency; docs/algorithms.md, "Concurrency"). A lease is a
  /// reservation of the policy's concurrency limit whose time to live is the limit's period (the
  /// BatchItem's ttl is not used): `reserve` takes it, `settle` releases it — whatever `actual`
  /// says, a lease's units are given back in full while it is outstanding, and nothing is charged
  /// for an id the storage does not know. A settle (Effect::kSettle) of a lease that is not
  /// outstanding (never taken, released, expired, or another key's): NotFound, nothing changed;
  /// Effect::kReserveOrSettle of a released lease: the state as it is (Envoy's second call sent
  /// again).
  ///
  /// `renew` gives an outstanding lease a new time to live from `now`, atomically (its units
  /// leave the log at their old time and enter it at `now`: never more outstanding than before).
  /// Errors: NotFound when the lease is not outstanding (nothing taken), InvalidArgument for a
  /// policy that is not a concurrency policy, else as `apply`. Default: Unimplemented.
  virtual absl::StatusOr<Decision> renew(const Policy& policy, std::string_view key, std::string_view id,
                                         Micros now);

  /// Applies many requests at `now`, in order, as if by `apply` one after another; `out` has one
  /// slot per item. A networked storage sends them in one round trip (the service coalesces
  /// concurrent requests through this); the default calls `apply` for each.
  /// Precondition: out.size() == items.size().
  virtual void apply_batch(std::span<const BatchItem> items, Micros now,
                           std::span<absl::StatusOr<Decision>> out) {
    for (std::size_t i = 0; i < items.size(); ++i) out[i] = apply_item(items[i], now);
  }

  /// One item by its effect: `apply`, `reserve`, `settle` or `renew`.
  absl::StatusOr<Decision> apply_item(const BatchItem& item, Micros now);

  /// Applies several requests as one, all or nothing: if no item that is not `optional` is
  /// denied, every allowed kHit (or kReserve) item is committed; otherwise none is. A kSettle
  /// item is always applied and never denies the group; a kReserveOrSettle item is first resolved
  /// to one or the other (Storage::known). Each `out[i]` is item i's
  /// decision; an item that was not committed reports its state as it is, with its own verdict
  /// (as for Effect::kTest). Returns whether the hits were committed (false on any error).
  /// Items that share a (policy, key) are tested each on its own, then charged one after another:
  /// if together they do not fit, the later one is refused after the earlier was charged, and the
  /// result is false (the caller denies; that one charge stays).
  ///
  /// Atomicity: this default tests every item, then hits them (two calls): a concurrent request
  /// on the same keys may come between. A storage whose override is atomic says so in
  /// traits().atomic_groups; for the others Limiter::decide_group holds per-key locks of this
  /// process across the call. RedisStorage overrides it with one script call, atomic across
  /// processes, where the keys share a server (a single Redis; in a cluster, one slot).
  /// Precondition: out.size() == items.size().
  virtual bool apply_group(std::span<const BatchItem> items, Micros now,
                           std::span<absl::StatusOr<Decision>> out);

  /// Whether reservation `id` of `key` is known (outstanding, or settled within its time to live):
  /// how apply_group resolves kReserveOrSettle. Default: Unimplemented.
  virtual absl::StatusOr<bool> known(const Policy& policy, std::string_view key, std::string_view id, Micros now);

  /// A quota shared by several processes, atomically on the members recorded under `key`
  /// (share_quota_step says what; check_quota_claim what is refused). `now` and the claim's
  /// expiry are on the caller's clock, never the store's. Errors as `apply`. Default:
  /// Unimplemented naming the storage.
  virtual absl::StatusOr<QuotaShare> share_quota(std::string_view key, std::string_view member,
                                                 const QuotaClaim& claim, Micros now);

  /// One server of a networked storage, as its client sees it now.
  struct ServerState {
    std::string name;           ///< host:port or the socket path
    bool breaker_open = false;  ///< calls to it fail at once until the breaker's cooldown ends
    bool reconnecting = false;  ///< no connection, and the next attempt waits for its backoff
    std::size_t connections = 0;  ///< open connections in its pool (idle or lent)
  };

  /// What this storage can do (see StorageTraits). Constant over the storage's life.
  [[nodiscard]] virtual StorageTraits traits() const { return {}; }

  /// Counters and gauges of the storage's own, for /metrics; none by default.
  [[nodiscard]] virtual std::vector<StorageCounter> counters() const { return {}; }

  /// The servers this storage talks to (for the service's live view and /metrics); none for a
  /// storage that has no servers, such as the in-memory store.
  [[nodiscard]] virtual std::vector<ServerState> servers() const { return {}; }

  /// Whether the storage's servers answer now: one round trip (Redis: PING; a cluster: its slot
  /// map read again). OK for a storage without servers. Errors: Unavailable naming the server.
  /// A failed probe counts like a failed call (the server's backoff and breaker).
  /// Thread-safe.
  virtual absl::Status probe() { return absl::OkStatus(); }

  /// Housekeeping that must not wait for traffic, at `now` (µs since the epoch): the in-memory
  /// store frees the tables idle past their state's lifetime (decisions do it too, but an idle
  /// service makes none). Nothing by default. The
  /// service calls it about once a second (StorageWatch). Thread-safe.
  virtual void maintain(Micros /*now*/) {}
};

/// What open_storage does when the server of a networked storage cannot be reached yet.
enum class StorageStart : std::uint8_t {
  /// Reach the server (Redis: PING; a cluster: read its slot map) or fail with Unavailable.
  kFailFast,
  /// Open anyway. Until a server answers, calls fail with Unavailable (so each policy's fail mode
  /// decides); each call and each `probe` tries to connect again, spaced by the storage's
  /// reconnect backoff. For storages that do not connect at open (memory, memcached) the same
  /// as kFailFast.
  kBackground,
};

/// Opens a storage by URL:
///   memory                      the in-memory store (also `memory://`); options as a query:
///                               `memory://?max_keys=100000&shards=64`
///   redis://[user:password@]host[:port][/db][?options], redis+unix:///path[?options],
///   redis-cluster://host:port[,host:port…][?options]
///   rediss://…, rediss-cluster://… the same over TLS (tls_ca_file, tls_cert_file, tls_key_file,
///                               tls_server_name, tls_insecure)
///                               Redis and Redis Cluster (docs/redis.md has the options); only when
///                               the library is built with the Redis storage.
/// Errors: InvalidArgument naming the bad URL or option; Unavailable if a server cannot be reached
/// (only with StorageStart::kFailFast).
absl::StatusOr<std::shared_ptr<Storage>> open_storage(std::string_view url,
                                                      StorageStart start = StorageStart::kFailFast);

}  // namespace floodgate
