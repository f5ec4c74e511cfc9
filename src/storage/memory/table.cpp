// The in-memory storage: per policy, a sharded slab of records {key, state × limits} indexed by a
// flat hash set of record numbers, each shard under its own mutex (the shard: shard.hpp). This
// file decides on the records, adds, sweeps and evicts them.
//
// Why a slab and not absl::flat_hash_map<std::string, State>: the map's 48-byte slots at a load
// factor that halves on every growth cost 55–110 bytes per key; here a key costs its record (the
// states, then a 24-byte RecordKey with the characters inline up to 16) plus a 4-byte index slot,
// and the slab gives the incremental sweep (reclaiming absent entries) and the eviction sampler a
// stable position to walk from. Locking: see locks.hpp; reads without the record's lock:
// snapshot.hpp; a moving window's logs within their bound: log_guard.hpp.
#include "storage/memory/table.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstring>
#include <new>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "floodgate/algorithms.hpp"
#include "storage/decide.hpp"
#include "storage/memory/locks.hpp"
#include "storage/memory/log_guard.hpp"
#include "storage/memory/record.hpp"
#include "storage/memory/shard.hpp"
#include "storage/memory/snapshot.hpp"

namespace floodgate {

// ---- the algorithms: storage/decide.hpp ------------------------------------------------------
namespace {

using detail::Bucket;
using detail::KeyWords;
using detail::RecordKey;
using detail::Remembered;
using detail::FixedClock;
using detail::FixedFirstHit;
using detail::Moving;
using detail::Sliding;
using detail::HashedKey;
using detail::Shard;
using detail::Snapshot;
using detail::hash_key;
using detail::log_bytes;

// Records absent for less than this are not reclaimed by the sweep that each insertion makes (at
// the key bound they are): a key hit again within a second of going absent keeps its record, where
// reclaiming it at once made every decision of a busy bucket or GCRA key a removal and an insertion
// under the shard's exclusive lock (two threads were slower than one).
constexpr Micros kReclaimAfter = kMicrosPerSecond;

// Policies that requests create (inline limits, limit overrides) are many and mostly small.
std::size_t shards_of(const Policy& policy, const MemoryStorageOptions& options) {
  const bool made_by_request = policy.kind() == PolicyKind::kInline || policy.kind() == PolicyKind::kRuleOverride;
  return made_by_request ? options.request_policy_shards : options.shards;
}

constexpr std::size_t round_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

constexpr std::size_t kRememberedRecords = 4;
thread_local std::array<Remembered, kRememberedRecords> t_records;
std::atomic<std::uint64_t> g_table_numbers{1};

template <class A>
class TableImpl final : public MemoryStorage::Table {
  using S = typename A::State;
  static constexpr std::size_t kAlign = std::max(alignof(RecordKey), alignof(S));
  static_assert(kAlign <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);

 public:
  TableImpl(const Policy& policy, const MemoryStorageOptions& options, LogPools* logs)
      : logs_(logs),
        k_(policy.limits().size()),
        key_offset_(round_up(k_ * sizeof(S), alignof(RecordKey))),
        stride_(round_up(key_offset_ + sizeof(RecordKey), kAlign)),
        shard_bits_(static_cast<unsigned>(
            std::countr_zero(std::bit_ceil(std::max<std::size_t>(1, shards_of(policy, options)))))),
        shard_count_(std::size_t{1} << shard_bits_),
        per_shard_cap_(std::max<std::size_t>(1, options.max_keys / shard_count_)),
        shards_(std::make_unique<Shard[]>(shard_count_)),
        number_(g_table_numbers.fetch_add(1, std::memory_order_relaxed)) {
    for (std::size_t i = 0; i < shard_count_; ++i) {
      shards_[i].stride = stride_;
      shards_[i].key_offset = key_offset_;
    }
  }

