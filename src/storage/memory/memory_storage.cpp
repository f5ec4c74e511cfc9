// The in-memory storage: a directory of per-policy tables (table.hpp) by state id, under a
// big-reader lock. A decision holds the directory in shared mode (a per-thread counter, no shared
// cache line written) while it uses a table, so a table is freed only when no decision is in it.
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

namespace {

// Tables are found by the policy's precomputed state id hash, and the state id compared: a
// policy whose amounts changed finds the table of its old limits, and its state.
struct StateIdHash {
  using is_transparent = void;
  std::size_t operator()(const std::string& f) const { return std::hash<std::string>{}(f); }
  std::size_t operator()(const Policy* p) const { return p->state_id_hash(); }
};
struct StateIdEq {
  using is_transparent = void;
  bool operator()(const std::string& a, const std::string& b) const { return a == b; }
  bool operator()(const std::string& a, const Policy* b) const { return a == b->state_id(); }
  bool operator()(const Policy* a, const std::string& b) const { return a->state_id() == b; }
};

constexpr Micros kSweepEvery = kMicrosPerSecond;
constexpr Micros kTouchEvery = kMicrosPerSecond;
constexpr Micros kMaxLifetime = Micros{100} * 365 * 24 * 3600 * kMicrosPerSecond;

// How long a key's state can outlive its last hit: a window lasts a period (the sliding window
// counter also weighs the one before), a bucket refills its capacity at amount per period.
Micros lifetime_of(const Policy& policy) {
  int128 longest = 0;
  for (const Limit& l : policy.limits()) {
    const int128 refill = (static_cast<int128>(l.capacity()) + l.amount - 1) / l.amount;
    longest = std::max(longest, static_cast<int128>(l.period) * (2 + refill));
  }
  return static_cast<Micros>(std::min<int128>(longest, kMaxLifetime));
}

// Directory states are numbered process-wide: a number names one directory's set of tables
// between two removals, so a thread's remembered table is still alive while the number is.
std::atomic<std::uint64_t> g_next_generation{1};
std::uint64_t next_generation() { return g_next_generation.fetch_add(1, std::memory_order_relaxed); }

// What this thread last found, per policy object (Policy::serial): a decision on a policy seen
// before skips the directory's hash lookup and its fingerprint comparison.
struct Remembered {
  std::uint64_t serial = 0;
  std::uint64_t generation = 0;
  MemoryStorage::Table* table = nullptr;
};
constexpr std::size_t kRemembered = 4;
thread_local std::array<Remembered, kRemembered> t_remembered;

// Notes a use of `t` by `policy` at `now`: the time at most once a second, and the policy's
// lifetime when its amounts differ from the last policy's (they share the state: state_id).
[[gnu::always_inline]] inline void touch(MemoryStorage::Table& t, const Policy& policy, Micros now) {
  if (now - t.last_used.load(std::memory_order_relaxed) >= kTouchEvery) {
    t.last_used.store(now, std::memory_order_relaxed);
  }
  if (t.lifetime_of_hash.load(std::memory_order_relaxed) != policy.fingerprint_hash()) {
    const Micros lifetime = lifetime_of(policy);
    Micros was = t.lifetime.load(std::memory_order_relaxed);
    while (was < lifetime && !t.lifetime.compare_exchange_weak(was, lifetime)) {
    }
    t.lifetime_of_hash.store(policy.fingerprint_hash(), std::memory_order_relaxed);
  }
}

}  // namespace

struct MemoryStorage::Directory {
  explicit Directory(const MemoryStorageOptions& o)
      : all_logs(o.max_log_bytes), request_logs(o.max_request_log_bytes) {}
  // Before the tables: a table gives its logs' bytes back as it goes.
  LogPool all_logs;
  LogPool request_logs;
  std::atomic<std::uint64_t> log_refusals{0};
  LogPools configured_logs{&all_logs, nullptr, &log_refusals};
  LogPools request_made_logs{&all_logs, &request_logs, &log_refusals};

