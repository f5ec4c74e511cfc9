// The memory store's table: all keys of one policy (table.cpp decides on the sharded slab of shard.hpp).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string_view>

#include "floodgate/memory_storage.hpp"
#include "storage/memory/log_pool.hpp"

namespace floodgate {

/// One policy's keys and states. Thread-safety: as MemoryStorage.
class MemoryStorage::Table {
 public:
  virtual ~Table() = default;
  /// Decides by `policy`'s limits: any policy of the table's state id (Policy::state_id), so a
  /// policy whose amounts changed decides on the same states (the algorithms carry usage over).
  /// An error only for a new key longer than 2^31 - 2 bytes (InvalidArgument); a StatusOr also so
  /// that the decision is built where Storage::apply returns it, not copied there.
  virtual absl::StatusOr<Decision> apply(const Policy& policy, std::string_view key, std::int64_t cost,
                                         Effect effect, Micros now) = 0;
  /// A hit of `cost` that, when admitted, writes each limit's mark (algorithms.hpp) into `marks`
  /// (one per limit), read under the record's lock right after the commit.
  virtual absl::StatusOr<Decision> reserve(const Policy& policy, std::string_view key, std::int64_t cost, Micros now,
                                           std::span<Micros> marks) = 0;
  /// Settles on the key's states (detail::settle_all): a key without a record gets one when
  /// `delta` > 0. A moving window's log may grow past the store's log bound here: a settle is
  /// usage that happened, never refused (the bytes are counted all the same).
  virtual absl::StatusOr<Decision> settle(const Policy& policy, std::string_view key, Micros now, Micros at,
                                          std::span<const Micros> marks, std::int64_t delta) = 0;
  /// A lease's renewal, on one record under its lock: `units` leave the states at `at` (a settle
  /// of −units with `marks`) and are committed again at `now`; the new marks are written into
  /// `new_marks`. Never more units outstanding than before.
  virtual absl::StatusOr<Decision> renew(const Policy& policy, std::string_view key, Micros now, Micros at,
                                         std::span<const Micros> marks, std::int64_t units,
                                         std::span<Micros> new_marks) = 0;
  virtual void clear(std::string_view key) = 0;
  [[nodiscard]] virtual std::size_t size() const = 0;
  /// The fingerprint hash of the last policy whose lifetime was taken into `lifetime`.
  std::atomic<std::size_t> lifetime_of_hash{0};

  std::atomic<std::uint64_t> evictions{0};
  std::atomic<std::uint64_t> reclaimed{0};
  /// When a decision last used the table (µs; updated at most once a second, so that threads
  /// deciding on one table rarely write a shared cache line).
  std::atomic<Micros> last_used{0};
  /// How long a key's state can outlive its last hit: a table idle for longer holds only absent
  /// state and can be freed without losing anything.
  /// The longest of the policies that decided in it (raised on first use of other amounts).
  std::atomic<Micros> lifetime{0};
  /// A policy that a request made (an inline limit, a limit override): bounded apart.
  bool made_by_request = false;
};

/// The table for a policy's strategy (and anchor). A moving window's table keeps its logs within
/// `logs` (null: unbounded, for a scratch table that commits nothing).
std::unique_ptr<MemoryStorage::Table> make_table(const Policy& policy, const MemoryStorageOptions& options,
                                                 LogPools* logs);

}  // namespace floodgate