  ~TableImpl() override {
    for (std::size_t i = 0; i < shard_count_; ++i) {
      Shard& sh = shards_[i];
      for (std::uint32_t r = 0; r < sh.used; ++r) {
        if (sh.is_live(r)) destroy(sh, r);
      }
    }
  }

  absl::StatusOr<Decision> apply(const Policy& policy, std::string_view key, std::int64_t cost,
                                 Effect effect, Micros now) override {
    const std::span<const Limit> limits = policy.limits();
    // On a record's states (under its lock) or on a new key's (`fresh`, a local array).
    const auto decide = [&](S* st) __attribute__((always_inline)) -> absl::StatusOr<Decision> {
      if constexpr (kLogs) {
        if (logs_ != nullptr && effect == Effect::kHit && cost > 0) return decide_within(st, limits, policy.shape(), cost, now);
      }
      return detail::decide<A>(st, limits, policy.shape(), cost, effect, now);
    };
    if constexpr (kOptimistic) {
      // Every decision is one of detail::decide's, built where apply returns it.
      if (key.size() <= RecordKey::kMaxSize) return decide_any(policy, key, cost, effect, now);
    }
    Remembered& memo = t_records[number_ % kRememberedRecords];
    if (memo.may_hold(number_, key)) {
      // Fastest path: the key this thread decided on last, if its record still holds it.
      RecordKey& rk = key_at(memo.record);
      detail::RecordGuard guard(rk.word);
      if (rk.holds(key)) return decide(states_at(memo.record));
    }
    const HashedKey hk{key, hash_key(key)};
    Shard& sh = shard_for(hk);
    {
      // Fast path: a known key, under the shard's shared mode and the record's own lock.
      detail::SharedGuard shared(sh.lock);
      const auto it = sh.index.find(hk);
      if (it != sh.index.end()) {
        memo.remember(number_, key, sh.record(*it));
        RecordKey& rk = sh.key(*it);
        detail::RecordGuard guard(rk.word);
        return decide(states(sh, *it));
      }
      if (effect != Effect::kHit || cost == 0) {
        std::array<S, kMaxLimitsPerPolicy> fresh;  // default member initialisers: absent
        return detail::decide<A>(fresh.data(), limits, policy.shape(), cost, effect, now);
      }
    }
    if (key.size() > RecordKey::kMaxSize) [[unlikely]] {
      return absl::InvalidArgumentError("the memory storage holds keys of up to 2^31 - 2 bytes");
    }
    // A new key: exclusive mode, look again (another thread may have added it), then add it.
    std::lock_guard<detail::BigReaderLock> exclusive(sh.lock);
    if (const auto it = sh.index.find(hk); it != sh.index.end()) {
      detail::RecordGuard guard(sh.key(*it).word);  // a thread that remembered it may be in it
      return decide(states(sh, *it));
    }
    std::array<S, kMaxLimitsPerPolicy> fresh;
    absl::StatusOr<Decision> d = decide(fresh.data());
    if (d.ok() && d->allowed) {  // a denied (or refused) request for an absent key stores nothing
      allocate(sh, key, limits, now, fresh.data());
    }
    return d;
  }

  absl::StatusOr<Decision> reserve(const Policy& policy, std::string_view key, std::int64_t cost, Micros now,
                                   std::span<Micros> marks) override {
    const Limits limits = policy.limits();
    return on_record(key, limits, now, [&](S* st) -> std::pair<absl::StatusOr<Decision>, bool> {
      absl::StatusOr<Decision> d;
      if constexpr (kLogs) {
        if (logs_ != nullptr && cost > 0) {
          d = decide_within(st, limits, policy.shape(), cost, now);
        } else {
          d = detail::decide<A>(st, limits, policy.shape(), cost, Effect::kHit, now);
        }
      } else {
        d = detail::decide<A>(st, limits, policy.shape(), cost, Effect::kHit, now);
      }
      const bool admitted = d.ok() && d->allowed;
      if (admitted) detail::marks_of<A>(st, limits, marks);
      return {std::move(d), admitted && cost > 0};
    });
  }

