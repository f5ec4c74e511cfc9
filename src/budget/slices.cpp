#include "budget/slices.hpp"

#include <algorithm>
#include <mutex>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"

namespace floodgate::budget {

namespace {
// A settle is sent only this long after the slice ended; the reservation lives a second longer
// than that, so that a settle never reaches a storage that forgot the id (it would charge the
// units used a second time) even with a storage clock up to a second ahead of this one.
constexpr Micros kSettleGrace = kMicrosPerSecond;

std::string lease_id() {
  thread_local std::mt19937_64 gen{std::random_device{}()};
  return absl::StrCat("slice-", absl::Hex(gen(), absl::kZeroPad16), absl::Hex(gen(), absl::kZeroPad16));
}

bool windowed(Strategy s) noexcept {
  return s == Strategy::kFixedWindow || s == Strategy::kSlidingWindowCounter;
}
}  // namespace

struct Slices::Entry {
  std::mutex mu;
  // The open slice (id empty: none): `slice` units reserved at `taken`, `used` of them admitted.
  std::string id;
  std::int64_t slice = 0;
  std::int64_t used = 0;
  Micros taken = 0;
  Micros ends = 0;          // no admission against it from here on
  Micros refund_until = 0;  // a settle after this gives nothing back, or could reach a forgotten id
  Decision base;            // the storage's decision on the reservation
  // Demand: units asked of this key here in the current interval (from demand_start) and the last.
  Micros demand_start = 0;
  std::int64_t demand_now = 0;
  std::int64_t demand_last = 0;
  std::int64_t remaining = kMaxAmount;  // the storage's `remaining` after its last decision here
  Micros last_use = 0;
};

struct Slices::PolicySlices {
  explicit PolicySlices(Policy p) : policy(std::move(p)) {}
  const Policy policy;  // a copy, for the settles of sweeps
  std::shared_mutex mu;
  absl::flat_hash_map<std::string, std::shared_ptr<Entry>> keys;  // guarded by mu
};

Slices::Slices(Storage& storage, std::size_t max_keys, std::size_t max_policies)
    : storage_(storage), max_keys_(max_keys), max_policies_(max_policies) {}

Slices::~Slices() = default;

Slices::PolicySlices* Slices::policy_slices(const Policy& policy) {
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    if (const auto it = policies_.find(policy.fingerprint()); it != policies_.end()) return it->second.get();
  }
  std::unique_lock<std::shared_mutex> lock(mu_);
  if (const auto it = policies_.find(policy.fingerprint()); it != policies_.end()) return it->second.get();
  if (policies_.size() >= max_policies_) return nullptr;
  auto& slot = policies_[policy.fingerprint()];
  slot = std::make_unique<PolicySlices>(policy);
  return slot.get();
}

std::shared_ptr<Slices::Entry> Slices::entry(PolicySlices& p, std::string_view key) {
  const absl::string_view k(key.data(), key.size());
  {
    std::shared_lock<std::shared_mutex> lock(p.mu);
    if (const auto it = p.keys.find(k); it != p.keys.end()) return it->second;
  }
  std::unique_lock<std::shared_mutex> lock(p.mu);
  if (const auto it = p.keys.find(k); it != p.keys.end()) return it->second;
  if (keys_.load(std::memory_order_relaxed) >= max_keys_) return nullptr;
  keys_.fetch_add(1, std::memory_order_relaxed);
  auto e = std::make_shared<Entry>();
  p.keys.emplace(std::string(key), e);
  return e;
}

namespace {
// The decision of a request admitted against e's slice at `now`.
template <class E>
Decision local_decision(const E& e, Micros now) {
  Decision d = e.base;
  const Micros elapsed = now - e.taken;
  d.allowed = true;
  d.retry_after = 0;
  d.delay = 0;
  d.remaining = std::min(kMaxAmount, e.base.remaining + (e.slice - e.used));
  d.reset_after = std::max<Micros>(0, e.base.reset_after - elapsed);
  if (d.limit_reset_after > 0) d.limit_reset_after = std::max<Micros>(0, e.base.limit_reset_after - elapsed);
  d.balance_count = 0;  // the slice is one figure: no limit's own balance to report
  return d;
}

// When a slice taken at `now` ends: after its interval, and at the end of its window (the slice
// was charged to the window of `now`; a unit admitted after it would count in no window).
Micros lease_end(const Policy& policy, Micros now, const Decision& d) {
  Micros end = now + policy.options().budget.interval;
  if (!windowed(policy.strategy())) return end;
  for (const Limit& l : policy.limits()) end = std::min(end, l.window_at(now).end);
  // The storage's own clock may run ahead of ours (Redis TIME): its reset of a one-limit window
  // ends the slice no later than its window.
  if (policy.strategy() == Strategy::kFixedWindow && policy.limits().size() == 1 && d.reset_after > 0) {
    end = std::min(end, now + d.reset_after);
  }
  return end;
}

// Until when a settle still gives units back: the fixed window forgets a window when it ends;
// the sliding window counter keeps it as the previous bucket one period more; buckets always.
Micros refund_end(const Policy& policy, Micros now, Micros settle_until) {
  if (!windowed(policy.strategy())) return settle_until;
  Micros last = 0;
  for (const Limit& l : policy.limits()) {
    const Period w = l.window_at(now);
    last = std::max(last, policy.strategy() == Strategy::kFixedWindow ? w.end : w.end + (w.end - w.start));
  }
  return std::min(last, settle_until);
}
}  // namespace