  mutable detail::RareWriterLock lock;  // written on adding and freeing a table only
  absl::flat_hash_map<std::string, std::unique_ptr<Table>, StateIdHash, StateIdEq> tables;
  std::atomic<std::uint64_t> generation{next_generation()};  // new on every removal of a table
  std::atomic<Micros> next_sweep{0};
  std::atomic<std::uint64_t> evicted{0};     // tables freed at max_policies
  std::atomic<std::uint64_t> freed{0};       // idle tables freed
  std::atomic<std::uint64_t> evictions{0};   // keys, of tables already freed
  std::atomic<std::uint64_t> reclaimed{0};   // likewise
  std::size_t request_tables = 0;  // exclusive mode: tables with made_by_request

  Table* find(const Policy& policy) const {
    const auto it = tables.find(&policy);
    return it == tables.end() ? nullptr : it->second.get();
  }

  // Shared or exclusive mode: find, through what this thread remembers.
  Table* find_remembered(const Policy& policy) const {
    Remembered& r = t_remembered[policy.serial() % kRemembered];
    const std::uint64_t now_generation = generation.load(std::memory_order_relaxed);
    if (r.serial == policy.serial() && r.generation == now_generation) return r.table;
    Table* t = find(policy);
    if (t != nullptr) r = {policy.serial(), now_generation, t};
    return t;
  }

  // Exclusive mode: frees a table, keeping its counts.
  void erase(decltype(tables)::iterator it) {
    evictions.fetch_add(it->second->evictions.load(std::memory_order_relaxed), std::memory_order_relaxed);
    reclaimed.fetch_add(it->second->reclaimed.load(std::memory_order_relaxed), std::memory_order_relaxed);
    if (it->second->made_by_request) --request_tables;
    tables.erase(it);
    generation.store(next_generation(), std::memory_order_relaxed);
  }

  // Exclusive mode: gives back the directory's slots once mostly empty (a flood's thousands of
  // tables gone, their slots would stay: an absl map never shrinks by itself).
  void shrink() {
    if (tables.size() * 4 < tables.capacity()) tables.rehash(0);
  }

  // Exclusive mode: frees every table idle past its lifetime.
  std::size_t free_idle(Micros now) {
    std::size_t n = 0;
    for (auto it = tables.begin(); it != tables.end();) {
      const Table& t = *it->second;
      const Micros lifetime = t.lifetime.load(std::memory_order_relaxed);
      if (now - t.last_used.load(std::memory_order_relaxed) > lifetime + kTouchEvery) {
        erase(it++);
        ++n;
      } else {
        ++it;
      }
    }
    freed.fetch_add(n, std::memory_order_relaxed);
    if (n > 0) shrink();
    return n;
  }

  // Exclusive mode: makes room for one more table: idle tables first, then the one used least
  // recently, among the request-made tables when `by_request` (a client's flood never frees a
  // configured policy's table), else among all.
  void make_room(bool by_request, std::size_t max_request, std::size_t max, Micros now) {
    const auto full = [&] { return by_request ? request_tables >= max_request : tables.size() >= max; };
    if (!full()) return;
    free_idle(now);
    while (full() && !tables.empty()) {
      auto oldest = tables.end();
      for (auto it = tables.begin(); it != tables.end(); ++it) {
        if (by_request && !it->second->made_by_request) continue;
        if (oldest == tables.end() || it->second->last_used.load(std::memory_order_relaxed) <
                                          oldest->second->last_used.load(std::memory_order_relaxed)) {
          oldest = it;
        }
      }
      if (oldest == tables.end()) return;
      erase(oldest);
      evicted.fetch_add(1, std::memory_order_relaxed);
    }
  }
};

MemoryStorage::MemoryStorage(MemoryStorageOptions options)
    : options_(options),
      dir_(std::make_unique<Directory>(options_)),
      reservations_(std::make_unique<Reservations>(options.max_reservations)) {
  options_.max_policies = std::max<std::size_t>(1, options_.max_policies);
  options_.max_request_policies = std::max<std::size_t>(1, options_.max_request_policies);
  options_.request_policy_shards = std::max<std::size_t>(1, options_.request_policy_shards);
}