  absl::StatusOr<Decision> settle(const Policy& policy, std::string_view key, Micros now, Micros at,
                                  std::span<const Micros> marks, std::int64_t delta) override {
    const Limits limits = policy.limits();
    return on_record(key, limits, now, [&](S* st) -> std::pair<absl::StatusOr<Decision>, bool> {
      std::int64_t before = 0;
      if constexpr (kLogs) before = log_bytes(st, k_);
      Decision d = detail::settle_all<A>(st, limits, now, at, marks, delta);
      if constexpr (kLogs) {
        const std::int64_t change = log_bytes(st, k_) - before;
        if (logs_ != nullptr && change > 0) logs_->charge(change);
        if (logs_ != nullptr && change < 0) logs_->release(-change);
      }
      return {d, delta > 0};
    });
  }

  absl::StatusOr<Decision> renew(const Policy& policy, std::string_view key, Micros now, Micros at,
                                 std::span<const Micros> marks, std::int64_t units,
                                 std::span<Micros> new_marks) override {
    const Limits limits = policy.limits();
    return on_record(key, limits, now, [&](S* st) -> std::pair<absl::StatusOr<Decision>, bool> {
      std::int64_t before = 0;
      if constexpr (kLogs) before = log_bytes(st, k_);
      detail::settle_all<A>(st, limits, now, at, marks, -units);
      // Charged again as a commit at `now` (never refused: the units were held), so that the marks
      // name the entries that hold them.
      for (std::size_t i = 0; i < limits.size(); ++i) A::commit(st[i], limits[i], now, units);
      detail::marks_of<A>(st, limits, new_marks);
      Decision d = detail::as_is<A>(st, limits, now);
      d.allowed = true;
      if constexpr (kLogs) {
        const std::int64_t change = log_bytes(st, k_) - before;
        if (logs_ != nullptr && change > 0) logs_->charge(change);
        if (logs_ != nullptr && change < 0) logs_->release(-change);
      }
      return {d, units > 0};
    });
  }

  void clear(std::string_view key) override {
    const HashedKey hk{key, hash_key(key)};
    Shard& sh = shard_for(hk);
    std::lock_guard<detail::BigReaderLock> exclusive(sh.lock);
    const auto it = sh.index.find(hk);
    if (it != sh.index.end()) remove(sh, *it);
  }

  [[nodiscard]] std::size_t size() const override {
    std::size_t n = 0;
    for (std::size_t i = 0; i < shard_count_; ++i) {
      detail::SharedGuard shared(shards_[i].lock);
      n += shards_[i].index.size();
    }
    return n;
  }

 private:
  using Limits = std::span<const Limit>;
  // A moving window's states hold logs whose buffers grow with the hits: kept within logs_.
  static constexpr bool kLogs = std::is_same_v<A, Moving>;
  // Plain states (all but the moving window's, whose logs live on the heap): read without the
  // record's lock by RecordLock's reader protocol, so that a decision that writes nothing (a
  // denial, a test) makes no write to the record.
  static constexpr bool kOptimistic = !kLogs && std::is_trivially_copyable_v<S> && sizeof(S) % 8 == 0 &&
                                      alignof(S) == 8;

  // A decision on a record's states under its lock (kOptimistic: in place; readers without the
  // lock check the word after they copy).
  Decision decide_locked(S* st, Limits limits, bool shape, std::int64_t cost, Effect effect, Micros now) const {
    return detail::decide<A>(st, limits, shape, cost, effect, now);
  }

  using Reading = detail::Reading<S>;

