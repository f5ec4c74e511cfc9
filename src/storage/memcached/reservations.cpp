// MemcachedStorage's reservations and in-flight leases: a record item beside the key's value.
#include "storage/memcached/memcached_storage.hpp"

#include <charconv>
#include <optional>
#include <span>

#include <fmt/format.h>

#include "storage/decide.hpp"

namespace floodgate::memcached {

// ---- reservations: a record item beside the key's value ------------------------------------------
// "R <at> <estimate> <expires> <mark>…" while outstanding ("P …" without marks while the hit is on
// its way), "S <expires>" once settled. `expires` is in µs on the decision's clock (`now`): from
// then on the record is absent, exactly as the memory store's entry; the item's own expiry, on
// memcached's clock, is only its garbage collection (time_to_live: the slack and a second more).
// Claimed with add (a new id) or cas (over an expired record) by a reservation, and with cas by a
// settle, so that of two clients with one id only one reserves, and only one settles. A record
// written before records kept the decision's clock ("r", "p", "s" in lower case, with an expiry
// in Unix seconds) lives while its item does, as it was written to.
struct MemcachedStorage::Record {
  char kind = 0;       // 'r', 'p', 's'
  bool dated = false;  // written in upper case: `expires` is on the decision's clock
  Micros at = 0;
  std::int64_t estimate = 0;
  std::int64_t expires = 0;  // µs on the decision's clock when dated, else Unix seconds
  std::vector<Micros> marks;
  [[nodiscard]] bool live(Micros now) const { return !dated || expires > now; }
};
namespace {

std::optional<MemcachedStorage::Record> parse_record(std::string_view v) {
  using Record = MemcachedStorage::Record;
  Record r;
  std::vector<std::int64_t> n;
  if (v.empty()) return std::nullopt;
  r.kind = v.front();
  if (r.kind == 'R' || r.kind == 'P' || r.kind == 'S') {
    r.dated = true;
    r.kind = static_cast<char>(r.kind - 'A' + 'a');
  }
  std::size_t i = 1;
  while (i < v.size()) {
    if (v[i] != ' ') return std::nullopt;
    ++i;
    std::int64_t x = 0;
    const auto [end, ec] = std::from_chars(v.data() + i, v.data() + v.size(), x);
    if (ec != std::errc()) return std::nullopt;
    n.push_back(x);
    i = static_cast<std::size_t>(end - v.data());
  }
  if (r.kind == 's' && n.size() == 1) {
    r.expires = n[0];
    return r;
  }
  if ((r.kind != 'r' && r.kind != 'p') || n.size() < 3) return std::nullopt;
  r.at = n[0];
  r.estimate = n[1];
  r.expires = n[2];
  r.marks.assign(n.begin() + 3, n.end());
  return r;
}
}  // namespace

time_t MemcachedStorage::record_expiration(Micros expires, Micros now) const {
  return static_cast<time_t>(expiration(time_to_live(expires, now, options_.ttl_slack), wall_seconds()));
}

absl::StatusOr<bool> MemcachedStorage::write_record(memcached_st* m, std::uint32_t server, const std::string& rk,
                                                   const std::string& v, time_t exp, std::optional<std::uint64_t> cas) {
  const memcached_return_t rc = cas ? memcached_cas(m, rk.data(), rk.size(), v.data(), v.size(), exp, kValueFlags, *cas)
                                    : memcached_add(m, rk.data(), rk.size(), v.data(), v.size(), exp, kValueFlags);
  if (auto s = record(m, server, rc); !s.ok()) return s;
  if (rc == MEMCACHED_SUCCESS) return true;
  if (rc != MEMCACHED_NOTSTORED && rc != MEMCACHED_DATA_EXISTS && rc != MEMCACHED_NOTFOUND) {
    return absl::InternalError(
        fmt::format("memcached {}: {}: {}", options_.servers[server].name(), cas ? "cas" : "add", error_text(m, rc)));
  }
  return false;
}

absl::StatusOr<std::optional<MemcachedStorage::Record>> MemcachedStorage::read_record(memcached_st* m,
                                                                                      std::uint32_t server,
                                                                                      const std::string& rk,
                                                                                      std::uint64_t* cas) {
  auto read = get(m, server, rk);
  if (!read.ok()) return read.status();
  *cas = read->cas;
  if (!read->found) return std::optional<Record>();
  std::optional<Record> r = parse_record(read->value);
  if (!r) {
    return absl::InternalError(fmt::format("memcached {}: the value of {} is not a floodgate reservation",
                                           options_.servers[server].name(), rk));
  }
  return r;
}

absl::StatusOr<bool> MemcachedStorage::claim_record(memcached_st* m, std::uint32_t server, const std::string& rk,
                                                    const std::string& pending, time_t exp, Micros now) {
  std::optional<std::uint64_t> over;  // the cas of an expired record to claim; none: add
  for (int attempt = 0; attempt < options_.cas_retries; ++attempt) {
    if (auto s = admit(server); !s.ok()) return s;
    auto stored = write_record(m, server, rk, pending, exp, over);
    if (!stored.ok()) return stored.status();
    if (*stored) return false;
    // The id has a record (or had, for a cas): live, the id is known; expired, it is claimed.
    std::uint64_t cas = 0;
    auto r = read_record(m, server, rk, &cas);
    if (!r.ok()) return r.status();
    over.reset();
    if (!r->has_value()) continue;
    if ((*r)->live(now)) return true;
    over = cas;
  }
  return absl::AbortedError(fmt::format("memcached {}: the reservation {} changed under {} reservations in a row",
                                        options_.servers[server].name(), rk, options_.cas_retries));
}

absl::StatusOr<Decision> MemcachedStorage::charge_reserved(memcached_st* m, const Policy& policy, const std::string& k,
                                                           const std::string& rk, std::int64_t cost, Micros now,
                                                           Micros expires, time_t exp) {
  std::array<Micros, kMaxLimitsPerPolicy> marks{};
  absl::StatusOr<Decision> d = detail::with_algorithm(policy, [&](auto a) {
    using A = decltype(a);
    return update<A>(m, policy, k, now, nullptr, [&](typename A::State* st) {
      const Decision dd = detail::decide<A>(st, policy.limits(), policy.shape(), cost, Effect::kHit, now);
      if (dd.allowed) detail::marks_of<A>(st, policy.limits(), marks);
      return std::pair<Decision, bool>{dd, dd.allowed && cost > 0};
    });
  });
  if (!d.ok() || !d->allowed) {
    memcached_delete(m, rk.data(), rk.size(), 0);  // reserves nothing (a failed delete expires)
    return d;
  }
  std::string v = fmt::format("R {} {} {}", now, cost, expires);
  for (std::size_t i = 0; i < policy.limits().size(); ++i) fmt::format_to(std::back_inserter(v), " {}", marks[i]);
  memcached_set(m, rk.data(), rk.size(), v.data(), v.size(), exp, kValueFlags);  // else "P": no marks
  return d;
}

absl::StatusOr<Decision> MemcachedStorage::reserve(const Policy& policy, std::string_view key, std::int64_t cost,
                                                   std::string_view id, Micros ttl, Effect effect, Micros now) {
  if (auto s = check_policy(policy, options_.item_size_max); !s.ok()) return s;
  const std::string rk = reservation_key(options_.prefix, policy, key, id);
  {
    auto conn = acquire();
    if (!conn.ok()) return conn.status();
    memcached_st* m = conn->get();
    const std::uint32_t server = server_of(m, rk);
    // A lease counts until now + ttl inclusive: its record goes 1 µs after (as the memory store's).
    if (detail::leases(policy)) ttl = detail::lease_ttl(policy) + 1;
    const Micros expires = now + ttl;
    const time_t exp = record_expiration(expires, now);
    auto known_id = claim_record(m, server, rk, fmt::format("P {} {} {}", now, cost, expires), exp, now);
    if (!known_id.ok()) return known_id.status();
    if (!*known_id) {
      return charge_reserved(m, policy, storage_key(options_.prefix, policy, key), rk, cost, now, expires, exp);
    }
  }
  // The id is known (the client is given back first: settle borrows one of its own).
  if (effect == Effect::kReserveOrSettle) return settle_record(policy, key, id, cost, now, false, false);
  return absl::AlreadyExistsError(fmt::format(
      "reservation \"{}\" of this key is known (outstanding or settled): an id names one request until its time "
      "to live ends",
      id));
}

absl::StatusOr<Decision> MemcachedStorage::settle(const Policy& policy, std::string_view key, std::string_view id,
                                                  std::int64_t actual, Micros now) {
  return settle_record(policy, key, id, actual, now, true, false);
}

absl::StatusOr<Decision> MemcachedStorage::renew(const Policy& policy, std::string_view key, std::string_view id,
                                                 Micros now) {
  if (!detail::leases(policy)) return detail::renew_needs_leases(policy);
  return settle_record(policy, key, id, 0, now, true, true);
}

absl::StatusOr<Decision> MemcachedStorage::settle_state(memcached_st* m, const Policy& policy, const std::string& k,
                                                        Micros now, Micros at, std::int64_t delta,
                                                        std::span<const Micros> marks, SettleOutcome outcome) {
  absl::StatusOr<Decision> d = detail::with_algorithm(policy, [&](auto a) {
    using A = decltype(a);
    return update<A>(m, policy, k, now, nullptr, [&](typename A::State* st) {
      return std::pair<Decision, bool>{detail::settle_all<A>(st, policy.limits(), now, at, marks, delta), delta != 0};
    });
  });
  if (d.ok()) d->settle = outcome;
  return d;
}

std::optional<absl::StatusOr<Decision>> MemcachedStorage::renew_record(memcached_st* m, std::uint32_t server,
                                                                       const Policy& policy, const std::string& k,
                                                                       const std::string& rk, const Record& r,
                                                                       std::uint64_t cas, Micros now) {
  // The record is claimed first ("P": on its way, as a reservation's), then the lease's units
  // move to now, then the record takes their new entry's time as its mark.
  const Micros expires = now + detail::lease_ttl(policy) + 1;
  const time_t exp = record_expiration(expires, now);
  auto stored = write_record(m, server, rk, fmt::format("P {} {} {}", now, r.estimate, expires), exp, cas);
  if (!stored.ok()) return stored.status();
  if (!*stored) return std::nullopt;
  std::array<Micros, kMaxLimitsPerPolicy> marks{};
  absl::StatusOr<Decision> d = detail::with_algorithm(policy, [&](auto a) {
    using A = decltype(a);
    return update<A>(m, policy, k, now, nullptr, [&](typename A::State* st) {
      const auto limits = policy.limits();
      detail::settle_all<A>(st, limits, now, r.at, r.marks, -r.estimate);
      for (std::size_t i = 0; i < limits.size(); ++i) A::commit(st[i], limits[i], now, r.estimate);
      detail::marks_of<A>(st, limits, marks);
      Decision dd = detail::as_is<A>(st, limits, now);
      dd.allowed = true;
      return std::pair<Decision, bool>{dd, r.estimate != 0};
    });
  });
  if (!d.ok()) return d;
  std::string v = fmt::format("R {} {} {}", now, r.estimate, expires);
  for (std::size_t i = 0; i < policy.limits().size(); ++i) fmt::format_to(std::back_inserter(v), " {}", marks[i]);
  memcached_set(m, rk.data(), rk.size(), v.data(), v.size(), exp, kValueFlags);  // else "P": at, no mark
  return d;
}

// g++ 12 at -O3 takes the std::optional<Record> below for read uninitialized (a false positive of
// -Wmaybe-uninitialized through the optional's storage: every read is behind a test of it).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
absl::StatusOr<Decision> MemcachedStorage::settle_record(const Policy& policy, std::string_view key,
                                                         std::string_view id, std::int64_t actual, Micros now,
                                                         bool strict, bool renewal) {
  if (auto s = check_policy(policy, options_.item_size_max); !s.ok()) return s;
  const bool is_lease = detail::leases(policy);
  const std::string rk = reservation_key(options_.prefix, policy, key, id);
  const std::string k = storage_key(options_.prefix, policy, key);
  auto conn = acquire();
  if (!conn.ok()) return conn.status();
  memcached_st* m = conn->get();
  const std::uint32_t server = server_of(m, rk);
  for (int attempt = 0; attempt < options_.cas_retries; ++attempt) {
    if (auto s = admit(server); !s.ok()) return s;
    std::uint64_t cas = 0;
    auto read = read_record(m, server, rk, &cas);
    if (!read.ok()) return read.status();
    std::optional<Record> r = *std::move(read);  // the live record: none when absent or expired
    const bool present = r.has_value();
    if (r && !r->live(now)) r.reset();
    const bool lease_gone = is_lease && (!r || r->kind == 's' ||
                                         !detail::lease_alive(policy, r->at, r->marks.empty() ? 0 : r->marks[0], now));
    if (lease_gone) {  // a lease not outstanding (or expired, its record not yet gone): nothing freed or charged
      if (strict) return detail::lease_not_outstanding(id);
      const bool settled = r && r->kind == 's';
      return settle_state(m, policy, k, now, now, 0, {}, settled ? SettleOutcome::kAlreadySettled : SettleOutcome::kUnknown);
    }
    if (r && r->kind == 's') {  // settled: the state as it is
      return settle_state(m, policy, k, now, now, 0, {}, SettleOutcome::kAlreadySettled);
    }
    if (r && renewal) {
      auto d = renew_record(m, server, policy, k, rk, *r, cas, now);
      if (!d) continue;
      return *std::move(d);
    }
    // Settled until the record's own expiry (a record without the decision's clock: its item's);
    // unknown or expired: a settled record first (add, or cas over the expired one: one of two
    // clients wins), then `actual` charged now. Never charged unless remembered.
    const Micros expires = r ? r->expires : now + kDefaultReservationTtl;
    const bool dated = !r || r->dated;
    const time_t exp = dated ? record_expiration(expires, now)
                             : static_cast<time_t>(std::max<std::int64_t>(1, expires));  // absolute Unix time
    std::optional<std::uint64_t> over;
    if (present) over = cas;
    auto stored = write_record(m, server, rk, fmt::format("{} {}", dated ? 'S' : 's', expires), exp, over);
    if (!stored.ok()) return stored.status();
    if (!*stored) continue;  // another client changed it: read again
    if (!r) return settle_state(m, policy, k, now, now, actual, {}, SettleOutcome::kUnknown);
    if (is_lease) actual = 0;  // a release gives the lease's units back in full
    return settle_state(m, policy, k, now, r->at, actual - r->estimate, r->marks, SettleOutcome::kSettled);
  }
  return absl::AbortedError(fmt::format("memcached {}: the reservation {} changed under {} settles in a row",
                                        options_.servers[server].name(), rk, options_.cas_retries));
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

absl::StatusOr<bool> MemcachedStorage::known(const Policy& policy, std::string_view key, std::string_view id,
                                             Micros now) {
  const std::string rk = reservation_key(options_.prefix, policy, key, id);
  auto conn = acquire();
  if (!conn.ok()) return conn.status();
  memcached_st* m = conn->get();
  const std::uint32_t server = server_of(m, rk);
  if (auto s = admit(server); !s.ok()) return s;
  std::uint64_t cas = 0;
  auto r = read_record(m, server, rk, &cas);
  if (!r.ok()) return r.status();
  return r->has_value() && (*r)->live(now);
}

}  // namespace floodgate::memcached