MemoryStorage::~MemoryStorage() = default;

absl::StatusOr<Decision> MemoryStorage::apply(const Policy& policy, std::string_view key,
                                              std::int64_t cost, Effect effect, Micros now) {
  bool known = false;
  {
    detail::SharedGuard shared(dir_->lock);
    if (Table* t = dir_->find_remembered(policy)) {
      known = true;
      touch(*t, policy, now);
      Micros due = dir_->next_sweep.load(std::memory_order_relaxed);
      if (now < due || !dir_->next_sweep.compare_exchange_strong(due, now + kSweepEvery)) {
        return t->apply(policy, key, cost, effect, now);
      }
    }
  }
  if (known) {
    // One decision a second sweeps the idle tables first, outside the directory's shared mode
    // (the table in use was just touched: it is not idle), then decides as any other.
    collect(now);
    return apply(policy, key, cost, effect, now);
  }
  if (effect != Effect::kHit || cost == 0) {
    // Nothing to store for a policy without a table: decide on a scratch table of one shard.
    MemoryStorageOptions scratch = options_;
    scratch.shards = scratch.request_policy_shards = 1;
    return make_table(policy, scratch, nullptr)->apply(policy, key, cost, effect, now);
  }
  return add_and_apply(policy, key, cost, effect, now);
}

// A policy without a table: exclusive mode, make room, add its table and decide in it.
absl::StatusOr<Decision> MemoryStorage::add_and_apply(const Policy& policy, std::string_view key, std::int64_t cost,
                                      Effect effect, Micros now) {
  return in_table(policy, now, true, [&](Table& t) { return t.apply(policy, key, cost, effect, now); });
}

absl::StatusOr<Decision> MemoryStorage::in_table(const Policy& policy, Micros now, bool create,
                                                absl::FunctionRef<absl::StatusOr<Decision>(Table&)> f) {
  {
    detail::SharedGuard shared(dir_->lock);
    if (Table* t = dir_->find(policy)) {
      touch(*t, policy, now);
      return f(*t);
    }
  }
  if (!create) {
    MemoryStorageOptions scratch = options_;
    scratch.shards = scratch.request_policy_shards = 1;
    return f(*make_table(policy, scratch, nullptr));
  }
  // Exclusive mode: make room, add the table, then `f` runs in it.
  std::lock_guard<detail::RareWriterLock> exclusive(dir_->lock);
  Table* t = dir_->find(policy);
  if (t == nullptr) {
    const bool by_request = policy.kind() == PolicyKind::kInline || policy.kind() == PolicyKind::kRuleOverride;
    dir_->make_room(by_request, options_.max_request_policies, options_.max_policies, now);
    if (by_request) dir_->make_room(false, 0, options_.max_policies, now);
    auto made = make_table(policy, options_, by_request ? &dir_->request_made_logs : &dir_->configured_logs);
    made->lifetime = lifetime_of(policy);
    made->made_by_request = by_request;
    made->lifetime_of_hash = policy.fingerprint_hash();
    dir_->request_tables += by_request ? 1 : 0;
    t = made.get();
    dir_->tables.emplace(policy.state_id(), std::move(made));
  }
  t->last_used.store(now, std::memory_order_relaxed);
  touch(*t, policy, now);
  return f(*t);
}

std::size_t MemoryStorage::reservations() const noexcept { return reservations_->size(); }

std::uint64_t MemoryStorage::reservation_refusals() const noexcept { return reservations_->refusals(); }

void MemoryStorage::maintain(Micros now) {
  collect(now);
  reservations_->collect(now);
}

std::size_t MemoryStorage::collect(Micros now) {
  {
    detail::SharedGuard shared(dir_->lock);
    const bool any = std::any_of(dir_->tables.begin(), dir_->tables.end(), [now](const auto& e) {
      return now - e.second->last_used.load(std::memory_order_relaxed) > e.second->lifetime.load(std::memory_order_relaxed) + kTouchEvery;
    });
    if (!any) return 0;  // the common case takes no exclusive mode
  }
  std::lock_guard<detail::RareWriterLock> exclusive(dir_->lock);
  return dir_->free_idle(now);
}