  // apply for kOptimistic tables (and keys of up to kMaxSize). A decision that writes nothing
  // reads the record without its lock (a snapshot: RecordLock's reader protocol) and writes
  // nothing; one that writes commits what it evaluated on the snapshot if it takes the lock before
  // any other holder did, else decides again under the lock. Every path returns detail::decide's
  // result as a prvalue (or one named result), so that the decision is built where apply returns
  // it: a copy of a decision just written costs a store-forwarding stall, or a `rep movs`.
  Decision decide_any(const Policy& policy, std::string_view key, std::int64_t cost, Effect effect, Micros now) {
    Remembered& memo = t_records[number_ % kRememberedRecords];
    if (memo.may_hold(number_, key)) {
      // Fastest path: the key this thread decided on last, if its record still holds it.
      RecordKey& rk = key_at(memo.record);
      S* st = states_at(memo.record);
      if (key.size() <= RecordKey::kInline) {
        Reading r;
        const Snapshot taken = detail::snapshot(rk, &memo.words, key.size(), st, k_, r);
        if (taken == Snapshot::kTaken) return decide_on(rk, st, r, true, policy, key, cost, effect, now);
        if (taken == Snapshot::kOtherKey) return decide_indexed(policy, key, cost, effect, now);
      }
      detail::RecordGuard guard(rk.word);
      if (rk.holds(key)) return decide_locked(st, policy.limits(), policy.shape(), cost, effect, now);
    }
    return decide_indexed(policy, key, cost, effect, now);
  }

  // On a snapshot of a record that held the key (the caller's `r`); `remembered`: a record found
  // without the index, which may hold another key once the snapshot is gone.
  Decision decide_on(RecordKey& rk, S* st, Reading& r, bool remembered, const Policy& policy, std::string_view key,
                     std::int64_t cost, Effect effect, Micros now) {
    Decision out = detail::decide<A>(r.copy(), policy.limits(), policy.shape(), cost, effect, now);
    if (!(out.allowed && effect == Effect::kHit)) return out;
    if (detail::RecordLock::try_lock_from(rk.word, r.word)) {
      std::memcpy(static_cast<void*>(st), r.copy(), k_ * sizeof(S));  // the holder's write: plain
      detail::RecordLock::unlock(rk.word);
      return out;
    }
    // Another holder came in between: decide again on what it left.
    bool holds;
    {
      detail::RecordGuard guard(rk.word);
      holds = !remembered || rk.holds(key);
      if (holds) out = decide_locked(st, policy.limits(), policy.shape(), cost, effect, now);
    }
    if (!holds) out = decide_indexed(policy, key, cost, effect, now);
    return out;
  }

  // Through the index: a known key (snapshot, or under the record's lock), or a new one.
  Decision decide_indexed(const Policy& policy, std::string_view key, std::int64_t cost, Effect effect, Micros now) {
    const std::span<const Limit> limits = policy.limits();
    const HashedKey hk{key, hash_key(key)};
    Shard& sh = shard_for(hk);
    {
      detail::SharedGuard shared(sh.lock);
      const auto it = sh.index.find(hk);
      if (it != sh.index.end()) {
        t_records[number_ % kRememberedRecords].remember(number_, key, sh.record(*it));
        RecordKey& rk = sh.key(*it);
        S* st = states(sh, *it);
        Reading r;
        if (detail::snapshot(rk, nullptr, 0, st, k_, r) == Snapshot::kTaken) {
          return decide_on(rk, st, r, false, policy, key, cost, effect, now);
        }
        detail::RecordGuard guard(rk.word);
        return decide_locked(st, limits, policy.shape(), cost, effect, now);
      }
      if (effect != Effect::kHit || cost == 0) {
        std::array<S, kMaxLimitsPerPolicy> fresh;  // default member initialisers: absent
        return detail::decide<A>(fresh.data(), limits, policy.shape(), cost, effect, now);
      }
    }
    // A new key: exclusive mode, look again (another thread may have added it), then add it.
    std::lock_guard<detail::BigReaderLock> exclusive(sh.lock);
    if (const auto it = sh.index.find(hk); it != sh.index.end()) {
      detail::RecordGuard guard(sh.key(*it).word);  // a thread that remembered it may be in it
      return decide_locked(states(sh, *it), limits, policy.shape(), cost, effect, now);
    }
    std::array<S, kMaxLimitsPerPolicy> fresh;
    Decision d = detail::decide<A>(fresh.data(), limits, policy.shape(), cost, effect, now);
    if (d.allowed) allocate(sh, key, limits, now, fresh.data());  // a denied request stores nothing
    return d;
  }

