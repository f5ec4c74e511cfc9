// MemoryStorage's reservations and in-flight leases: reserve, settle, renew and known, each under
// the reservation's shard lock around the table's own step (memory_storage.cpp has the tables).
#include "floodgate/memory_storage.hpp"

#include <algorithm>
#include <array>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "storage/memory/locks.hpp"
#include "storage/decide.hpp"
#include "storage/memory/reservations.hpp"
#include "storage/memory/table.hpp"
#include <fmt/format.h>

namespace floodgate {

absl::StatusOr<Decision> MemoryStorage::reserve(const Policy& policy, std::string_view key, std::int64_t cost,
                                                std::string_view id, Micros ttl, Effect effect, Micros now) {
  Reservations& rs = *reservations_;
  Reservations::Shard& sh = rs.shard_for(policy, key);
  std::string k = Reservations::entry_key(policy, key, id);
  std::lock_guard<std::mutex> lock(sh.mu);
  if (Reservations::Entry* e = rs.find(sh, k, now)) {
    if (effect == Effect::kReserveOrSettle) return settle_locked(policy, key, id, cost, now, sh, k, e, false);
    return absl::AlreadyExistsError(fmt::format(
        "reservation \"{}\" of this key is {}: an id names one request until its time to live ends", id,
        e->settled ? "settled" : "outstanding"));
  }
  if (!rs.has_room(sh, now)) {
    return absl::ResourceExhaustedError(fmt::format(
        "the memory storage holds {} reservations, its bound: settle them, shorten their ttl, or raise "
        "max_reservations in the storage URL",
        options_.max_reservations));
  }
  ReservationEntry entry;
  absl::StatusOr<Decision> d = in_table(policy, now, cost > 0, [&](Table& t) {
    return t.reserve(policy, key, cost, now, std::span<Micros>(entry.marks.data(), policy.limits().size()));
  });
  if (d.ok() && d->allowed) {
    entry.at = now;
    entry.estimate = cost;
    // A lease counts until now + ttl inclusive: its entry goes 1 µs after.
    entry.expires = now + (detail::leases(policy) ? detail::lease_ttl(policy) + 1 : ttl);
    rs.put(sh, std::move(k), entry);
  }
  return d;
}

absl::StatusOr<Decision> MemoryStorage::settle_locked(const Policy& policy, std::string_view key, std::string_view id,
                                                      std::int64_t actual, Micros now, ReservationShard& shard,
                                                      const std::string& entry_key, ReservationEntry* e, bool strict) {
  const auto as_is = [&](SettleOutcome outcome) {
    absl::StatusOr<Decision> d = in_table(policy, now, false, [&](Table& t) {
      return t.settle(policy, key, now, now, {}, 0);  // the state as it is
    });
    if (d.ok()) d->settle = outcome;
    return d;
  };
  if (detail::leases(policy)) {
    // A release: the lease's units go back in full; a lease not outstanding frees nothing.
    if (e == nullptr || e->settled || !detail::lease_alive(policy, e->at, e->marks[0], now)) {
      if (strict) return detail::lease_not_outstanding(id);
      return as_is(e != nullptr && e->settled ? SettleOutcome::kAlreadySettled : SettleOutcome::kUnknown);
    }
    actual = 0;
  }
  if (e != nullptr && e->settled) return as_is(SettleOutcome::kAlreadySettled);
  const bool remember = e == nullptr && options_.remember_unknown_settles;
  if (remember && !reservations_->has_room(shard, now)) {
    // An unknown id is charged now and remembered as settled, so that the same settle sent again
    // is not charged twice: with no room to remember it, it is not charged either.
    return absl::ResourceExhaustedError(fmt::format(
        "the memory storage holds {} reservations, its bound: a settle of an unknown or expired id is "
        "remembered so that it counts once, and there is no room; settle outstanding ones, shorten their "
        "ttl, or raise max_reservations in the storage URL",
        options_.max_reservations));
  }
  const Micros at = e != nullptr ? e->at : now;
  const std::int64_t delta = e != nullptr ? actual - e->estimate : actual;
  const std::span<const Micros> marks =
      e != nullptr ? std::span<const Micros>(e->marks.data(), policy.limits().size()) : std::span<const Micros>();
  absl::StatusOr<Decision> d = in_table(policy, now, delta > 0, [&](Table& t) {
    return t.settle(policy, key, now, at, marks, delta);
  });
  if (!d.ok()) return d;
  d->settle = e != nullptr ? SettleOutcome::kSettled : SettleOutcome::kUnknown;
  if (e != nullptr) {
    e->settled = true;
  } else if (remember) {
    // An unknown id, charged now: remembered as settled (room was found above; other shards may
    // have added entries since, so the bound can be passed by the settles under way at once) so
    // that the same settle sent again is not charged twice.
    ReservationEntry tomb;
    tomb.at = now;
    tomb.settled = true;
    tomb.expires = now + kDefaultReservationTtl;
    reservations_->put(shard, entry_key, tomb);
  }
  return d;
}

absl::StatusOr<Decision> MemoryStorage::settle(const Policy& policy, std::string_view key, std::string_view id,
                                               std::int64_t actual, Micros now) {
  Reservations& rs = *reservations_;
  Reservations::Shard& sh = rs.shard_for(policy, key);
  const std::string k = Reservations::entry_key(policy, key, id);
  std::lock_guard<std::mutex> lock(sh.mu);
  return settle_locked(policy, key, id, actual, now, sh, k, rs.find(sh, k, now), true);
}

absl::StatusOr<Decision> MemoryStorage::renew(const Policy& policy, std::string_view key, std::string_view id,
                                              Micros now) {
  if (!detail::leases(policy)) return detail::renew_needs_leases(policy);
  Reservations& rs = *reservations_;
  Reservations::Shard& sh = rs.shard_for(policy, key);
  const std::string k = Reservations::entry_key(policy, key, id);
  std::lock_guard<std::mutex> lock(sh.mu);
  Reservations::Entry* e = rs.find(sh, k, now);
  if (e == nullptr || e->settled || !detail::lease_alive(policy, e->at, e->marks[0], now)) return detail::lease_not_outstanding(id);
  const std::size_t n = policy.limits().size();
  ReservationEntry renewed = *e;
  absl::StatusOr<Decision> d = in_table(policy, now, true, [&](Table& t) {
    return t.renew(policy, key, now, e->at, std::span<const Micros>(e->marks.data(), n), e->estimate,
                   std::span<Micros>(renewed.marks.data(), n));
  });
  if (!d.ok()) return d;
  renewed.at = now;
  renewed.expires = now + detail::lease_ttl(policy) + 1;
  rs.put(sh, k, renewed);  // replaces the entry, and queues its new expiry
  return d;
}

absl::StatusOr<bool> MemoryStorage::known(const Policy& policy, std::string_view key, std::string_view id,
                                          Micros now) {
  Reservations& rs = *reservations_;
  Reservations::Shard& sh = rs.shard_for(policy, key);
  const std::string k = Reservations::entry_key(policy, key, id);
  std::lock_guard<std::mutex> lock(sh.mu);
  return rs.find(sh, k, now) != nullptr;
}

}  // namespace floodgate
