// floodgate/limiter.hpp — the entry point of the C++ API.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "floodgate/budget.hpp"
#include "floodgate/clock.hpp"
#include "floodgate/decision.hpp"
#include "floodgate/policy.hpp"
#include "floodgate/storage.hpp"

namespace floodgate {

namespace detail {
class KeyLocks;
}  // namespace detail
namespace budget {
class Slices;
}  // namespace budget

/// A reservation made by Limiter::reserve: its id and the decision on its estimate.
///
/// A value the caller keeps until the request's actual usage is known, then passes to
/// Limiter::settle (with the same policy and key). Dropped unsettled, it does nothing: the
/// estimate stays charged, and the storage forgets the id when its time to live ends (a settle
/// after that charges the actual usage now, as for an unknown id).
struct Reservation {
  std::string id;
  Decision decision;
  /// Whether the estimate was admitted and the id remembered (a denied reservation reserves
  /// nothing; a degraded decision — the storage failed — remembers nothing either).
  [[nodiscard]] bool reserved() const noexcept { return decision.allowed && !decision.degraded; }
};

class Limiter;

/// A lease of a concurrency policy (Limiter::acquire): one of at most N slots of a key, held
/// until released, or until its time to live (the limit's period, from the acquisition or the
/// last renewal) ends. Move-only; released when destroyed (the result of that release is not
/// reported: call `release` to see it). The Limiter must outlive the lease.
///
/// A denied acquisition gives a lease that holds nothing (`held()` false), with the decision
/// (`retry_after`: when the oldest lease's time to live ends; a release may free a slot sooner).
/// When the storage fails, the policy's fail mode decides (`decision().degraded`): the lease
/// holds nothing, whether the request may go on (fail open) or not.
///
/// Thread-safety: a Lease is one caller's; distinct leases may be used from any threads.
class Lease {
 public:
  Lease() = default;
  Lease(Lease&& other) noexcept;
  Lease& operator=(Lease&& other) noexcept;
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease();

  /// Whether this lease holds a slot now (acquired, not yet released or moved from). A lease
  /// past its time to live still says true: only the storage knows it expired (renew says).
  [[nodiscard]] bool held() const noexcept { return limiter_ != nullptr; }
  /// The lease's id (given to `acquire`, or a random one), empty for a default-made lease.
  [[nodiscard]] const std::string& id() const noexcept { return id_; }
  /// The decision of the acquisition (or of the last renewal).
  [[nodiscard]] const Decision& decision() const noexcept { return decision_; }

  /// Frees the slot now (Limiter::release); the lease then holds nothing. Errors: as release;
  /// FailedPrecondition if it holds nothing.
  absl::StatusOr<Decision> release();
  /// Starts the lease's time to live again (Limiter::renew), for a request that runs longer.
  /// NotFound when the lease had already expired (its slot may have been taken since: the
  /// caller decides whether to go on). FailedPrecondition if it holds nothing.
  absl::StatusOr<Decision> renew();

