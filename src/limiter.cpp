#include "floodgate/limiter.hpp"

#include <algorithm>
#include <mutex>
#include <shared_mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace floodgate {

namespace {
absl::Status check_cost(std::int64_t cost) {
  if (cost < 0 || cost > kMaxAmount) {
    return absl::InvalidArgumentError(
        absl::StrCat("cost ", cost, " is out of range: expected 0 to 2^53"));
  }
  return absl::OkStatus();
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
      blocked_(std::make_unique<BlockedCaches>()) {}

Limiter::~Limiter() = default;

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

std::optional<Decision> Limiter::blocked(const Policy& policy, std::string_view key,
                                         std::int64_t cost, Micros now) {
  if (cost <= 0) return std::nullopt;
  BlockedKeys* cache = blocked_keys(policy);
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
  blocked_hits_.fetch_add(1, std::memory_order_relaxed);
  return d;
}

void Limiter::remember(const Policy& policy, std::string_view key, std::int64_t cost,
                       const Decision& decision, Micros now) {
  if (decision.allowed || decision.degraded || cost <= 0 || decision.retry_after <= 0 ||
      decision.retry_after == kNever) {
    return;
  }
  BlockedKeys* cache = blocked_keys(policy);
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

absl::StatusOr<Decision> Limiter::decide(const Policy& policy, std::string_view key,
                                         std::int64_t cost, Effect effect) {
  if (auto s = check_cost(cost); !s.ok()) return s;
  const Micros now = clock_->now();
  if (auto local = blocked(policy, key, cost, now)) return *local;
  auto d = storage_->apply(policy, key, cost, effect, now);
  if (d.ok()) {
    remember(policy, key, cost, *d, now);
    return d;
  }
  if (d.status().code() == absl::StatusCode::kInvalidArgument) return d;
  degraded_.fetch_add(1, std::memory_order_relaxed);
  return degraded_decision(policy);
}

absl::StatusOr<Decision> Limiter::hit(const Policy& policy, std::string_view key,
                                      std::int64_t cost) {
  return decide(policy, key, cost, Effect::kHit);
}

absl::StatusOr<Decision> Limiter::test(const Policy& policy, std::string_view key,
                                       std::int64_t cost) {
  return decide(policy, key, cost, Effect::kTest);
}

absl::StatusOr<Decision> Limiter::stats(const Policy& policy, std::string_view key) {
  return decide(policy, key, 0, Effect::kTest);
}

absl::Status Limiter::clear(const Policy& policy, std::string_view key) {
  if (BlockedKeys* cache = blocked_keys(policy)) {
    std::lock_guard<std::mutex> lock(cache->mu);
    cache->keys.erase(absl::string_view(key.data(), key.size()));
  }
  return storage_->clear(policy, key);
}

}  // namespace floodgate
