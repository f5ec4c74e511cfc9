// floodgate/memory_storage.hpp — the embedded in-memory storage (the default).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "floodgate/storage.hpp"

namespace floodgate {

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
};

/// A sharded hash table per policy. Per key it keeps the key and one small state per limit in a
/// slab record; lookups by `std::string_view` do not allocate. Entries whose state equals "absent"
/// are reclaimed incrementally (each insertion examines two records), never by rescanning the
/// whole table.
///
/// Thread-safety: all methods are thread-safe. A decision on a known key takes its shard's lock in
/// shared mode (a per-thread counter) and the key's own lock word, so decisions on different keys
/// run in parallel without sharing a written cache line; adding or removing a key takes the shard
/// exclusively. On one key, `apply` is linearizable.
class MemoryStorage final : public Storage {
 public:
  explicit MemoryStorage(MemoryStorageOptions options = {});
  ~MemoryStorage() override;
  MemoryStorage(const MemoryStorage&) = delete;
  MemoryStorage& operator=(const MemoryStorage&) = delete;

  absl::StatusOr<Decision> apply(const Policy& policy, std::string_view key, std::int64_t cost,
                                 Effect effect, Micros now) override;
  absl::Status clear(const Policy& policy, std::string_view key) override;

  /// floodgate_memory_evictions_total and floodgate_memory_reclaimed_total.
  [[nodiscard]] std::vector<StorageCounter> counters() const override;

  /// Keys currently held for `policy` (including ones that are absent but not yet reclaimed).
  [[nodiscard]] std::size_t size(const Policy& policy) const;
  /// Entries evicted because a policy reached `max_keys`, over all policies.
  [[nodiscard]] std::uint64_t evictions() const noexcept;
  /// Entries reclaimed because their state had become absent, over all policies.
  [[nodiscard]] std::uint64_t reclaimed() const noexcept;

  class Table;  // implementation detail (memory_storage.cpp)

 private:
  Table& table_for(const Policy& policy);
  [[nodiscard]] const Table* find_table(const Policy& policy) const;

  struct Snapshot;
  MemoryStorageOptions options_;
  std::atomic<const Snapshot*> tables_;        // read without locking
  mutable std::mutex write_mu_;                // serialises adding a table
  std::vector<std::unique_ptr<Table>> owned_;  // guarded by write_mu_
  std::vector<std::unique_ptr<const Snapshot>> snapshots_;  // guarded by write_mu_; kept alive
};

}  // namespace floodgate