bool Slices::end_slice(Entry& e, Micros now, Storage::BatchItem& settle, const Policy& policy,
                       std::string_view key) {
  if (e.id.empty()) return false;
  held_.fetch_sub(e.slice - e.used, std::memory_order_relaxed);
  const bool give_back = e.used < e.slice && now < e.refund_until;
  if (give_back) {
    settle = Storage::BatchItem{&policy, key, e.used, Effect::kSettle};
    settle.reservation = e.id;  // the caller moves e.id out and points the item at its copy
  } else {
    e.id.clear();  // spent (nothing to give back), or too late: the reservation keeps its charge
  }
  e.slice = e.used = 0;
  return give_back;
}

void Slices::count_demand(Entry& e, const BudgetOptions& o, Micros now, std::int64_t cost) {
  e.last_use = now;
  if (now - e.demand_start >= o.interval || now < e.demand_start) {
    e.demand_last = now >= e.demand_start && now - e.demand_start < 2 * o.interval ? e.demand_now : 0;
    e.demand_start = now;
    e.demand_now = 0;
  }
  e.demand_now = std::min(kMaxAmount, e.demand_now + cost);
}

std::optional<Decision> Slices::try_local(const Storage::BatchItem& r, Micros now) {
  PolicySlices* p = nullptr;
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    const auto it = policies_.find(r.policy->fingerprint());
    if (it == policies_.end()) return std::nullopt;
    p = it->second.get();
  }
  std::shared_ptr<Entry> found;
  {
    std::shared_lock<std::shared_mutex> lock(p->mu);
    const auto it = p->keys.find(absl::string_view(r.key.data(), r.key.size()));
    if (it == p->keys.end()) return std::nullopt;
    found = it->second;
  }
  Entry& e = *found;
  std::unique_lock<std::mutex> lock(e.mu, std::try_to_lock);
  if (!lock.owns_lock() || e.id.empty() || now < e.taken || now >= e.ends || e.used + r.cost > e.slice) {
    return std::nullopt;
  }
  count_demand(e, r.policy->options().budget, now, r.cost);
  e.used += r.cost;
  held_.fetch_sub(r.cost, std::memory_order_relaxed);
  local_.fetch_add(1, std::memory_order_relaxed);
  return local_decision(e, now);
}

absl::StatusOr<Decision> Slices::hit(const Storage::BatchItem& r, Micros now, Exact exact) {
  const Policy& policy = *r.policy;
  const BudgetOptions& o = policy.options().budget;
  PolicySlices* p = policy_slices(policy);
  std::shared_ptr<Entry> held_entry = p != nullptr ? entry(*p, r.key) : nullptr;
  if (!held_entry) return exact(r);  // bounded: beyond max_keys or max_policies, no slice
  Entry& e = *held_entry;
  std::lock_guard<std::mutex> lock(e.mu);
  count_demand(e, o, now, r.cost);
  if (!e.id.empty() && now >= e.taken && now < e.ends && e.used + r.cost <= e.slice) {
    e.used += r.cost;
    held_.fetch_sub(r.cost, std::memory_order_relaxed);
    local_.fetch_add(1, std::memory_order_relaxed);
    return local_decision(e, now);
  }

  // The slice is spent or over (or there is none): settle it and take the next in one call.
  Storage::BatchItem items[2];
  const std::size_t n = end_slice(e, now, items[0], policy, r.key) ? 1 : 0;
  const std::string old_id = std::move(e.id);  // items[0] refers to it until the call is made
  e.id.clear();
  if (n == 1) items[0].reservation = old_id;
  const std::int64_t slice =
      std::min({o.max_slice, std::max(e.demand_last, e.demand_now), e.remaining / o.share});
  absl::StatusOr<Decision> results[2];
  if (slice < 2 * r.cost) {  // a slice would not serve another request: the exact path
    if (n == 1) {
      storage_.apply_batch(std::span<const Storage::BatchItem>(items, 1), now, std::span(results, 1));
      store_calls_.fetch_add(1, std::memory_order_relaxed);
    }
    absl::StatusOr<Decision> d = exact(r);
    if (d.ok() && !d->degraded) e.remaining = d->remaining;
    return d;
  }
  std::string id = lease_id();
  const Micros ends = lease_end(policy, now, Decision{});
  items[n] = Storage::BatchItem{&policy, r.key, slice, Effect::kReserve};
  items[n].reservation = id;
  items[n].ttl = std::max<Micros>(kMinReservationTtl, ends - now + 2 * kSettleGrace);
  storage_.apply_batch(std::span<const Storage::BatchItem>(items, n + 1), now, std::span(results, n + 1));
  store_calls_.fetch_add(1, std::memory_order_relaxed);
  const absl::StatusOr<Decision>& d = results[n];
  if (d.ok() && d->allowed && !d->degraded) {
    e.id = std::move(id);
    e.slice = slice;
    e.used = r.cost;
    e.taken = now;
    e.ends = lease_end(policy, now, *d);
    e.refund_until = refund_end(policy, now, e.ends + kSettleGrace);
    e.base = *d;
    e.remaining = d->remaining;
    held_.fetch_add(slice - r.cost, std::memory_order_relaxed);
    slices_.fetch_add(1, std::memory_order_relaxed);
    return local_decision(e, now);
  }
  if (d.ok() && !d->degraded) e.remaining = d->remaining;  // fewer units left than a slice
  absl::StatusOr<Decision> x = exact(r);  // denied, or the storage failed: decided alone
  if (x.ok() && !x->degraded) e.remaining = x->remaining;
  return x;
}

