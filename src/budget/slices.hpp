// budget/slices.hpp — budget slices: parts of a hot key's budget admitted locally.
//
// docs/algorithms.md, "Budget slices". A Limiter holds one Slices; for a kHit of a policy with
// budget slices on (PolicyOptions::budget), it asks Slices::hit instead of the storage. A slice is
// a reservation (Storage::reserve) of up to `max_slice` units under a random id, charged in full
// by the storage; requests are admitted against it here, without a storage call, until it is
// spent or ends (its interval, its window); then the units used settle it (Storage::settle: a
// refund of the rest) and, in the same storage call (apply_batch), the next slice is taken.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "floodgate/budget.hpp"
#include "floodgate/decision.hpp"
#include "floodgate/policy.hpp"
#include "floodgate/storage.hpp"

namespace floodgate::budget {

/// The slices of one Limiter, for every policy and key.
///
/// Bounded: at most `max_keys` keys (over all policies) and `max_policies` policies have an entry;
/// a request beyond takes the exact path. Entries idle for two intervals are freed by `sweep`.
///
/// Thread-safety: all methods are thread-safe. One key's slice is guarded by a small lock of its
/// own, held across the storage call that takes the next one (the other threads of this process
/// then wait for that slice instead of calling the storage too); local admission is exact against
/// the slice.
class Slices {
 public:
  /// The exact path of a request (the Limiter's pipeline: blocked-key cache, storage, fail mode).
  using Exact = absl::FunctionRef<absl::StatusOr<Decision>(const Storage::BatchItem&)>;

  explicit Slices(Storage& storage, std::size_t max_keys = 65536, std::size_t max_policies = 1024);
  ~Slices();
  Slices(const Slices&) = delete;
  Slices& operator=(const Slices&) = delete;

  /// Decides the kHit `r` (cost ≥ 1; its policy has slices on) at `now`: against this instance's
  /// slice of the key when one is open and holds `r.cost`, else by taking the next slice (one storage
  /// call), else by `exact` (the request alone, as without slices).
  absl::StatusOr<Decision> hit(const Storage::BatchItem& r, Micros now, Exact exact);

  /// Admits the kHit `r` against this instance's open slice of the key if it holds `r.cost`, without
  /// waiting: nothing when there is no open slice that holds it, or when another thread holds the
  /// key's lock (taking the next slice). Then the caller decides it by `hit` (a service hands it to
  /// its storage threads); nothing is counted for a request it does not admit.
  std::optional<Decision> try_local(const Storage::BatchItem& r, Micros now);

  /// Ends slices and gives back their unused units (one settle each): those whose slice has ended
  /// by `now` (interval or window over), or all of them when `all` (shutdown, Limiter::flush_budgets).
  /// Frees entries idle for two intervals. Returns how many slices were ended.
  std::size_t sweep(Micros now, bool all);

  /// Sweeps if the last sweep is `every` µs old (one caller wins; the others return at once).
  void maybe_sweep(Micros now, Micros every);

  /// Forgets `key`'s slice under `policy` without settling it (Limiter::clear: the state is gone).
  void forget(const Policy& policy, std::string_view key);

  [[nodiscard]] BudgetStats stats() const noexcept;

 private:
  struct Entry;
  struct PolicySlices;
  PolicySlices* policy_slices(const Policy& policy);
  std::shared_ptr<Entry> entry(PolicySlices& p, std::string_view key);
  // Ends e's slice at `now` (settle of the used units when it gives something back); e.mu held.
  // Returns the settle item to send, or nothing.
  static void count_demand(Entry& e, const BudgetOptions& o, Micros now, std::int64_t cost);
  bool end_slice(Entry& e, Micros now, Storage::BatchItem& settle, const Policy& policy, std::string_view key);

  Storage& storage_;
  const std::size_t max_keys_;
  const std::size_t max_policies_;
  std::shared_mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<PolicySlices>> policies_;  // by fingerprint; mu_
  std::atomic<std::size_t> keys_{0};
  std::atomic<Micros> next_sweep_{0};
  std::atomic<std::uint64_t> local_{0};
  std::atomic<std::uint64_t> store_calls_{0};
  std::atomic<std::uint64_t> slices_{0};
  std::atomic<std::int64_t> held_{0};
};

}  // namespace floodgate::budget
