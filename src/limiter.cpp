#include "floodgate/limiter.hpp"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include <random>

#include "absl/strings/str_cat.h"
#include "key_locks.hpp"
#include "budget/slices.hpp"

namespace floodgate {

namespace {
absl::Status check_cost(std::int64_t cost) {
  if (cost < 0 || cost > kMaxAmount) {
    return absl::InvalidArgumentError(
        absl::StrCat("cost ", cost, " is out of range: expected 0 to 2^53"));
  }
  return absl::OkStatus();
}

// The cost, and a reservation's id and time to live.
absl::Status check_request(const Storage::BatchItem& r) {
  if (r.cost < 0 || r.cost > kMaxAmount) return check_cost(r.cost);
  if (!reserves(r.effect)) return absl::OkStatus();
  if (r.reservation.empty() || r.reservation.size() > kMaxReservationId) {
    return absl::InvalidArgumentError(
        absl::StrCat("reservation id of ", r.reservation.size(), " bytes: expected 1 to ", kMaxReservationId));
  }
  // A lease's time to live is its policy's (Policy::make checked it).
  if (r.effect != Effect::kSettle && r.effect != Effect::kRenew && r.policy->strategy() != Strategy::kConcurrency &&
      (r.ttl < kMinReservationTtl || r.ttl > kMaxReservationTtl)) {
    return absl::InvalidArgumentError(absl::StrCat("reservation ttl of ", r.ttl / 1000,
                                                   " ms is out of range: expected 1 ms to 24 hours"));
  }
  return absl::OkStatus();
}

// 128 random bits in hex, for a reservation the caller did not name.
std::string random_id() {
  thread_local std::mt19937_64 gen{std::random_device{}()};
  return absl::StrCat(absl::Hex(gen(), absl::kZeroPad16), absl::Hex(gen(), absl::kZeroPad16));
}
}  // namespace

// ---- the blocked-key cache ---------------------------------------------------------------
struct Limiter::BlockedKeys {
  struct Entry {
    Micros until;        // blocked before this time
    std::int64_t cost;   // for requests of at least this cost
    Decision decision;   // as the storage made it
    Micros at;           // when
  };
  explicit BlockedKeys(std::size_t max) : max_size(max) {}
  std::mutex mu;
  absl::flat_hash_map<std::string, Entry> keys;  // guarded by mu
  const std::size_t max_size;
};

struct Limiter::BlockedCaches {
  std::shared_mutex mu;
  absl::flat_hash_map<std::string, std::unique_ptr<BlockedKeys>> by_fingerprint;  // guarded by mu
};

Limiter::Limiter(std::shared_ptr<Storage> storage, std::shared_ptr<const Clock> clock)
    : storage_(std::move(storage)),
      clock_(std::move(clock)),
      traits_(storage_->traits()),
      blocked_(std::make_unique<BlockedCaches>()),
      key_locks_(std::make_unique<detail::KeyLocks>()),
      slices_(std::make_unique<budget::Slices>(*storage_)) {}

Limiter::~Limiter() { slices_->sweep(clock_->now(), true); }

std::optional<Decision> Limiter::try_budget(const Request& r, Micros now) {
  if (!uses_slices(r) || reserves(r.effect)) return std::nullopt;
  return slices_->try_local(r, now);
}

std::size_t Limiter::flush_budgets() { return slices_->sweep(clock_->now(), true); }
std::size_t Limiter::end_budgets() { return slices_->sweep(clock_->now(), false); }
BudgetStats Limiter::budget_stats() const noexcept { return slices_->stats(); }

Limiter::BlockedKeys* Limiter::blocked_keys(const Policy& policy) {
  if (policy.options().blocked_cache == 0) return nullptr;
  {
    std::shared_lock<std::shared_mutex> lock(blocked_->mu);
    const auto it = blocked_->by_fingerprint.find(policy.fingerprint());
    if (it != blocked_->by_fingerprint.end()) return it->second.get();
  }
  std::unique_lock<std::shared_mutex> lock(blocked_->mu);
  auto& slot = blocked_->by_fingerprint[policy.fingerprint()];
  if (!slot) slot = std::make_unique<BlockedKeys>(policy.options().blocked_cache);
  return slot.get();
}

std::optional<Decision> Limiter::blocked(const Request& r, Micros now) {
  const std::string_view key = r.key;
  const std::int64_t cost = r.cost;
  // A settle is always applied; a reservation that may be one is asked of the storage.
  if (cost <= 0 || r.policy->options().blocked_cache == 0) return std::nullopt;
  if (r.effect == Effect::kSettle || r.effect == Effect::kReserveOrSettle) return std::nullopt;
  BlockedKeys* cache = blocked_keys(*r.policy);
  if (cache == nullptr) return std::nullopt;
  std::lock_guard<std::mutex> lock(cache->mu);
  const auto it = cache->keys.find(absl::string_view(key.data(), key.size()));
  if (it == cache->keys.end()) return std::nullopt;
  const BlockedKeys::Entry& e = it->second;
  if (now >= e.until || now < e.at) {  // over (or the clock stepped back): ask the storage
    cache->keys.erase(it);
    return std::nullopt;
  }
  if (cost < e.cost) return std::nullopt;
  Decision d = e.decision;
  d.allowed = false;
  d.delay = 0;
  d.retry_after = e.until - now;
  d.reset_after = std::max<Micros>(0, e.decision.reset_after - (now - e.at));
  for (std::size_t i = 0; i < d.balance_count; ++i) {
    d.balances[i].reset_after = std::max<Micros>(0, d.balances[i].reset_after - (now - e.at));
  }
  blocked_hits_.fetch_add(1, std::memory_order_relaxed);
  return d;
}

void Limiter::remember(const Request& r, const Decision& decision, Micros now) {
  const std::string_view key = r.key;
  const std::int64_t cost = r.cost;
  if (decision.allowed || decision.degraded || cost <= 0 || decision.retry_after <= 0 ||
      decision.retry_after == kNever || r.policy->options().blocked_cache == 0) {
    return;
  }
  BlockedKeys* cache = blocked_keys(*r.policy);
  if (cache == nullptr) return;
  std::lock_guard<std::mutex> lock(cache->mu);
  if (cache->keys.size() >= cache->max_size && !cache->keys.contains(absl::string_view(key.data(), key.size()))) {
    // Bounded: look at a few entries, drop the expired ones, else the one whose block ends first.
    auto victim = cache->keys.end();
    int seen = 0;
    for (auto it = cache->keys.begin(); it != cache->keys.end() && seen < 8; ++seen) {
      if (it->second.until <= now) {
        cache->keys.erase(it++);
        continue;
      }
      if (victim == cache->keys.end() || it->second.until < victim->second.until) victim = it;
      ++it;
    }
    if (cache->keys.size() >= cache->max_size && victim != cache->keys.end()) {
      cache->keys.erase(victim);
    }
  }
  cache->keys.insert_or_assign(std::string(key),
                               BlockedKeys::Entry{now + decision.retry_after, cost, decision, now});
}

bool refused_request(const absl::Status& status) noexcept {
  return status.code() == absl::StatusCode::kInvalidArgument ||
         status.code() == absl::StatusCode::kResourceExhausted ||
         status.code() == absl::StatusCode::kAlreadyExists || status.code() == absl::StatusCode::kUnimplemented ||
         status.code() == absl::StatusCode::kNotFound;
}

Decision degraded_decision(const Policy& policy) noexcept {
  Decision d;
  d.degraded = true;
  d.allowed = policy.fail_mode() == FailMode::kOpen;
  d.limit = policy.limits().front().amount;
  d.period = policy.limits().front().period;
  d.remaining = 0;
  d.reset_after = 0;
  d.retry_after = d.allowed ? 0 : kMicrosPerSecond;
  return d;
}

void Limiter::finish(const Request& r, absl::StatusOr<Decision>& result, Micros now) {
  // The common case first: nothing to remember for an allowed decision, nor without a cache.
  if (result.ok() && (result->allowed || r.policy->options().blocked_cache == 0)) return;
  if (result.ok()) {
    remember(r, *result, now);
  } else if (!refused_request(result.status())) {
    degraded_.fetch_add(1, std::memory_order_relaxed);
    result = degraded_decision(*r.policy);  // the policy's fail mode; never a plain "allowed"
  }
}

template <class F>
void Limiter::timed(F&& storage_call) {
  if (!latency_) {
    storage_call();
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  storage_call();
  latency_(std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start)
               .count());
}

absl::StatusOr<Decision> Limiter::decide_one(const Request& r) {
  const Micros now = clock_->now();
  // The common case in this one frame: a plain request (decide_exact's), not on budget slices. A storage
  // error is all that is left for finish: a plain request's policy has no blocked-key cache.
  const bool plain = !uses_slices(r) && plain_request(r);
  absl::StatusOr<Decision> d = plain ? storage_->apply(*r.policy, r.key, r.cost, r.effect, now) : decide_at(r, now);
  if (plain && !d.ok()) [[unlikely]] finish(r, d, now);
  return d;
}

absl::StatusOr<Decision> Limiter::decide_at(const Request& r, Micros now) {
  if (uses_slices(r)) [[unlikely]] {
    slices_->maybe_sweep(now, kMicrosPerSecond / 10);
    return slices_->hit(r, now, [&](const Request& x) { return decide_exact(x, now); });
  }
  return decide_exact(r, now);
}

absl::StatusOr<Decision> Limiter::decide_exact(const Request& r, Micros now) {
  // The less common cases: an invalid cost or reservation, the blocked-key cache, a latency
  // observer, key locks, a reservation.
  const auto other = [&]() -> absl::StatusOr<Decision> {
    if (auto s = check_request(r); !s.ok()) return s;
    if (r.policy->options().blocked_cache != 0) {
      if (auto local = blocked(r, now)) return *local;
    }
    absl::StatusOr<Decision> d;
    if (lock_singles()) {
      auto guard = key_locks_->lock(std::span<const Request>(&r, 1));
      timed([&] { d = storage_->apply_item(r, now); });
    } else {
      timed([&] { d = storage_->apply_item(r, now); });
    }
    finish(r, d, now);
    return d;
  };
  // One named result and one return, so that the storage's result is built in the caller's place
  // (returning another object on some path made every decision a copy of it).
  const bool plain = plain_request(r);
  absl::StatusOr<Decision> d = plain ? storage_->apply(*r.policy, r.key, r.cost, r.effect, now) : other();
  if (plain) finish(r, d, now);
  return d;
}

void Limiter::decide(std::span<const Request> requests, Micros now,
                     std::span<absl::StatusOr<Decision>> out) {
  if (requests.size() == 1) {  // the common case of a service without batching: no allocation
    out[0] = decide_at(requests[0], now);
    return;
  }
  std::vector<Request> ask;
  std::vector<std::size_t> where;  // ask[j] answers out[where[j]]
  ask.reserve(requests.size());
  where.reserve(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (auto s = check_request(requests[i]); !s.ok()) {
      out[i] = s;
    } else if (uses_slices(requests[i])) {
      out[i] = decide_at(requests[i], now);
    } else if (auto local = blocked(requests[i], now)) {
      out[i] = *local;
    } else {
      ask.push_back(requests[i]);
      where.push_back(i);
    }
  }
  if (ask.empty()) return;
  std::vector<absl::StatusOr<Decision>> results(ask.size());
  if (lock_singles()) {
    auto guard = key_locks_->lock(ask);
    timed([&] { storage_->apply_batch(ask, now, results); });
  } else {
    timed([&] { storage_->apply_batch(ask, now, results); });
  }
  for (std::size_t j = 0; j < ask.size(); ++j) {
    finish(ask[j], results[j], now);
    out[where[j]] = std::move(results[j]);
  }
}

bool Limiter::decide_group(std::span<const Request> requests, Micros now,
                           std::span<absl::StatusOr<Decision>> out) {
  if (!groups_.load(std::memory_order_relaxed)) expect_groups();
  std::vector<std::optional<Decision>> local(requests.size());
  bool blocked_here = false;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (auto s = check_request(requests[i]); !s.ok()) {
      out[i] = s;  // nothing is asked of the storage for an invalid group
      return false;
    }
    if ((requests[i].effect == Effect::kHit || requests[i].effect == Effect::kReserve) && !requests[i].optional) {
      local[i] = blocked(requests[i], now);
    }
    blocked_here = blocked_here || local[i].has_value();
  }
  if (blocked_here) {  // denied here: the others only report their state
    std::vector<Request> tests;
    std::vector<std::size_t> where;
    for (std::size_t i = 0; i < requests.size(); ++i) {
      if (local[i]) {
        out[i] = *local[i];
      } else {
        tests.push_back(requests[i]);
        // A settle is applied all the same; a reservation that may be one is resolved first.
        if (tests.back().effect != Effect::kSettle && tests.back().effect != Effect::kRenew &&
            tests.back().effect != Effect::kReserveOrSettle) {
          tests.back().effect = Effect::kTest;
        } else if (tests.back().effect == Effect::kReserveOrSettle) {
          const absl::StatusOr<bool> k = storage_->known(*requests[i].policy, requests[i].key,
                                                         requests[i].reservation, now);
          tests.back().effect = k.ok() && *k ? Effect::kSettle : Effect::kTest;
        }
        where.push_back(i);
      }
    }
    std::vector<absl::StatusOr<Decision>> results(tests.size());
    decide(tests, now, results);
    for (std::size_t j = 0; j < tests.size(); ++j) out[where[j]] = std::move(results[j]);
    return false;
  }
  bool committed = false;
  timed([&] {
    if (traits_.atomic_groups) {
      committed = storage_->apply_group(requests, now, out);
    } else {
      auto guard = key_locks_->lock(requests);
      committed = storage_->apply_group(requests, now, out);
    }
  });
  for (std::size_t i = 0; i < requests.size(); ++i) finish(requests[i], out[i], now);
  return committed;
}