 private:
  friend class Limiter;
  Limiter* limiter_ = nullptr;
  std::unique_ptr<Policy> policy_;
  std::string key_;
  std::string id_;
  Decision decision_;
};

/// A limiter: a storage and a clock, and the one decision pipeline of the library. The policy is
/// passed with each call, so one limiter serves any number of policies.
///
///     auto storage = std::make_shared<floodgate::MemoryStorage>();
///     floodgate::Limiter limiter(storage);
///     auto api = floodgate::Policy::make("api", floodgate::Strategy::kGcra, "10/second").value();
///     if (auto d = limiter.hit(api, "user-42"); d.ok() && !d->allowed) { /* 429 */ }
///
/// Every decision — `hit`, `test`, `stats`, and the batches of the HTTP and gRPC services through
/// `decide` and `decide_group` — goes through the same steps, in this order:
///   1. the cost is checked (InvalidArgument outside [0, kMaxAmount]);
///   2. the blocked-key cache: a key this limiter denied until T is denied again until T without a
///      storage call (only for policies with `blocked_cache` > 0; counted in blocked_cache_hits());
///   3. the storage (Storage::apply_batch, or Storage::apply_group under per-key locks when the
///      storage's groups are not atomic by themselves);
///   4. the fail mode: a storage error becomes the policy's FailMode decision, marked `degraded`
///      (allowed for kOpen, denied for kClosed; remaining 0, reset_after 0, retry_after 1 s when
///      denied: the state is unknown), counted in degraded_count(). An error is never a plain
///      "allowed". The storage's refusals of the request itself are not failures and reach the
///      caller as errors (refused_request): InvalidArgument (a key too long for it) and
///      ResourceExhausted (a memory bound the request would pass: MemoryStorageOptions);
///   5. denials are remembered for step 2.
/// This is the only code that turns a storage error into a decision. A hit of a policy with budget
/// slices (PolicyOptions::budget) is first offered to this limiter's slice of the key, which admits
/// it without a storage call, or takes the next slice, or sends it down these steps
/// (docs/algorithms.md, "Budget slices"). Groups (`decide_group`) always take these steps.
///
/// Thread-safety: all methods are thread-safe (as thread-safe as the storage, which must be).
class Limiter {
 public:
  /// One request of a batch (the storage's own batch item).
  using Request = Storage::BatchItem;
  /// Called after each storage call with its duration in µs (for latency metrics).
  using LatencyObserver = std::function<void(Micros)>;

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
  /// Reserves `estimate` units for a request whose cost is known only later (an LLM's tokens): a
  /// hit of `estimate` that the storage also remembers under `id` (a random id when empty) for
  /// `ttl` (1 ms to 24 h). Settle it with the actual usage; docs/algorithms.md, "Reservations".
  /// Errors: InvalidArgument (cost, id of more than kMaxReservationId bytes, ttl out of range),
  /// AlreadyExists (the id is known for this key), ResourceExhausted (the storage's bound on
  /// reservations), Unimplemented (a storage without reservations).
  absl::StatusOr<Reservation> reserve(const Policy& policy, std::string_view key, std::int64_t estimate,
                                      std::string id = {}, Micros ttl = kDefaultReservationTtl);
  /// Settles reservation `id` with the actual usage: the state becomes what it would be had the
  /// request cost `actual` when it was reserved (a refund, or more taken even past the limit);
  /// an unknown or expired id charges `actual` now; a second settle of an id changes nothing.
  /// The decision is the state after it (allowed); its `settle` says which of these happened.
  absl::StatusOr<Decision> settle(const Policy& policy, std::string_view key, std::string_view id,
                                  std::int64_t actual);

  /// Concurrency (a policy of Strategy::kConcurrency, "20 concurrent for 5 minutes"; docs/
  /// algorithms.md, "Concurrency"): takes a lease of `cost` slots (usually 1) for `key` if at
  /// most the limit's amount are then outstanding — a reservation of the concurrency limit whose
  /// time to live is the limit's period. `id` names it (a random id when empty), for `release`
  /// and `renew` from elsewhere (another process, a service's later call). Errors as `reserve`;
  /// InvalidArgument for a policy that is not a concurrency policy.
  absl::StatusOr<Lease> acquire(const Policy& policy, std::string_view key, std::int64_t cost = 1,
                                std::string id = {});
  /// Frees lease `id` of `key` (a settle to 0): its slots are free at once. NotFound when it is
  /// not outstanding (never taken, released, expired): nothing is freed.
  absl::StatusOr<Decision> release(const Policy& policy, std::string_view key, std::string_view id);
  /// Starts lease `id`'s time to live again from now. NotFound when it is not outstanding;
  /// InvalidArgument for a policy that is not a concurrency policy.
  absl::StatusOr<Decision> renew(const Policy& policy, std::string_view key, std::string_view id);

  /// A hit of a policy with budget slices that this limiter's open slice of `key` holds, decided
  /// at once without a storage call; nothing otherwise (no slice, a spent or ended one, another
  /// thread taking the next), and then the caller decides the request as usual (`decide`): what a
  /// service's I/O thread asks before handing a request to its storage threads.
  std::optional<Decision> try_budget(const Request& r, Micros now);
  /// Whether a request may be admitted against a budget slice at all: a hit of a valid cost above
  /// 0 of a policy with budget slices (try_budget's and the pipeline's one test of it).
  [[nodiscard]] static bool uses_slices(const Request& r) noexcept {
    return r.effect == Effect::kHit && r.policy->options().budget.max_slice > 0 && r.cost > 0 &&
           r.cost <= kMaxAmount;
  }

  /// Ends every budget slice of this limiter now, giving back the units it did not use (one
  /// settle per slice; PolicyOptions::budget). The destructor does it too; call it before a process
  /// stops without destroying its limiter. Slices whose interval or window is over are ended by
  /// the limiter's own decisions (at most every 100 ms) or by `end_budgets`. Returns how many
  /// slices were ended.
  std::size_t flush_budgets();
  /// Ends the budget slices whose interval or window is over and frees idle keys' entries (the
  /// service calls it about once a second, so that an idle key gives its unused units back).
  std::size_t end_budgets();
  /// What budget slices did since construction.
  [[nodiscard]] BudgetStats budget_stats() const noexcept;

