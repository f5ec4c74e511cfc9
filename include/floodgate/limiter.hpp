// floodgate/limiter.hpp — the entry point of the C++ API.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "absl/status/statusor.h"
#include "floodgate/clock.hpp"
#include "floodgate/decision.hpp"
#include "floodgate/policy.hpp"
#include "floodgate/storage.hpp"

namespace floodgate {

/// A limiter: a storage and a clock. The policy is passed with each call, so one limiter serves
/// any number of policies.
///
///     auto storage = std::make_shared<floodgate::MemoryStorage>();
///     floodgate::Limiter limiter(storage);
///     auto api = floodgate::Policy::make("api", floodgate::Strategy::kGcra, "10/second").value();
///     if (auto d = limiter.hit(api, "user-42"); d.ok() && !d->allowed) { /* 429 */ }
///
/// Thread-safety: all methods are thread-safe (as thread-safe as the storage, which must be).
/// Errors: InvalidArgument for a cost outside [0, kMaxAmount] or a request the storage rejects as
/// invalid. Any other storage error is not returned: `hit` and `test` then decide by the policy's
/// FailMode and mark the decision `degraded` (allowed for kOpen, denied for kClosed; remaining 0,
/// reset_after 0, retry_after 1 s when denied: the state is unknown), and `degraded_count()`
/// counts it.
///
/// A policy with `blocked_cache` > 0 keeps a bounded local cache of keys it denied: until the
/// denial's retry time, a request of at least the denied cost is denied here without a storage
/// call (the decision is the cached one with its times counted down).
class Limiter {
 public:
  explicit Limiter(std::shared_ptr<Storage> storage,
                   std::shared_ptr<const Clock> clock = SystemClock::instance());
  ~Limiter();

  /// Consumes `cost` units for `key` if every limit of `policy` allows it.
  absl::StatusOr<Decision> hit(const Policy& policy, std::string_view key, std::int64_t cost = 1);
  /// Whether `hit` would allow `cost` now, without consuming anything. `remaining` and
  /// `reset_after` describe the current state.
  absl::StatusOr<Decision> test(const Policy& policy, std::string_view key,
                                std::int64_t cost = 1);
  /// The current state of `key`: `remaining` and `reset_after` (a test with cost 0).
  absl::StatusOr<Decision> stats(const Policy& policy, std::string_view key);
  /// Forgets `key`'s state under `policy`.
  absl::Status clear(const Policy& policy, std::string_view key);

  /// Decisions made by a policy's FailMode because the storage failed, since construction.
  [[nodiscard]] std::uint64_t degraded_count() const noexcept {
    return degraded_.load(std::memory_order_relaxed);
  }

  /// The blocked-key cache (PolicyOptions::blocked_cache), for callers that reach the storage
  /// themselves (such as a service that batches): the local denial of `key` at `now` if it is
  /// blocked for a request of `cost` (retry_after counts down to the end of the block, reset_after
  /// likewise; never degraded), else nullopt. Always nullopt when the policy has no cache or cost
  /// is 0. Counted in blocked_cache_hits().
  std::optional<Decision> blocked(const Policy& policy, std::string_view key, std::int64_t cost,
                                  Micros now);
  /// Remembers a decision the storage made at `now` for (`policy`, `key`, `cost`): a denial with a
  /// finite retry_after blocks the key until now + retry_after. Other decisions are ignored.
  void remember(const Policy& policy, std::string_view key, std::int64_t cost,
                const Decision& decision, Micros now);
  /// Decisions answered by the blocked-key cache without a storage call, since construction.
  [[nodiscard]] std::uint64_t blocked_cache_hits() const noexcept {
    return blocked_hits_.load(std::memory_order_relaxed);
  }

  [[nodiscard]] const Clock& clock() const noexcept { return *clock_; }
  [[nodiscard]] Storage& storage() const noexcept { return *storage_; }

 private:
  absl::StatusOr<Decision> decide(const Policy& policy, std::string_view key, std::int64_t cost,
                                  Effect effect);

  struct BlockedKeys;    // one policy's cache (limiter.cpp)
  struct BlockedCaches;  // all of them, by policy fingerprint
  BlockedKeys* blocked_keys(const Policy& policy);

  std::shared_ptr<Storage> storage_;
  std::shared_ptr<const Clock> clock_;
  std::atomic<std::uint64_t> degraded_{0};
  std::atomic<std::uint64_t> blocked_hits_{0};
  std::unique_ptr<BlockedCaches> blocked_;
};

/// The decision a policy's FailMode gives when its storage fails (see Limiter).
Decision degraded_decision(const Policy& policy) noexcept;

}  // namespace floodgate
