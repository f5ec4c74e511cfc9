// floodgate/memory_storage.hpp — the embedded in-memory storage (the default).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "floodgate/storage.hpp"

namespace floodgate {

class Reservations;  // the memory store's reservations (src/storage/memory/reservations.hpp)
struct ReservationShard;
struct ReservationEntry;

/// Options of the in-memory storage.
struct MemoryStorageOptions {
  /// Upper bound on the keys kept per policy. When a policy reaches it, the entry closest to
  /// "absent" (full capacity) among a small sample is evicted to make room, and
  /// `MemoryStorage::evictions()` counts it. Default 1,048,576 keys: about 61 MiB per policy for
  /// the single-counter algorithms with keys of up to 24 characters (docs/benchmarks.md).
  std::size_t max_keys = std::size_t{1} << 20;
  /// Shards per policy, rounded up to a power of two: threads working on keys of different shards
  /// never contend. Default 64.
  std::size_t shards = 64;
  /// Upper bound on the tables of policies that requests create (PolicyKind::kInline and
  /// kRuleOverride: every distinct inline limit or limit override a client sends is a policy).
  /// A new one beyond it frees the request-made table used least recently (its keys start
  /// afresh if it comes back) and `policies_evicted()` counts it. Default 4,096: about 28 MiB
  /// with one key per table (docs/configuration.md).
  std::size_t max_request_policies = 4096;
  /// Upper bound on all tables (configured policies and rules included), least recently used
  /// freed first beyond it: a safety net, since configured policies are bounded by their
  /// configuration and a reload frees the ones it removes (`forget`). Default 65,536.
  std::size_t max_policies = 65536;
  /// Shards of the tables of policies that requests create (inline limits, limit overrides):
  /// many small tables, so fewer shards than `shards` (a table costs about 1 KiB per shard).
  /// Default 4.
  std::size_t request_policy_shards = 4;
  /// Upper bound on the bytes of all moving-window logs together (16 bytes an entry; a key's log
  /// holds up to min(amount, distinct instants in a period) entries, in a buffer that doubles).
  /// A hit that would grow a log past it is refused with ResourceExhausted: nothing is committed,
  /// no decision is made up, and `log_refusals()` counts it. Logs shrink as their entries age out,
  /// and give their bytes back when their key goes. Default 1 GiB.
  std::size_t max_log_bytes = std::size_t{1} << 30;
  /// Upper bound on the bytes of the moving-window logs of policies that requests create (inline
  /// limits, limit overrides: a client picks their amounts), within `max_log_bytes`, so that a
  /// client cannot take the room of the configured policies' logs. Default 256 MiB: a request-made
  /// table at `max_keys` (1 Mi keys) of small logs (a buffer of 4 entries, 64 bytes, each) holds
  /// 64 MiB of it.
  std::size_t max_request_log_bytes = std::size_t{256} << 20;
  /// Upper bound on the reservations remembered (Storage::reserve: each outstanding one, and each
  /// settled one until its time to live ends), over all policies: about 200 bytes each with ids
  /// and keys of up to 24 characters. A reservation beyond it is refused with ResourceExhausted,
  /// nothing charged, and `reservation_refusals()` counts it. Default 1,048,576.
  std::size_t max_reservations = std::size_t{1} << 20;
  /// Whether a settle of an unknown or expired id is remembered as settled for
  /// kDefaultReservationTtl, in the same table, so that the same settle sent again is charged
  /// once; with no room left it is refused (ResourceExhausted), nothing charged. false: charged
  /// each time and never remembered, for a caller that never sends a settle twice (the charge
  /// simulation's charged-after mode, which settles ids it never reserved). Not a URL option.
  bool remember_unknown_settles = true;
};

/// A sharded hash table per policy, created on the policy's first hit and freed when the policy
/// has not been used for longer than its state lives (every key is then "absent": nothing is lost)
/// or, at the `max_policies` bound, least recently used first. Idle tables are freed lazily, by a
/// decision that finds the last sweep more than a second old, or by `collect(now)`. Freed memory
/// goes back to the allocator; giving the allocator's free pages back to the system is the
/// application's call (`floodgate serve` does it from its housekeeping thread, never on a
/// decision's thread: server::Housekeeping).
///
/// Per key it keeps the key and one small state per limit in a
/// slab record; lookups by `std::string_view` do not allocate. Entries whose state has equalled
/// "absent" for a second are reclaimed incrementally (each insertion examines two records), never
/// by rescanning the whole table; at the `max_keys` bound absent entries go first, at once.
///
/// Thread-safety: all methods are thread-safe. A decision on a known key takes its shard's lock in
/// shared mode (a per-thread counter) and the key's own lock word, so decisions on different keys
/// run in parallel without sharing a written cache line; adding or removing a key takes the shard
/// exclusively. A thread deciding again on the key it decided on last (per policy) goes straight to
/// that key's record under the record's lock, which is also where keys are removed and records
/// reused. On one key, `apply` is linearizable.
class MemoryStorage final : public Storage {
 public:
  explicit MemoryStorage(MemoryStorageOptions options = {});
  ~MemoryStorage() override;
  MemoryStorage(const MemoryStorage&) = delete;
  MemoryStorage& operator=(const MemoryStorage&) = delete;