  /// Forgets `key`'s state under `policy` (and its entry in the blocked-key cache and its budget
  /// slice, which is dropped unsettled: the state is gone).
  absl::Status clear(const Policy& policy, std::string_view key);

  /// Decides independent requests at `now`, in order, as if by `hit`/`test` one after another,
  /// with one storage call for those the cache does not answer (a networked storage sends them
  /// in one round trip). `out` has one slot per request: a decision, or the storage's refusal of
  /// the request (refused_request).
  void decide(std::span<const Request> requests, Micros now,
              std::span<absl::StatusOr<Decision>> out);

  /// Decides requests as one, all or nothing (Storage::apply_group): if no request that is not
  /// `optional` is denied, every allowed kHit is committed; otherwise none is. A request the
  /// blocked-key cache denies makes the group uncommitted without a group call (the others are
  /// tested). Returns whether the hits were committed; `out` as for `decide` (a storage error
  /// becomes a degraded decision, and the group is not committed).
  bool decide_group(std::span<const Request> requests, Micros now,
                    std::span<absl::StatusOr<Decision>> out);

  /// On a storage whose groups are not atomic by themselves (StorageTraits::atomic_groups), a
  /// group is made all-or-nothing in this process by per-key locks; a single decision on one of
  /// its keys must take them too, or it can take the last unit between the group's test and its
  /// commit. Single decisions take them once groups are expected: `decide_group` sets it on its
  /// first call; call this before sharing the limiter when groups and single decisions on the
  /// same keys may run at the same time from the start (the gRPC service does). A limiter that
  /// never decides groups (the HTTP API) pays nothing.
  void expect_groups() noexcept { groups_.store(true, std::memory_order_release); }

  /// Sets the observer of storage call durations. Call before the limiter is shared.
  void observe_storage_latency(LatencyObserver observer) { latency_ = std::move(observer); }

  /// Decisions made by a policy's FailMode because the storage failed, since construction.
  [[nodiscard]] std::uint64_t degraded_count() const noexcept {
    return degraded_.load(std::memory_order_relaxed);
  }
  /// Decisions answered by the blocked-key cache without a storage call, since construction.
  [[nodiscard]] std::uint64_t blocked_cache_hits() const noexcept {
    return blocked_hits_.load(std::memory_order_relaxed);
  }

  [[nodiscard]] const Clock& clock() const noexcept { return *clock_; }
  [[nodiscard]] Storage& storage() const noexcept { return *storage_; }

 private:
  struct BlockedKeys;    // one policy's cache (limiter.cpp)
  struct BlockedCaches;  // all of them, by policy fingerprint
  BlockedKeys* blocked_keys(const Policy& policy);
  std::optional<Decision> blocked(const Request& r, Micros now);
  void remember(const Request& r, const Decision& decision, Micros now);
  // Steps 4 and 5 for one storage result.
  void finish(const Request& r, absl::StatusOr<Decision>& result, Micros now);
  template <class F>
  void timed(F&& storage_call);
  absl::StatusOr<Decision> decide_one(const Request& r);
  absl::StatusOr<Decision> decide_at(const Request& r, Micros now);
  absl::StatusOr<Decision> decide_exact(const Request& r, Micros now);
  // A request the storage decides alone: a valid cost, no reservation, no blocked-key cache, no
  // latency observer, no key locks.
  [[nodiscard]] bool plain_request(const Request& r) const noexcept {
    return r.cost >= 0 && r.cost <= kMaxAmount && r.policy->options().blocked_cache == 0 && !latency_ &&
           !lock_singles() && !reserves(r.effect);
  }

  std::shared_ptr<Storage> storage_;
  std::shared_ptr<const Clock> clock_;
  StorageTraits traits_;
  LatencyObserver latency_;
  std::atomic<std::uint64_t> degraded_{0};
  std::atomic<std::uint64_t> blocked_hits_{0};
  std::unique_ptr<BlockedCaches> blocked_;
  std::unique_ptr<detail::KeyLocks> key_locks_;
  std::unique_ptr<budget::Slices> slices_;  // budget slices (src/budget/)
  std::atomic<bool> groups_{false};  // single decisions take the key locks too (expect_groups)
  [[nodiscard]] bool lock_singles() const noexcept {
    return !traits_.atomic_groups && groups_.load(std::memory_order_acquire);
  }
};

/// The decision a policy's FailMode gives when its storage fails (see Limiter).
Decision degraded_decision(const Policy& policy) noexcept;
/// Whether a storage error refuses the request itself (InvalidArgument, ResourceExhausted) rather
/// than says the storage failed: the caller gets the error, the fail mode does not decide.
bool refused_request(const absl::Status& status) noexcept;

}  // namespace floodgate