absl::StatusOr<Reservation> Limiter::reserve(const Policy& policy, std::string_view key, std::int64_t estimate,
                                             std::string id, Micros ttl) {
  if (id.empty()) id = random_id();
  Request r{&policy, key, estimate, Effect::kReserve};
  r.reservation = id;
  r.ttl = ttl;
  absl::StatusOr<Decision> d = decide_one(r);
  if (!d.ok()) return d.status();
  return Reservation{std::move(id), *d};
}

absl::StatusOr<Decision> Limiter::settle(const Policy& policy, std::string_view key, std::string_view id,
                                         std::int64_t actual) {
  Request r{&policy, key, actual, Effect::kSettle};
  r.reservation = id;
  return decide_one(r);
}

absl::StatusOr<Lease> Limiter::acquire(const Policy& policy, std::string_view key, std::int64_t cost,
                                       std::string id) {
  if (policy.strategy() != Strategy::kConcurrency) {
    return absl::InvalidArgumentError(absl::StrCat("policy \"", policy.name(), "\" is ", to_string(policy.strategy()),
                                                   ": leases are taken of a concurrency policy"));
  }
  absl::StatusOr<Reservation> r = reserve(policy, key, cost, std::move(id), policy.limits().front().period);
  if (!r.ok()) return r.status();
  Lease lease;
  lease.decision_ = r->decision;
  lease.id_ = std::move(r->id);
  if (r->reserved()) {
    lease.limiter_ = this;
    lease.policy_ = std::make_unique<Policy>(policy);
    lease.key_ = std::string(key);
  }
  return lease;
}