  absl::StatusOr<Decision> apply(const Policy& policy, std::string_view key, std::int64_t cost,
                                 Effect effect, Micros now) override;
  absl::Status clear(const Policy& policy, std::string_view key) override;

  /// Reservations, kept in a bounded table beside the states (`max_reservations`); a reserve and
  /// a settle of one key hold that table's shard across the key's state: atomic.
  absl::StatusOr<Decision> reserve(const Policy& policy, std::string_view key, std::int64_t cost, std::string_view id,
                                   Micros ttl, Effect effect, Micros now) override;
  absl::StatusOr<Decision> settle(const Policy& policy, std::string_view key, std::string_view id, std::int64_t actual,
                                  Micros now) override;
  absl::StatusOr<bool> known(const Policy& policy, std::string_view key, std::string_view id, Micros now) override;
  absl::StatusOr<Decision> renew(const Policy& policy, std::string_view key, std::string_view id, Micros now) override;
  /// The shared quota under one lock (share_quota_step): within this process only, as the whole
  /// store (traits().shared is false); a key whose members have all expired is freed.
  absl::StatusOr<QuotaShare> share_quota(std::string_view key, std::string_view member, const QuotaClaim& claim,
                                         Micros now) override;
  /// Reservations remembered now (outstanding, or settled and not yet expired).
  [[nodiscard]] std::size_t reservations() const noexcept;
  /// Reservations refused at the `max_reservations` bound.
  [[nodiscard]] std::uint64_t reservation_refusals() const noexcept;

  /// floodgate_memory_evictions_total and floodgate_memory_reclaimed_total.
  [[nodiscard]] std::vector<StorageCounter> counters() const override;

  /// Keys currently held for `policy` (including ones that are absent but not yet reclaimed).
  [[nodiscard]] std::size_t size(const Policy& policy) const;
  /// Tables held now (one per policy state id in use: a policy whose amounts changed keeps its
  /// table and state).
  [[nodiscard]] std::size_t policies() const;
  /// Slots of the directory of tables (its memory, about 40 bytes each): it grows with the tables
  /// held and shrinks back when most are freed.
  [[nodiscard]] std::size_t policy_slots() const;
  /// Tables freed at the `max_policies` bound while their state was still live.
  [[nodiscard]] std::uint64_t policies_evicted() const noexcept;
  /// Tables freed because they had been idle for longer than their state lives.
  [[nodiscard]] std::uint64_t policies_freed() const noexcept;
  /// Frees the table of `policy`'s state id now (a reload removed the policy, or changed its
  /// strategy or periods). A decision still in flight on it finds no table and starts a fresh
  /// one, which is freed when idle.
  void forget(const Policy& policy) override;
  /// Frees the tables idle at `now` (µs since the epoch) for longer than their state lives.
  /// Decisions on other tables go on; a table in use is never freed. Returns how many were freed.
  std::size_t collect(Micros now);
  /// collect(now), and expired reservations erased: an idle service frees idle tables too.
  void maintain(Micros now) override;

  /// Entries evicted because a policy reached `max_keys`, over all policies.
  [[nodiscard]] std::uint64_t evictions() const noexcept;
  /// Entries reclaimed because their state had become absent, over all policies.
  [[nodiscard]] std::uint64_t reclaimed() const noexcept;
  /// Bytes of moving-window log buffers held now: all of them, and those of request-made policies.
  [[nodiscard]] std::size_t log_bytes() const noexcept;
  [[nodiscard]] std::size_t request_log_bytes() const noexcept;
  /// Hits refused because a moving-window log would have grown past `max_log_bytes` or
  /// `max_request_log_bytes`.
  [[nodiscard]] std::uint64_t log_refusals() const noexcept;

  class Table;  // implementation detail (memory_storage.cpp)

 private:
  struct Quotas;     // share_quota's members by key, under a lock (memory/quota.cpp)
  struct Directory;  // the tables by fingerprint, under a big-reader lock (memory_storage.cpp)
  absl::StatusOr<Decision> add_and_apply(const Policy& policy, std::string_view key, std::int64_t cost, Effect effect,
                         Micros now);
  // Runs `f` on the policy's table under the directory's lock: the table in use, a new one when
  // `create`, else a scratch table that keeps nothing.
  absl::StatusOr<Decision> in_table(const Policy& policy, Micros now, bool create,
                                    absl::FunctionRef<absl::StatusOr<Decision>(Table&)> f);
  // A settle with the reservation's entry (null: an unknown id) under its shard's lock. `strict`:
  // an explicit settle (Effect::kSettle), which answers NotFound for a lease not outstanding.
  absl::StatusOr<Decision> settle_locked(const Policy& policy, std::string_view key, std::string_view id,
                                         std::int64_t actual, Micros now, ReservationShard& shard,
                                         const std::string& entry_key, ReservationEntry* entry, bool strict);

  MemoryStorageOptions options_;
  std::unique_ptr<Directory> dir_;
  std::unique_ptr<Reservations> reservations_;
  static std::shared_ptr<Quotas> new_quotas();
  std::shared_ptr<Quotas> quotas_ = new_quotas();
};

}  // namespace floodgate
