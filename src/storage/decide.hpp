// The algorithms of algorithms.hpp behind one compile-time interface, and the one rule that turns
// a key's per-limit states into a decision (all limits at once). Shared by the storages that run
// the C++ functions themselves (memory, memcached); the Redis scripts mirror the same rule.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "absl/status/status.h"
#include "floodgate/algorithms.hpp"
#include "floodgate/policy.hpp"
#include "floodgate/storage.hpp"

namespace floodgate::detail {

/// One algorithm: its State and evaluate/commit/expires_at with a common signature (`shape` is
/// used by the buckets only).
template <class S, auto Evaluate, auto Commit, auto Expires, auto Settle, auto Mark>
struct Algorithm {
  using State = S;
  static Decision evaluate(const S& s, const Limit& l, Micros now, std::int64_t cost, bool) {
    return Evaluate(s, l, now, cost);
  }
  static void commit(S& s, const Limit& l, Micros now, std::int64_t cost) {
    Commit(s, l, now, cost);
  }
  static Micros expires_at(const S& s, const Limit& l) { return Expires(s, l); }
  static void settle(S& s, const Limit& l, Micros now, Micros at, Micros mark, std::int64_t delta) {
    Settle(s, l, now, at, mark, delta);
  }
  static Micros mark(const S& s, const Limit& l) { return Mark(s, l); }
};

using FixedClock = Algorithm<fixed_window::State, fixed_window::evaluate, fixed_window::commit,
                             fixed_window::expires_at, fixed_window::settle, fixed_window::mark>;
using FixedFirstHit =
    Algorithm<fixed_window_first_hit::State, fixed_window_first_hit::evaluate,
              fixed_window_first_hit::commit, fixed_window_first_hit::expires_at,
              fixed_window_first_hit::settle, fixed_window_first_hit::mark>;
using Moving = Algorithm<moving_window::State, moving_window::evaluate, moving_window::commit,
                         moving_window::expires_at, moving_window::settle, moving_window::mark>;
using Sliding = Algorithm<sliding_window::State, sliding_window::evaluate,
                          sliding_window::commit, sliding_window::expires_at, sliding_window::settle,
                          sliding_window::mark>;

struct Bucket {
  using State = bucket::State;
  static Decision evaluate(const State& s, const Limit& l, Micros now, std::int64_t cost,
                           bool shape) {
    return bucket::evaluate(s, l, now, cost, shape);
  }
  static void commit(State& s, const Limit& l, Micros now, std::int64_t cost) {
    bucket::commit(s, l, now, cost);
  }
  static Micros expires_at(const State& s, const Limit& l) { return bucket::expires_at(s, l); }
  static void settle(State& s, const Limit& l, Micros now, Micros at, Micros mark, std::int64_t delta) {
    bucket::settle(s, l, now, at, mark, delta);
  }
  static Micros mark(const State& s, const Limit& l) { return bucket::mark(s, l); }
};

/// Calls `f(A{})` with the algorithm that runs `policy`; returns what `f` returns.
template <class F>
decltype(auto) with_algorithm(const Policy& policy, F&& f) {
  switch (policy.strategy()) {
    case Strategy::kFixedWindow:
      if (policy.anchor() == Anchor::kFirstHit) return f(FixedFirstHit{});
      return f(FixedClock{});
    case Strategy::kMovingWindow:
    case Strategy::kConcurrency:
      return f(Moving{});
    case Strategy::kSlidingWindowCounter:
      return f(Sliding{});
    case Strategy::kTokenBucket:
    case Strategy::kLeakyBucket:
    case Strategy::kGcra:
      break;
  }
  return f(Bucket{});
}

/// What a storage does around a commit: nothing (the default). A storage that bounds what states
/// may grow to (the memory store's moving-window logs) passes its own: `before_commit` may refuse
/// the commit (the decision is then returned as evaluated, nothing committed, and the storage
/// reports its refusal instead), `after_commit` sees the states committed.
struct NoCommitGuard {
  template <class S>
  [[gnu::always_inline]] bool before_commit(const S*, std::span<const Limit>, Micros, std::int64_t) noexcept {
    return true;
  }
  template <class S>
  [[gnu::always_inline]] void after_commit(const S*) noexcept {}
};

/// Evaluates every limit on `st` (one state per limit) and, if all allow and this is a hit,
/// commits to all of them. A request that consumed nothing reports the state as it is, with its
/// own verdict (`allowed`, `retry_after`, `delay`).
template <class A, class Guard = NoCommitGuard>
Decision decide(typename A::State* st, std::span<const Limit> limits, bool shape,
                std::int64_t cost, Effect effect, Micros now, Guard&& guard = Guard{}) {
  const std::size_t k = limits.size();
  // One named result throughout, so that it is built in the caller's place.
  Decision out = A::evaluate(st[0], limits[0], now, cost, shape);  // a policy has at least one limit
  if (k > 1) {
    out.limit_reset_after = out.reset_after;
    for (std::size_t i = 1; i < k; ++i) combine(out, A::evaluate(st[i], limits[i], now, cost, shape), false);
  }
  if (out.allowed && effect == Effect::kHit) {
    if (!guard.before_commit(st, limits, now, cost)) [[unlikely]] return out;
    for (std::size_t i = 0; i < k; ++i) A::commit(st[i], limits[i], now, cost);
    guard.after_commit(st);
    return out;
  }
  if (!out.allowed) out.delay = 0;
  if (!out.allowed && k == 1) return out;  // a lone denying limit already reports its state
  // Nothing was consumed: report the state as it is, with the verdict for `cost`.
  const bool allowed = out.allowed;
  const Micros retry_after = out.retry_after;
  const Micros delay = out.delay;
  out = A::evaluate(st[0], limits[0], now, 0, false);
  if (k > 1) out.limit_reset_after = out.reset_after;
  for (std::size_t i = 1; i < k; ++i) combine(out, A::evaluate(st[i], limits[i], now, 0, false), false);
  out.allowed = allowed;
  out.retry_after = retry_after;
  out.delay = delay;
  return out;
}

/// The state of every limit as it is at `now`, as a decision (a test of cost 0).
template <class A>
Decision as_is(const typename A::State* st, std::span<const Limit> limits, Micros now) {
  Decision out = A::evaluate(st[0], limits[0], now, 0, false);
  if (limits.size() > 1) out.limit_reset_after = out.reset_after;
  for (std::size_t i = 1; i < limits.size(); ++i) combine(out, A::evaluate(st[i], limits[i], now, 0, false), false);
  return out;
}

/// Settles a reservation on every limit (A::settle with each limit's mark): the usage of the
/// request admitted at `at` changes by `delta`. Returns the state after it, allowed (a settle is
/// always applied).
template <class A>
Decision settle_all(typename A::State* st, std::span<const Limit> limits, Micros now, Micros at,
                    std::span<const Micros> marks, std::int64_t delta) {
  for (std::size_t i = 0; i < limits.size(); ++i) {
    A::settle(st[i], limits[i], now, at, i < marks.size() ? marks[i] : 0, delta);
  }
  Decision out = as_is<A>(st, limits, now);
  out.allowed = true;
  return out;
}

/// The marks a reservation keeps (A::mark of each limit), read right after its commit.
template <class A>
void marks_of(const typename A::State* st, std::span<const Limit> limits, std::span<Micros> out) {
  for (std::size_t i = 0; i < limits.size() && i < out.size(); ++i) out[i] = A::mark(st[i], limits[i]);
}

/// Whether `policy`'s reservations are leases (Storage::renew: a concurrency policy).
inline bool leases(const Policy& policy) noexcept { return policy.strategy() == Strategy::kConcurrency; }

/// A lease's time to live: its limit's period. A lease taken (or renewed) at `at` is a log entry
/// that counts while now ≤ at + ttl: it is outstanding until then, unless released.
inline Micros lease_ttl(const Policy& policy) noexcept { return policy.limits().front().period; }

/// Whether a lease is still within its time to live at `now`: its units are in the log's entry at
/// `mark` (its commit's entry, moving_window::mark; `at` when 0), which counts while
/// mark ≥ now − ttl.
inline bool lease_alive(const Policy& policy, Micros at, Micros mark, Micros now) noexcept {
  return (mark > 0 ? mark : at) >= now - lease_ttl(policy);
}

/// The answer to a release or renewal of a lease that is not outstanding.
inline absl::Status lease_not_outstanding(std::string_view id) {
  return absl::NotFoundError(fmt::format(
      "lease \"{}\" of this key is not outstanding (never taken, released, or expired): nothing freed", id));
}

/// A renewal asked of a policy that takes no leases.
inline absl::Status renew_needs_leases(const Policy& policy) {
  return absl::InvalidArgumentError(fmt::format(
      "policy \"{}\" is {}: only a concurrency policy's leases are renewed", policy.name(),
      to_string(policy.strategy())));
}

}  // namespace floodgate::detail