absl::StatusOr<Decision> Limiter::release(const Policy& policy, std::string_view key, std::string_view id) {
  return settle(policy, key, id, 0);
}

absl::StatusOr<Decision> Limiter::renew(const Policy& policy, std::string_view key, std::string_view id) {
  Request r{&policy, key, 0, Effect::kRenew};
  r.reservation = id;
  return decide_one(r);
}

Lease::Lease(Lease&& other) noexcept
    : limiter_(std::exchange(other.limiter_, nullptr)),
      policy_(std::move(other.policy_)),
      key_(std::move(other.key_)),
      id_(std::move(other.id_)),
      decision_(other.decision_) {}

Lease& Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    (void)release();
    limiter_ = std::exchange(other.limiter_, nullptr);
    policy_ = std::move(other.policy_);
    key_ = std::move(other.key_);
    id_ = std::move(other.id_);
    decision_ = other.decision_;
  }
  return *this;
}

Lease::~Lease() { (void)release(); }

absl::StatusOr<Decision> Lease::release() {
  if (limiter_ == nullptr) return absl::FailedPreconditionError("this lease holds no slot (denied, or released)");
  Limiter* limiter = std::exchange(limiter_, nullptr);
  return limiter->release(*policy_, key_, id_);
}

absl::StatusOr<Decision> Lease::renew() {
  if (limiter_ == nullptr) return absl::FailedPreconditionError("this lease holds no slot (denied, or released)");
  absl::StatusOr<Decision> d = limiter_->renew(*policy_, key_, id_);
  if (d.ok() && !d->degraded) decision_ = *d;
  return d;
}

absl::StatusOr<Decision> Limiter::hit(const Policy& policy, std::string_view key,
                                      std::int64_t cost) {
  return decide_one(Request{&policy, key, cost, Effect::kHit});
}

absl::StatusOr<Decision> Limiter::test(const Policy& policy, std::string_view key,
                                       std::int64_t cost) {
  return decide_one(Request{&policy, key, cost, Effect::kTest});
}

absl::StatusOr<Decision> Limiter::stats(const Policy& policy, std::string_view key) {
  return decide_one(Request{&policy, key, 0, Effect::kTest});
}

absl::Status Limiter::clear(const Policy& policy, std::string_view key) {
  if (policy.options().budget.max_slice > 0) slices_->forget(policy, key);
  if (BlockedKeys* cache = blocked_keys(policy)) {
    std::lock_guard<std::mutex> lock(cache->mu);
    cache->keys.erase(absl::string_view(key.data(), key.size()));
  }
  return storage_->clear(policy, key);
}

}  // namespace floodgate