  // A hit on a moving window's states, under the record's lock: the bytes its logs would grow by
  // are reserved before the commit, and the hit refused (nothing committed) if they do not fit.
  [[gnu::always_inline]] absl::StatusOr<Decision> decide_within(S* st, Limits limits, bool shape, std::int64_t cost,
                                                               Micros now) {
    detail::LogGuard guard{*logs_, k_};
    absl::StatusOr<Decision> d = detail::decide<A>(st, limits, shape, cost, Effect::kHit, now, guard);
    if (guard.full != nullptr || guard.too_long) [[unlikely]] d = guard.refusal();
    return d;  // the one object returned: built in place
  }

  Shard& shard_for(const HashedKey& k) const {
    return shards_[shard_bits_ == 0 ? 0 : (k.hash >> (64 - shard_bits_))];
  }

  S* states(const Shard& sh, std::uint32_t r) const { return states_at(sh.record(r)); }
  static S* states_at(std::byte* record) { return std::launder(reinterpret_cast<S*>(record)); }
  RecordKey& key_at(std::byte* record) const {
    return *std::launder(reinterpret_cast<RecordKey*>(record + key_offset_));
  }

  // The time from which the whole record is absent, by the limits of the decision at hand (a
  // policy whose amounts changed shares the table: Policy::state_id); the sampler evicts the
  // earliest.
  // Exclusive mode; under the record's lock, since a thread that remembered the record decides
  // on it without the shard's lock.
  [[nodiscard]] Micros absent_from(const Shard& sh, std::uint32_t r, Limits limits) const {
    std::atomic<std::uint64_t>& word = sh.key(r).word;
    detail::RecordLock::lock(word);
    const S* st = states(sh, r);
    Micros t = 0;
    for (std::size_t i = 0; i < k_; ++i) t = std::max(t, A::expires_at(st[i], limits[i]));
    detail::RecordLock::unlock(word);
    return t;
  }