std::size_t Slices::sweep(Micros now, bool all) {
  std::vector<PolicySlices*> policies;
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    for (auto& [fp, p] : policies_) policies.push_back(p.get());
  }
  std::size_t ended = 0;
  for (PolicySlices* p : policies) {
    std::vector<std::pair<std::string, std::shared_ptr<Entry>>> entries;
    {
      std::shared_lock<std::shared_mutex> lock(p->mu);
      for (auto& [k, e] : p->keys) entries.emplace_back(k, e);
    }
    std::vector<Storage::BatchItem> settles;
    std::vector<std::string> ids;  // settles[i].reservation
    std::vector<std::unique_lock<std::mutex>> locks;
    settles.reserve(entries.size());
    ids.reserve(entries.size());
    for (auto& [key, e] : entries) {
      std::unique_lock<std::mutex> lock(e->mu, std::try_to_lock);
      if (!lock.owns_lock() || e->id.empty() || (!all && now < e->ends)) continue;
      ++ended;
      Storage::BatchItem s;
      if (end_slice(*e, now, s, p->policy, key)) {
        ids.push_back(std::move(e->id));
        e->id.clear();
        settles.push_back(s);
        settles.back().reservation = ids.back();
      }
    }
    if (!settles.empty()) {
      std::vector<absl::StatusOr<Decision>> results(settles.size());
      storage_.apply_batch(settles, now, results);
      store_calls_.fetch_add(1, std::memory_order_relaxed);
    }
    entries.clear();
    if (all) continue;
    std::unique_lock<std::shared_mutex> lock(p->mu);
    const Micros idle = 2 * p->policy.options().budget.interval;
    for (auto it = p->keys.begin(); it != p->keys.end();) {
      Entry& e = *it->second;
      // Nobody else holds it when the map's is the only reference (lookups take p->mu).
      std::unique_lock<std::mutex> entry_lock(e.mu, std::try_to_lock);
      const bool idle_now = entry_lock.owns_lock() && e.id.empty() && now - e.last_use >= idle;
      if (entry_lock.owns_lock()) entry_lock.unlock();
      if (idle_now && it->second.use_count() == 1) {
        p->keys.erase(it++);
        keys_.fetch_sub(1, std::memory_order_relaxed);
      } else {
        ++it;
      }
    }
  }
  return ended;
}

void Slices::maybe_sweep(Micros now, Micros every) {
  Micros next = next_sweep_.load(std::memory_order_relaxed);
  if (now < next) return;
  if (!next_sweep_.compare_exchange_strong(next, now + every, std::memory_order_relaxed)) return;
  sweep(now, false);
}

void Slices::forget(const Policy& policy, std::string_view key) {
  PolicySlices* p = nullptr;
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    const auto it = policies_.find(policy.fingerprint());
    if (it == policies_.end()) return;
    p = it->second.get();
  }
  std::shared_ptr<Entry> e;
  {
    std::shared_lock<std::shared_mutex> lock(p->mu);
    const auto it = p->keys.find(absl::string_view(key.data(), key.size()));
    if (it == p->keys.end()) return;
    e = it->second;
  }
  std::lock_guard<std::mutex> lock(e->mu);
  if (!e->id.empty()) held_.fetch_sub(e->slice - e->used, std::memory_order_relaxed);
  e->id.clear();
  e->slice = e->used = 0;
  e->remaining = kMaxAmount;
}

BudgetStats Slices::stats() const noexcept {
  return BudgetStats{local_.load(std::memory_order_relaxed), store_calls_.load(std::memory_order_relaxed),
                    slices_.load(std::memory_order_relaxed), held_.load(std::memory_order_relaxed)};
}

}  // namespace floodgate::budget
