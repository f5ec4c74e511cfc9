// The memory store's reservations (Storage::reserve, Storage::settle): what each outstanding or
// recently settled reservation needs, by (policy state id, key, id), within a bound.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "floodgate/clock.hpp"
#include "floodgate/policy.hpp"

namespace floodgate {

/// One reservation (Reservations).
struct ReservationEntry {
  Micros at = 0;              ///< when it was admitted
  std::int64_t estimate = 0;  ///< the units charged then
  Micros expires = 0;         ///< forgotten from then on
  bool settled = false;       ///< a tombstone: a settle changes nothing
  std::array<Micros, kMaxLimitsPerPolicy> marks{};  ///< each limit's mark (algorithms.hpp)
};

/// A shard of Reservations.
struct ReservationShard {
  std::mutex mu;
  absl::flat_hash_map<std::string, ReservationEntry> entries;
  /// The entries in the order they were added, with their expiry: popped from the front as they
  /// expire (amortised O(1) when times to live are alike; an entry that outlives those behind it
  /// holds them until the shard is scanned).
  std::deque<std::pair<Micros, std::string>> order;
  Micros next_scan = kNever;  // the earliest expiry in the shard (or later): nothing to erase before
};

/// Reservations of one memory store. A reservation is remembered from its admission until its
/// time to live ends, settled or not: a settled one as a tombstone, so that a second settle of
/// the id changes nothing. Bounded by `max` entries over all shards: an entry beyond it is
/// refused (the caller answers ResourceExhausted and counts it in `refusals`); expired entries
/// go lazily (when found), when a shard is full, and by `collect` (the store's housekeeping).
///
/// Thread-safety: a shard's mutex guards its entries. The store holds the shard of a (policy,
/// key) across the reservation's entry and the key's state, so that a reserve and a settle of
/// one id are atomic against each other; all reservations of one key share a shard.
class Reservations {
 public:
  using Entry = ReservationEntry;
  using Shard = ReservationShard;

  explicit Reservations(std::size_t max);

  /// The shard of (policy, key), and the entry key of (policy, key, id) in it: an injective
  /// encoding (length-prefixed), so that no id or key reaches another's entry.
  Shard& shard_for(const Policy& policy, std::string_view key);
  static std::string entry_key(const Policy& policy, std::string_view key, std::string_view id);

  /// Under the shard's lock: the live entry, or null (an expired one is erased).
  Entry* find(Shard& sh, const std::string& k, Micros now);
  /// Under the shard's lock: whether one more entry is within the bound (expired entries of the
  /// shard erased first if it is reached); false counts a refusal.
  bool has_room(Shard& sh, Micros now);
  /// Under the shard's lock: adds (or replaces) an entry; call has_room first.
  void put(Shard& sh, std::string k, const Entry& e);
  /// Erases expired entries in every shard.
  void collect(Micros now);

  [[nodiscard]] std::size_t size() const noexcept { return size_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t refusals() const noexcept { return refusals_.load(std::memory_order_relaxed); }

 private:
  static constexpr std::size_t kShards = 64;
  void erase_expired(Shard& sh, Micros now);
  void pop_expired(Shard& sh, Micros now);
  const std::size_t max_;
  std::unique_ptr<Shard[]> shards_;
  std::atomic<std::size_t> size_{0};
  std::atomic<std::uint64_t> refusals_{0};
};

}  // namespace floodgate
