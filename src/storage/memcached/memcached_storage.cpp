#include "storage/memcached/memcached_storage.hpp"

#include <cctype>
#include <cstring>

#include <libmemcached/memcached.h>
#include <libmemcachedutil-1.0/pool.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <ctime>
#include <optional>
#include <span>

#include <fmt/format.h>

#include "absl/container/flat_hash_map.h"
#include "storage/decide.hpp"

namespace floodgate::memcached {

namespace {

// Whether a return code means the server (or the way to it) failed, as opposed to an answer.
bool is_connection_failure(memcached_return_t rc) {
  switch (rc) {
    case MEMCACHED_CONNECTION_FAILURE:
    case MEMCACHED_CONNECTION_SOCKET_CREATE_FAILURE:
    case MEMCACHED_HOST_LOOKUP_FAILURE:
    case MEMCACHED_SERVER_MARKED_DEAD:
    case MEMCACHED_SERVER_TEMPORARILY_DISABLED:
    case MEMCACHED_NO_SERVERS:
      return true;
    default:
      return false;
  }
}

// libmemcached's name of `rc` in lower case, with the system's reason for a connection failure
// ("connection failure: Connection refused"; another error's errno may be an older one's). Its
// last-error message carries a pointer and a source location, which no user needs.
std::string error_text(const memcached_st* m, memcached_return_t rc) {
  std::string t = memcached_strerror(m, rc);
  for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (const int e = memcached_last_error_errno(m); e != 0 && is_connection_failure(rc)) {
    t += fmt::format(": {}", std::strerror(e));
  }
  return t;
}

bool is_server_failure(memcached_return_t rc) {
  switch (rc) {
    case MEMCACHED_TIMEOUT:
    case MEMCACHED_ERRNO:
    case MEMCACHED_WRITE_FAILURE:
    case MEMCACHED_READ_FAILURE:
    case MEMCACHED_UNKNOWN_READ_FAILURE:
    case MEMCACHED_PROTOCOL_ERROR:
    case MEMCACHED_CONNECTION_BIND_FAILURE:
    case MEMCACHED_PARTIAL_READ:
    case MEMCACHED_SOME_ERRORS:
      return true;
    default:
      return is_connection_failure(rc);
  }
}

std::int64_t wall_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

class MemcachedStorage::Lease {
 public:
  Lease(memcached_pool_st* pool, memcached_st* m) : pool_(pool), m_(m) {}
  Lease(Lease&& o) noexcept : pool_(o.pool_), m_(o.m_) { o.m_ = nullptr; }
  Lease& operator=(Lease&&) = delete;
  ~Lease() {
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

MemcachedStorage::MemcachedStorage(MemcachedOptions options) : options_(std::move(options)) {
  master_ = memcached_create(nullptr);
  for (const Server& s : options_.servers) {
    memcached_server_add(master_, s.host.c_str(), static_cast<in_port_t>(s.port));
    health_.push_back(std::make_unique<Health>(
        options_, std::hash<std::string>{}(s.name()) ^ reinterpret_cast<std::uintptr_t>(this)));
  }
  const auto set = [&](memcached_behavior_t b, std::uint64_t v) {
    memcached_behavior_set(master_, b, v);
  };
  set(MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 1);
  set(MEMCACHED_BEHAVIOR_SUPPORT_CAS, 1);
  set(MEMCACHED_BEHAVIOR_KETAMA, 1);  // consistent hashing, MD5 points: other clients agree
  set(MEMCACHED_BEHAVIOR_TCP_NODELAY, 1);
  set(MEMCACHED_BEHAVIOR_NO_BLOCK, 1);
  set(MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, static_cast<std::uint64_t>(options_.connect_timeout.count()));
  set(MEMCACHED_BEHAVIOR_POLL_TIMEOUT, static_cast<std::uint64_t>(options_.timeout.count()));
  set(MEMCACHED_BEHAVIOR_SND_TIMEOUT, static_cast<std::uint64_t>(options_.timeout.count()) * 1000);
  set(MEMCACHED_BEHAVIOR_RCV_TIMEOUT, static_cast<std::uint64_t>(options_.timeout.count()) * 1000);
  // Our breaker decides when a failed server is tried again; libmemcached must neither wait
  // seconds on its own nor move a failed server's keys to another (their state is not there).
  set(MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, 0);
  set(MEMCACHED_BEHAVIOR_DEAD_TIMEOUT, 0);
  set(MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT, 0);
  set(MEMCACHED_BEHAVIOR_REMOVE_FAILED_SERVERS, 0);
  set(MEMCACHED_BEHAVIOR_AUTO_EJECT_HOSTS, 0);
  pool_ = memcached_pool_create(master_, 1, static_cast<std::uint32_t>(options_.pool));
}

MemcachedStorage::~MemcachedStorage() {
  if (pool_ != nullptr) memcached_pool_destroy(pool_);
  memcached_free(master_);
}

absl::StatusOr<std::shared_ptr<MemcachedStorage>> MemcachedStorage::open(MemcachedOptions options,
                                                                       StorageStart start) {
  auto storage = std::make_shared<MemcachedStorage>(std::move(options));
  if (storage->pool_ == nullptr) return absl::InternalError("memcached: cannot create the pool");
  if (start == StorageStart::kFailFast) {
    if (auto s = storage->probe(); !s.ok()) return s;
  }
  return storage;
}

absl::Status MemcachedStorage::probe() {
  auto lease = acquire();
  if (!lease.ok()) return lease.status();
  // memcached_stat asks every server: each must answer.
  memcached_return_t rc = MEMCACHED_SUCCESS;
  memcached_stat_st* stat = memcached_stat(lease->get(), nullptr, &rc);
  if (stat != nullptr) memcached_stat_free(lease->get(), stat);
  if (rc == MEMCACHED_SUCCESS) return absl::OkStatus();
  std::string names;
  for (const Server& s : options_.servers) names += (names.empty() ? "" : ",") + s.name();
  return absl::UnavailableError(fmt::format("memcached {}: no answer ({})", names, error_text(lease->get(), rc)));
}

std::vector<Storage::ServerState> MemcachedStorage::servers() const {
  std::vector<ServerState> out;
  const auto now = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < health_.size(); ++i) {
    std::lock_guard<std::mutex> lock(health_[i]->mu);
    out.push_back({options_.servers[i].name(), health_[i]->breaker.open(now),
                   health_[i]->disconnected, health_[i]->disconnected ? 0 : options_.pool});
  }
  return out;
}

absl::StatusOr<MemcachedStorage::Lease> MemcachedStorage::acquire() {
  const auto ms = options_.timeout.count();
  timespec wait{static_cast<time_t>(ms / 1000), static_cast<long>((ms % 1000) * 1000000)};
  memcached_return_t rc = MEMCACHED_SUCCESS;
  memcached_st* m = memcached_pool_fetch(pool_, &wait, &rc);
  if (m == nullptr) {
    return absl::DeadlineExceededError(fmt::format(
        "memcached: no free client handle within the timeout (pool={})", options_.pool));
  }
  return Lease(pool_, m);
}

std::uint32_t MemcachedStorage::server_of(memcached_st* m, const std::string& key) const {
  const std::uint32_t i = memcached_generate_hash(m, key.data(), key.size());
  return i < health_.size() ? i : 0;
}

absl::Status MemcachedStorage::admit(std::uint32_t server) {
  Health& h = *health_[server];
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(h.mu);
  if (!h.breaker.allows_call(now)) {
    return absl::UnavailableError(fmt::format(
        "memcached {}: circuit breaker open after repeated failures", options_.servers[server].name()));
  }
  if (h.disconnected && !h.breaker.allows_connect(now)) {
    return absl::UnavailableError(fmt::format("memcached {}: waiting to reconnect (backoff)",
                                              options_.servers[server].name()));
  }
  return absl::OkStatus();
}

// Feeds the breaker and turns a failure into a status (OK for answers, such as NOTFOUND).
absl::Status MemcachedStorage::record(memcached_st* m, std::uint32_t server, int code) {
  const auto rc = static_cast<memcached_return_t>(code);
  Health& h = *health_[server];
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(h.mu);
  if (!is_server_failure(rc)) {
    h.breaker.on_success();
    if (h.disconnected) h.breaker.on_connect_success();
    h.disconnected = false;
    return absl::OkStatus();
  }
  if (is_connection_failure(rc)) {
    h.breaker.on_connect_failure(now);
    h.disconnected = true;
  } else {
    h.breaker.on_failure(now);
  }
  const std::string message = fmt::format("memcached {}: {}", options_.servers[server].name(),
                                          error_text(m, rc));
  if (rc == MEMCACHED_TIMEOUT) return absl::DeadlineExceededError(message);
  return absl::UnavailableError(message);
}

absl::StatusOr<MemcachedStorage::Got> MemcachedStorage::get(memcached_st* m, std::uint32_t server,
                                                            const std::string& key) {
  const char* keys[1] = {key.data()};
  const std::size_t lens[1] = {key.size()};
  memcached_return_t rc = memcached_mget(m, keys, lens, 1);
  Got g;
  if (rc == MEMCACHED_SUCCESS) {
    memcached_result_st result;
    memcached_result_create(m, &result);
    while (memcached_fetch_result(m, &result, &rc) != nullptr) {
      g.found = true;
      g.value.assign(memcached_result_value(&result), memcached_result_length(&result));
      g.cas = memcached_result_cas(&result);
      g.flags = memcached_result_flags(&result);
    }
    memcached_result_free(&result);
    if (rc == MEMCACHED_END || rc == MEMCACHED_NOTFOUND) rc = MEMCACHED_SUCCESS;
  }
  if (auto s = record(m, server, rc); !s.ok()) return s;
  if (rc != MEMCACHED_SUCCESS) {
    return absl::InternalError(fmt::format("memcached {}: gets: {}",
                                           options_.servers[server].name(),
                                           error_text(m, rc)));
  }
  return g;
}

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

template <class A>
absl::StatusOr<Decision> MemcachedStorage::decide(memcached_st* m, const Policy& policy,
                                                  const std::string& key, std::int64_t cost,
                                                  Effect effect, Micros now, Got* prefetched) {
  return update<A>(m, policy, key, now, prefetched, [&](typename A::State* st) {
    const Decision d = detail::decide<A>(st, policy.limits(), policy.shape(), cost, effect, now);
    return std::pair<Decision, bool>{d, effect == Effect::kHit && d.allowed && cost > 0};
  });
}

// ---- reservations: a record item beside the key's value ------------------------------------------
// "R <at> <estimate> <expires> <mark>…" while outstanding ("P …" without marks while the hit is on
// its way), "S <expires>" once settled. `expires` is in µs on the decision's clock (`now`): from
// then on the record is absent, exactly as the memory store's entry; the item's own expiry, on
// memcached's clock, is only its garbage collection (time_to_live: the slack and a second more).
// Claimed with add (a new id) or cas (over an expired record) by a reservation, and with cas by a
// settle, so that of two clients with one id only one reserves, and only one settles. A record
// written before records kept the decision's clock ("r", "p", "s" in lower case, with an expiry
// in Unix seconds) lives while its item does, as it was written to.
namespace {
struct Record {
  char kind = 0;       // 'r', 'p', 's'
  bool dated = false;  // written in upper case: `expires` is on the decision's clock
  Micros at = 0;
  std::int64_t estimate = 0;
  std::int64_t expires = 0;  // µs on the decision's clock when dated, else Unix seconds
  std::vector<Micros> marks;
  [[nodiscard]] bool live(Micros now) const { return !dated || expires > now; }
};
std::optional<Record> parse_record(std::string_view v) {
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

absl::StatusOr<Decision> MemcachedStorage::reserve(const Policy& policy, std::string_view key, std::int64_t cost,
                                                   std::string_view id, Micros ttl, Effect effect, Micros now) {
  if (auto s = check_policy(policy, options_.item_size_max); !s.ok()) return s;
  const std::string rk = reservation_key(options_.prefix, policy, key, id);
  const std::string k = storage_key(options_.prefix, policy, key);
  bool known_id = false;
  {
    auto lease = acquire();
    if (!lease.ok()) return lease.status();
    memcached_st* m = lease->get();
    const std::uint32_t server = server_of(m, rk);
    // A lease counts until now + ttl inclusive: its record goes 1 µs after (as the memory store's).
    if (detail::leases(policy)) ttl = detail::lease_ttl(policy) + 1;
    const Micros expires = now + ttl;
    const std::string pending = fmt::format("P {} {} {}", now, cost, expires);
    const time_t exp = record_expiration(expires, now);
    std::optional<std::uint64_t> over;  // the cas of an expired record to claim; none: add
    for (int attempt = 0;; ++attempt) {
      if (attempt == options_.cas_retries) {
        return absl::AbortedError(fmt::format("memcached {}: the reservation {} changed under {} reservations in a row",
                                              options_.servers[server].name(), rk, options_.cas_retries));
      }
      if (auto s = admit(server); !s.ok()) return s;
      const memcached_return_t rc =
          over ? memcached_cas(m, rk.data(), rk.size(), pending.data(), pending.size(), exp, kValueFlags, *over)
               : memcached_add(m, rk.data(), rk.size(), pending.data(), pending.size(), exp, kValueFlags);
      if (auto s = record(m, server, rc); !s.ok()) return s;
      if (rc == MEMCACHED_SUCCESS) break;
      if (rc != MEMCACHED_NOTSTORED && rc != MEMCACHED_DATA_EXISTS && rc != MEMCACHED_NOTFOUND) {
        return absl::InternalError(fmt::format("memcached {}: {}: {}", options_.servers[server].name(),
                                               over ? "cas" : "add", error_text(m, rc)));
      }
      // The id has a record (or had, for a cas): live, the id is known; expired, it is claimed.
      auto read = get(m, server, rk);
      if (!read.ok()) return read.status();
      over.reset();
      if (!read->found) continue;
      const std::optional<Record> r = parse_record(read->value);
      if (!r) {
        return absl::InternalError(fmt::format("memcached {}: the value of {} is not a floodgate reservation",
                                               options_.servers[server].name(), rk));
      }
      if (r->live(now)) {
        known_id = true;
        break;
      }
      over = read->cas;
    }
    if (!known_id) {
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

absl::StatusOr<Decision> MemcachedStorage::settle_record(const Policy& policy, std::string_view key,
                                                         std::string_view id, std::int64_t actual, Micros now,
                                                         bool strict, bool renewal) {
  if (auto s = check_policy(policy, options_.item_size_max); !s.ok()) return s;
  const bool is_lease = detail::leases(policy);
  const std::string rk = reservation_key(options_.prefix, policy, key, id);
  const std::string k = storage_key(options_.prefix, policy, key);
  auto lease = acquire();
  if (!lease.ok()) return lease.status();
  memcached_st* m = lease->get();
  const std::uint32_t server = server_of(m, rk);
  const auto apply = [&](Micros at, std::int64_t delta, std::span<const Micros> marks, SettleOutcome outcome) {
    absl::StatusOr<Decision> d = detail::with_algorithm(policy, [&](auto a) {
      using A = decltype(a);
      return update<A>(m, policy, k, now, nullptr, [&](typename A::State* st) {
        return std::pair<Decision, bool>{detail::settle_all<A>(st, policy.limits(), now, at, marks, delta), delta != 0};
      });
    });
    if (d.ok()) d->settle = outcome;
    return d;
  };
  for (int attempt = 0; attempt < options_.cas_retries; ++attempt) {
    if (auto s = admit(server); !s.ok()) return s;
    auto read = get(m, server, rk);
    if (!read.ok()) return read.status();
    std::optional<Record> r;  // the live record: none when absent or expired on the decision's clock
    if (read->found) {
      r = parse_record(read->value);
      if (!r) {
        return absl::InternalError(fmt::format("memcached {}: the value of {} is not a floodgate reservation",
                                               options_.servers[server].name(), rk));
      }
      if (!r->live(now)) r.reset();
    }
    if (is_lease && (!r || r->kind == 's')) {
      // A lease not outstanding: nothing freed, nothing charged.
      if (strict) return detail::lease_not_outstanding(id);
      return apply(now, 0, {}, r ? SettleOutcome::kAlreadySettled : SettleOutcome::kUnknown);
    }
    if (!r) {
      // Unknown or expired: a settled record first (add, or cas over the expired one: one of two
      // clients wins), then `actual` charged now. Never charged unless remembered.
      const Micros expires = now + kDefaultReservationTtl;
      const std::string tomb = fmt::format("S {}", expires);
      const time_t exp = record_expiration(expires, now);
      const memcached_return_t rc =
          read->found ? memcached_cas(m, rk.data(), rk.size(), tomb.data(), tomb.size(), exp, kValueFlags, read->cas)
                      : memcached_add(m, rk.data(), rk.size(), tomb.data(), tomb.size(), exp, kValueFlags);
      if (auto s = record(m, server, rc); !s.ok()) return s;
      if (rc != MEMCACHED_SUCCESS) continue;  // another client changed it: read again
      return apply(now, actual, {}, SettleOutcome::kUnknown);
    }
    if (r->kind == 's') return apply(now, 0, {}, SettleOutcome::kAlreadySettled);  // the state as it is
    if (is_lease && !detail::lease_alive(policy, r->at, r->marks.empty() ? 0 : r->marks[0], now)) {  // expired, its record not yet gone
      if (strict) return detail::lease_not_outstanding(id);
      return apply(now, 0, {}, SettleOutcome::kUnknown);
    }
    if (renewal) {
      // The record is claimed first ("P": on its way, as a reservation's), then the lease's units
      // move to now, then the record takes their new entry's time as its mark.
      const Micros expires = now + detail::lease_ttl(policy) + 1;
      const std::string pending = fmt::format("P {} {} {}", now, r->estimate, expires);
      const time_t exp = record_expiration(expires, now);
      const memcached_return_t rc =
          memcached_cas(m, rk.data(), rk.size(), pending.data(), pending.size(), exp, kValueFlags, read->cas);
      if (auto s = record(m, server, rc); !s.ok()) return s;
      if (rc != MEMCACHED_SUCCESS) continue;
      std::array<Micros, kMaxLimitsPerPolicy> marks{};
      absl::StatusOr<Decision> d = detail::with_algorithm(policy, [&](auto a) {
        using A = decltype(a);
        return update<A>(m, policy, k, now, nullptr, [&](typename A::State* st) {
          const auto limits = policy.limits();
          detail::settle_all<A>(st, limits, now, r->at, r->marks, -r->estimate);
          for (std::size_t i = 0; i < limits.size(); ++i) A::commit(st[i], limits[i], now, r->estimate);
          detail::marks_of<A>(st, limits, marks);
          Decision dd = detail::as_is<A>(st, limits, now);
          dd.allowed = true;
          return std::pair<Decision, bool>{dd, r->estimate != 0};
        });
      });
      if (!d.ok()) return d;
      std::string v = fmt::format("R {} {} {}", now, r->estimate, expires);
      for (std::size_t i = 0; i < policy.limits().size(); ++i) fmt::format_to(std::back_inserter(v), " {}", marks[i]);
      memcached_set(m, rk.data(), rk.size(), v.data(), v.size(), exp, kValueFlags);  // else "P": at, no mark
      return d;
    }
    if (is_lease) actual = 0;  // a release gives the lease's units back in full
    // Settled until the record's own expiry (a record without the decision's clock: its item's).
    const std::string tomb = fmt::format("{} {}", r->dated ? 'S' : 's', r->expires);
    const time_t exp = r->dated ? record_expiration(r->expires, now)
                                : static_cast<time_t>(std::max<std::int64_t>(1, r->expires));  // absolute Unix time
    const memcached_return_t rc =
        memcached_cas(m, rk.data(), rk.size(), tomb.data(), tomb.size(), exp, kValueFlags, read->cas);
    if (auto s = record(m, server, rc); !s.ok()) return s;
    if (rc != MEMCACHED_SUCCESS) continue;  // another client changed it: read again
    return apply(r->at, actual - r->estimate, r->marks, SettleOutcome::kSettled);
  }
  return absl::AbortedError(fmt::format("memcached {}: the reservation {} changed under {} settles in a row",
                                        options_.servers[server].name(), rk, options_.cas_retries));
}

absl::StatusOr<bool> MemcachedStorage::known(const Policy& policy, std::string_view key, std::string_view id,
                                             Micros now) {
  const std::string rk = reservation_key(options_.prefix, policy, key, id);
  auto lease = acquire();
  if (!lease.ok()) return lease.status();
  memcached_st* m = lease->get();
  const std::uint32_t server = server_of(m, rk);
  if (auto s = admit(server); !s.ok()) return s;
  auto read = get(m, server, rk);
  if (!read.ok()) return read.status();
  if (!read->found) return false;
  const std::optional<Record> r = parse_record(read->value);
  if (!r) {
    return absl::InternalError(fmt::format("memcached {}: the value of {} is not a floodgate reservation",
                                           options_.servers[server].name(), rk));
  }
  return r->live(now);
}

absl::StatusOr<Decision> MemcachedStorage::apply(const Policy& policy, std::string_view key,
                                                 std::int64_t cost, Effect effect, Micros now) {
  if (auto s = check_policy(policy, options_.item_size_max); !s.ok()) return s;
  auto lease = acquire();
  if (!lease.ok()) return lease.status();
  const std::string k = storage_key(options_.prefix, policy, key);
  return detail::with_algorithm(policy, [&](auto a) {
    return decide<decltype(a)>(lease->get(), policy, k, cost, effect, now, nullptr);
  });
}

void MemcachedStorage::apply_batch(std::span<const BatchItem> items, Micros now,
                                   std::span<absl::StatusOr<Decision>> out) {
  if (std::any_of(items.begin(), items.end(), [](const BatchItem& it) { return reserves(it.effect); })) {
    Storage::apply_batch(items, now, out);  // one by one, each with its own client
    return;
  }
  auto lease = acquire();
  if (!lease.ok()) {
    for (auto& o : out) o = lease.status();
    return;
  }
  memcached_st* m = lease->get();
  std::vector<std::string> keys(items.size());
  std::vector<const char*> key_ptrs;
  std::vector<std::size_t> key_lens;
  absl::flat_hash_map<std::string, Got> read;  // distinct keys to read, then their values
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (auto s = check_policy(*items[i].policy, options_.item_size_max); !s.ok()) {
      out[i] = s;
      continue;
    }
    keys[i] = storage_key(options_.prefix, *items[i].policy, items[i].key);
    if (!admit(server_of(m, keys[i])).ok()) continue;  // decide() reports it
    if (read.try_emplace(keys[i]).second) {
      key_ptrs.push_back(keys[i].data());
      key_lens.push_back(keys[i].size());
    }
  }
  // One multi-get. Any failure (some server did not answer) leaves `read` unused: a key missing
  // from the replies would look absent, so every item then reads its own value.
  bool prefetched = false;
  if (!key_ptrs.empty()) {
    memcached_return_t rc = memcached_mget(m, key_ptrs.data(), key_lens.data(), key_ptrs.size());
    if (rc == MEMCACHED_SUCCESS) {
      memcached_result_st result;
      memcached_result_create(m, &result);
      while (memcached_fetch_result(m, &result, &rc) != nullptr) {
        const absl::string_view k(memcached_result_key_value(&result),
                                 memcached_result_key_length(&result));
        if (auto it = read.find(k); it != read.end()) {
          it->second.found = true;
          it->second.value.assign(memcached_result_value(&result), memcached_result_length(&result));
          it->second.cas = memcached_result_cas(&result);
          it->second.flags = memcached_result_flags(&result);
        }
      }
      memcached_result_free(&result);
      prefetched = rc == MEMCACHED_END || rc == MEMCACHED_NOTFOUND || rc == MEMCACHED_SUCCESS;
    }
  }
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (keys[i].empty()) continue;  // refused above
    Got* got = nullptr;
    auto it = prefetched ? read.find(keys[i]) : read.end();
    if (it != read.end()) got = &it->second;
    const BatchItem& item = *(items.begin() + static_cast<std::ptrdiff_t>(i));
    out[i] = detail::with_algorithm(*item.policy, [&](auto a) {
      return decide<decltype(a)>(m, *item.policy, keys[i], item.cost, item.effect, now, got);
    });
    if (it != read.end()) read.erase(it);  // used (and maybe written): a later item reads again
  }
}

absl::Status MemcachedStorage::clear(const Policy& policy, std::string_view key) {
  auto lease = acquire();
  if (!lease.ok()) return lease.status();
  const std::string k = storage_key(options_.prefix, policy, key);
  const std::uint32_t server = server_of(lease->get(), k);
  if (auto s = admit(server); !s.ok()) return s;
  const memcached_return_t rc = memcached_delete(lease->get(), k.data(), k.size(), 0);
  if (auto s = record(lease->get(), server, rc); !s.ok()) return s;
  if (rc != MEMCACHED_SUCCESS && rc != MEMCACHED_NOTFOUND) {
    return absl::InternalError(fmt::format("memcached {}: delete: {}",
                                           options_.servers[server].name(),
                                           error_text(lease->get(), rc)));
  }
  return absl::OkStatus();
}

}  // namespace floodgate::memcached

// ---- open_storage's hook ------------------------------------------------------------------
namespace floodgate {

std::optional<absl::StatusOr<std::shared_ptr<Storage>>> open_memcached_storage(
    const StorageUrl& url, StorageStart start) {
  auto options = memcached::parse_memcached_url(url);
  if (!options) return std::nullopt;
  if (!options->ok()) return absl::StatusOr<std::shared_ptr<Storage>>(options->status());
  auto storage = memcached::MemcachedStorage::open(**std::move(options), start);
  if (!storage.ok()) return absl::StatusOr<std::shared_ptr<Storage>>(storage.status());
  return absl::StatusOr<std::shared_ptr<Storage>>(std::shared_ptr<Storage>(*std::move(storage)));
}

std::optional<absl::StatusOr<PolicyCheck>> check_memcached_storage(const StorageUrl& url) {
  auto options = memcached::parse_memcached_url(url);
  if (!options) return std::nullopt;
  if (!options->ok()) return absl::StatusOr<PolicyCheck>(options->status());
  const std::size_t item_size_max = (*options)->item_size_max;
  return absl::StatusOr<PolicyCheck>(PolicyCheck(
      [item_size_max](const Policy& policy) { return memcached::check_policy(policy, item_size_max); }));
}

}  // namespace floodgate