  // Exclusive mode. Examines up to `steps` records from the cursor and reclaims those absent for
  // at least `grace`.
  void sweep(Shard& sh, Limits limits, Micros now, int steps, Micros grace) {
    for (int i = 0; i < steps && sh.used > 0; ++i) {
      const std::uint32_t r = sh.next_position();
      if (sh.is_live(r) && absent_from(sh, r, limits) <= now - grace) {
        remove(sh, r);
        reclaimed.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }

  // Exclusive mode, at the key bound: reclaim absent records near the cursor, else evict the
  // record closest to absent among a sample of eight.
  void make_room(Shard& sh, Limits limits, Micros now) {
    sweep(sh, limits, now, 16, 0);
    if (sh.index.size() < per_shard_cap_) return;
    const detail::Victim v = sh.sample(8, [&](std::uint32_t r) { return absent_from(sh, r, limits); });
    if (v.sampled > 0) {
      remove(sh, v.record);
      (v.absent_from <= now ? reclaimed : evictions).fetch_add(1, std::memory_order_relaxed);
    }
  }

  // Exclusive mode: a new record for `key` holding `fresh` (k states, moved in). A reused record
  // is written under its lock: a thread that remembered it may be looking at it.
  void allocate(Shard& sh, std::string_view key, Limits limits, Micros now, S* fresh) {
    if (sh.index.size() >= per_shard_cap_) {
      make_room(sh, limits, now);
    } else {
      sweep(sh, limits, now, 2, kReclaimAfter);
    }
    const std::uint32_t r = sh.take_record();
    RecordKey& k = sh.key(r);
    detail::RecordLock::lock(k.word);
    S* st = states(sh, r);
    for (std::size_t i = 0; i < k_; ++i) new (st + i) S(std::move(fresh[i]));
    k.assign(key);
    detail::RecordLock::unlock(k.word);
    sh.set_live(r, true);
    sh.index.insert(r);
  }

  // Runs `f` on the key's states under the record's lock: those of its record, or fresh (absent)
  // states, kept in a new record when `f` says so (its second result). The plain lookup of
  // `apply`, without the thread's remembered record.
  template <class F>
  absl::StatusOr<Decision> on_record(std::string_view key, Limits limits, Micros now, F&& f) {
    if constexpr (kLogs) {
      // A settle charges past the bounds (never refused): a log past EntryLog::kMaxCapacity is all
      // it cannot take.
      try {
        return on_record_unchecked(key, limits, now, std::forward<F>(f));
      } catch (const std::length_error& e) {
        return absl::ResourceExhaustedError(e.what());
      }
    } else {
      return on_record_unchecked(key, limits, now, std::forward<F>(f));
    }
  }
  template <class F>
  absl::StatusOr<Decision> on_record_unchecked(std::string_view key, Limits limits, Micros now, F&& f) {
    const HashedKey hk{key, hash_key(key)};
    Shard& sh = shard_for(hk);
    {
      detail::SharedGuard shared(sh.lock);
      if (const auto it = sh.index.find(hk); it != sh.index.end()) {
        detail::RecordGuard guard(sh.key(*it).word);
        return f(states(sh, *it)).first;
      }
    }
    if (key.size() > RecordKey::kMaxSize) [[unlikely]] {
      return absl::InvalidArgumentError("the memory storage holds keys of up to 2^31 - 2 bytes");
    }
    std::lock_guard<detail::BigReaderLock> exclusive(sh.lock);
    if (const auto it = sh.index.find(hk); it != sh.index.end()) {
      detail::RecordGuard guard(sh.key(*it).word);
      return f(states(sh, *it)).first;
    }
    std::array<S, kMaxLimitsPerPolicy> fresh;
    auto [d, keep] = f(fresh.data());  // fresh states left out hold nothing (nothing committed)
    if (keep) allocate(sh, key, limits, now, fresh.data());
    return std::move(d);
  }

  // Exclusive mode, or the table's destruction. The record's memory stays (its lock word too).
  void destroy(Shard& sh, std::uint32_t r) {
    RecordKey& k = sh.key(r);
    detail::RecordLock::lock(k.word);
    S* st = states(sh, r);
    if constexpr (kLogs) {
      if (logs_ != nullptr) logs_->release(log_bytes(st, k_));
    }
    for (std::size_t i = 0; i < k_; ++i) st[i].~S();
    k.release();
    detail::RecordLock::unlock(k.word);
    sh.set_live(r, false);
  }

  // Exclusive mode.
  void remove(Shard& sh, std::uint32_t r) {
    sh.index.erase(r);  // hashes the key: before destroying it
    destroy(sh, r);
    sh.free.push_back(r);
  }

  LogPools* const logs_;
  const std::size_t k_;  // limits per record: the same for every policy of the state id
  const std::size_t key_offset_;
  const std::size_t stride_;
  const unsigned shard_bits_;
  const std::size_t shard_count_;
  const std::size_t per_shard_cap_;
  std::unique_ptr<Shard[]> shards_;
  const std::uint64_t number_;  // names the table in t_records
};


}  // namespace

std::unique_ptr<MemoryStorage::Table> make_table(const Policy& policy, const MemoryStorageOptions& options,
                                                 LogPools* logs) {
  return detail::with_algorithm(policy, [&](auto a) -> std::unique_ptr<MemoryStorage::Table> {
    return std::make_unique<TableImpl<decltype(a)>>(policy, options, logs);
  });
}

}  // namespace floodgate