void MemoryStorage::forget(const Policy& policy) {
  std::lock_guard<detail::RareWriterLock> exclusive(dir_->lock);
  const auto it = dir_->tables.find(&policy);
  if (it == dir_->tables.end()) return;
  dir_->erase(it);
  dir_->freed.fetch_add(1, std::memory_order_relaxed);
  dir_->shrink();
}

absl::Status MemoryStorage::clear(const Policy& policy, std::string_view key) {
  detail::SharedGuard shared(dir_->lock);
  if (Table* t = dir_->find(policy)) t->clear(key);
  return absl::OkStatus();
}

std::size_t MemoryStorage::size(const Policy& policy) const {
  detail::SharedGuard shared(dir_->lock);
  const Table* t = dir_->find(policy);
  return t == nullptr ? 0 : t->size();
}

std::size_t MemoryStorage::policies() const {
  detail::SharedGuard shared(dir_->lock);
  return dir_->tables.size();
}

std::size_t MemoryStorage::policy_slots() const {
  detail::SharedGuard shared(dir_->lock);
  return dir_->tables.capacity();
}

std::uint64_t MemoryStorage::policies_evicted() const noexcept {
  return dir_->evicted.load(std::memory_order_relaxed);
}

std::uint64_t MemoryStorage::policies_freed() const noexcept {
  return dir_->freed.load(std::memory_order_relaxed);
}

std::uint64_t MemoryStorage::evictions() const noexcept {
  detail::SharedGuard shared(dir_->lock);
  std::uint64_t n = dir_->evictions.load(std::memory_order_relaxed);
  for (const auto& [f, t] : dir_->tables) n += t->evictions.load(std::memory_order_relaxed);
  return n;
}

std::uint64_t MemoryStorage::reclaimed() const noexcept {
  detail::SharedGuard shared(dir_->lock);
  std::uint64_t n = dir_->reclaimed.load(std::memory_order_relaxed);
  for (const auto& [f, t] : dir_->tables) n += t->reclaimed.load(std::memory_order_relaxed);
  return n;
}

std::size_t MemoryStorage::log_bytes() const noexcept {
  return static_cast<std::size_t>(dir_->all_logs.used.load(std::memory_order_relaxed));
}

std::size_t MemoryStorage::request_log_bytes() const noexcept {
  return static_cast<std::size_t>(dir_->request_logs.used.load(std::memory_order_relaxed));
}

std::uint64_t MemoryStorage::log_refusals() const noexcept {
  return dir_->log_refusals.load(std::memory_order_relaxed);
}

std::vector<StorageCounter> MemoryStorage::counters() const {
  return {{"floodgate_memory_evictions_total", "Keys evicted at the max_keys bound.", evictions()},
          {"floodgate_memory_reclaimed_total", "Absent keys reclaimed.", reclaimed()},
          {"floodgate_memory_policies_evicted_total",
           "Policy tables freed at the max_policies bound while their state was live.", policies_evicted()},
          {"floodgate_memory_policies_freed_total", "Idle policy tables freed (their state had expired).",
           policies_freed()},
          {"floodgate_memory_log_refusals_total",
           "Hits refused because a moving-window log would have grown past max_log_bytes or max_request_log_bytes.",
           log_refusals()},
          {"floodgate_memory_log_bytes", "Bytes of moving-window log buffers held (bound: max_log_bytes).",
           log_bytes(), true},
          {"floodgate_memory_request_log_bytes",
           "Bytes of the moving-window logs of inline limits and limit overrides (bound: max_request_log_bytes).",
           request_log_bytes(), true},
          {"floodgate_memory_reservations", "Reservations remembered (outstanding, or settled within their ttl; bound: max_reservations).",
           reservations(), true},
          {"floodgate_memory_reservation_refusals_total", "Reservations refused at the max_reservations bound.",
           reservation_refusals()}};
}

}  // namespace floodgate
