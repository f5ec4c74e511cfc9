// floodgate/algorithms.hpp — the rate-limiting algorithms as pure functions.
//
// Each algorithm is a namespace with:
//   struct State                      the per-key, per-limit state; value-initialised = "absent"
//   Decision evaluate(const State&, const Limit&, Micros now, int64_t cost)
//                                     what a request of `cost` at `now` gets, without changing
//                                     anything (remaining/reset_after as if it were admitted)
//   void commit(State&, const Limit&, Micros now, int64_t cost)
//                                     applies an admitted request (call only if evaluate allowed)
//   Micros expires_at(const State&, const Limit&)
//                                     the time from which the state equals "absent"
//   void settle(State&, const Limit&, Micros now, Micros at, Micros mark, int64_t delta)
//                                     settles a reservation admitted at `at` whose actual cost
//                                     differs from its estimate by `delta` (docs/algorithms.md,
//                                     "Reservations"): the state becomes what it would be had the
//                                     request cost `delta` more (delta < 0: less) at `at`, as far
//                                     as the state still remembers that time; usage it can no
//                                     longer attribute is charged at `now` if positive (even past
//                                     the limit) and dropped if negative. Never negative usage.
//   Micros mark(const State&, const Limit&)
//                                     read right after a reservation's commit: what `settle`
//                                     needs to bound a refund (the buckets: when the reserved
//                                     units have drained); 0 for the windows, which need only `at`
//
// Nothing here reads a clock, allocates (but for the moving window's log), locks or throws. The
// caller guarantees the preconditions, which `Limit::make`/`parse_limits` and `Limiter` check once:
// a valid Limit, 0 ≤ cost ≤ kMaxAmount, now ≥ 0. A cost of 0 is always allowed and consumes
// nothing. If `now` is earlier than the state's time (a clock stepped back), no time is taken to
// have passed. docs/algorithms.md states the exact semantics with worked examples; the Redis Lua
// scripts mirror these functions line for line.
#pragma once

#include <cstddef>
#include <cstdint>

#include "floodgate/clock.hpp"
#include "floodgate/decision.hpp"
#include "floodgate/entry_log.hpp"
#include "floodgate/rate.hpp"

namespace floodgate {

/// A signed 128-bit integer (GCC and Clang), for exact intermediate products.
__extension__ typedef __int128 int128;

enum class Strategy : std::uint8_t {
  kFixedWindow,           ///< counter per window; windows aligned to the clock or to the first hit
  kMovingWindow,          ///< exact log of the last period
  kSlidingWindowCounter,  ///< weighted current + previous epoch-aligned buckets
  kTokenBucket,           ///< capacity = burst, refills amount per period, starts full
  kLeakyBucket,           ///< meter that rejects on overflow; as a shaper also returns `delay`
  kGcra,                  ///< generic cell rate algorithm (virtual scheduling)
  /// At most `amount` leases outstanding per key (Limit::concurrent): the moving window's log,
  /// whose period is a lease's time to live, with leases taken as reservations and released by
  /// settling them to 0 (docs/algorithms.md, "Concurrency").
  kConcurrency,
};

/// The strategy's name as used on the command line and in config ("fixed-window", …, "gcra").
const char* to_string(Strategy s) noexcept;

/// Parses a strategy name; accepts the names above and '_' for '-'.
absl::StatusOr<Strategy> parse_strategy(std::string_view name);

/// The strategy whose functions (and state, and Redis script) run `s`: itself, but the moving
/// window for kConcurrency (a lease is a log entry that leaves the log when released or when its
/// time to live ends).
constexpr Strategy algorithm_of(Strategy s) noexcept {
  return s == Strategy::kConcurrency ? Strategy::kMovingWindow : s;
}

/// Whether the strategy uses `Limit::burst` (token bucket, leaky bucket, GCRA).
constexpr bool uses_burst(Strategy s) noexcept {
  return s == Strategy::kTokenBucket || s == Strategy::kLeakyBucket || s == Strategy::kGcra;
}

/// The longest a bucket (token bucket, leaky bucket, GCRA) takes to drain: 2^52 µs, about 142
/// years. A limit whose capacity takes longer (capacity × period / amount) is refused by
/// Policy::make, and a settle's charge past it saturates there: the key is denied for 142 years
/// instead of a sum that grows without end (or past what the Redis scripts' doubles hold).
inline constexpr Micros kMaxBucketDrain = Micros{1} << 52;

namespace fixed_window {
/// Window k is [k·P, (k+1)·P): aligned to the Unix epoch, so all keys reset together
/// (GitHub-style); for a calendar limit, the calendar's period holding the time
/// (Limit::window_at), so reset_after, retry_after and expires_at reach the real next period
/// start. 16 bytes.
struct State {
  Micros start = 0;        ///< start of the window `count` belongs to
  std::int64_t count = 0;  ///< units admitted in that window; 0 = absent
};
Decision evaluate(const State& s, const Limit& l, Micros now, std::int64_t cost) noexcept;
void commit(State& s, const Limit& l, Micros now, std::int64_t cost) noexcept;
Micros expires_at(const State& s, const Limit& l) noexcept;
/// The window that held `at` still holds the key's count: `delta` is added to it (never below 0).
/// Otherwise a positive delta is charged to the window at `now`, a negative one dropped.
void settle(State& s, const Limit& l, Micros now, Micros at, Micros mark, std::int64_t delta) noexcept;
inline Micros mark(const State&, const Limit&) noexcept { return 0; }
}  // namespace fixed_window

namespace fixed_window_first_hit {
/// A window opens at the key's first admitted request and lasts one period; a denied request
/// never opens, extends or charges a window. 16 bytes.
using State = fixed_window::State;
Decision evaluate(const State& s, const Limit& l, Micros now, std::int64_t cost) noexcept;
void commit(State& s, const Limit& l, Micros now, std::int64_t cost) noexcept;
Micros expires_at(const State& s, const Limit& l) noexcept;
/// The window open at `now` opened at or before `at`: `delta` is added to its count (never below
/// 0). Otherwise a positive delta is charged as a hit at `now` would be (opening a window if none
/// is open), a negative one dropped.
void settle(State& s, const Limit& l, Micros now, Micros at, Micros mark, std::int64_t delta) noexcept;
inline Micros mark(const State&, const Limit&) noexcept { return 0; }
}  // namespace fixed_window_first_hit

namespace moving_window {
/// The exact log of the last period, oldest first; entries admitted at the same instant are
/// merged, so it holds at most min(amount, distinct instants in a period) entries. `total` is the
/// sum of the log's counts, so a decision walks only the entries that have left the window;
/// `front_at` and `back_at` are the times of the log's first and last entries (0 when it is
/// empty), so that a decision reads the log's buffer only when entries leave the window or it
/// needs an entry between them (a denial of a cost less than the amount, when the window holds
/// more than one unit). Whoever changes `log` keeps the three (commit does). 40 bytes.
struct State {
  State() = default;  // not an aggregate: `State s{}` value-initialises the log
  EntryLog log;
  std::int64_t total = 0;
  Micros front_at = 0;
  Micros back_at = 0;
};
static_assert(sizeof(State) == 40);
Decision evaluate(const State& s, const Limit& l, Micros now, std::int64_t cost) noexcept;
/// Appends the request and drops entries older than the period. May allocate: the log's buffer
/// doubles when full (at least 4 entries), and halves when three quarters empty.
void commit(State& s, const Limit& l, Micros now, std::int64_t cost);
/// The entries by which commit(s, l, now, cost) would change the size of the log's buffer: more
/// when it is full and the request needs an entry of its own, fewer when it is three quarters
/// empty once the entries that have left the window are dropped, else 0; so that a storage can
/// refuse a growth before it, and account for a buffer only when its size changes.
std::ptrdiff_t commit_resize(const State& s, const Limit& l, Micros now, std::int64_t cost) noexcept;
/// Whether commit halves a buffer of `capacity` entries that holds `size` once the entries that
/// have left the window are dropped: when three quarters empty, above 64 entries.
constexpr bool shrinks(std::size_t size, std::size_t capacity) noexcept {
  return capacity > 64 && size * 4 < capacity;
}
/// commit_resize's quick part, inline: true when commit(s, l, now, cost) certainly leaves the
/// buffer's size as it is (nothing leaves the window, and the request merges, or the buffer is
/// neither full nor to be halved); false when commit_resize has to say.
inline bool commit_keeps_size(const State& s, const Limit& l, Micros now, std::int64_t cost) noexcept {
  if (cost == 0) return true;
  if (s.log.empty() || s.front_at < now - l.period) return false;
  if (s.back_at >= now) return true;
  return !s.log.full() && !shrinks(s.log.size(), s.log.capacity());
}
Micros expires_at(const State& s, const Limit& l) noexcept;
/// The reservation's units are in the log's entry at `mark` (the time of the entry its commit went
/// to: `at`, or a later entry it merged into when requests of different threads or clients commit
/// out of order; `at` when mark is 0). While that entry is in the window at `now`
/// (mark ≥ now − P), it takes `delta` (an entry that falls to 0 leaves the log; a refund takes no
/// more than the entry holds). Otherwise, or if the log holds no entry there, a positive delta is
/// appended at `now` like a commit (even past the limit) and a negative one dropped. May
/// allocate, like commit.
void settle(State& s, const Limit& l, Micros now, Micros at, Micros mark, std::int64_t delta);
/// Read right after a commit: the time of the log's newest entry, which holds what was just
/// committed (a commit appends at `now`, or merges into the newest entry when that is not older).
inline Micros mark(const State& s, const Limit&) noexcept { return s.back_at; }
/// The capacity of the log's buffer after settle(s, l, now, at, mark, delta), without settling.
std::size_t settle_capacity(const State& s, const Limit& l, Micros now, Micros at, std::int64_t delta) noexcept;
}  // namespace moving_window

namespace sliding_window {
/// Epoch-aligned buckets [k·P, (k+1)·P); weighted count = current + floor(previous·(P−elapsed)/P).
/// 24 bytes.
struct State {
  Micros start = 0;           ///< start of the bucket `current` counts
  std::int64_t current = 0;
  std::int64_t previous = 0;  ///< the bucket before `start`
};
Decision evaluate(const State& s, const Limit& l, Micros now, std::int64_t cost) noexcept;
void commit(State& s, const Limit& l, Micros now, std::int64_t cost) noexcept;
Micros expires_at(const State& s, const Limit& l) noexcept;
/// The buckets are first brought to `now`; then the bucket that counted `at` — the current or the
/// previous one — takes `delta` (never below 0). A bucket older than those: a positive delta goes
/// to the current bucket, a negative one is dropped.
void settle(State& s, const Limit& l, Micros now, Micros at, Micros mark, std::int64_t delta) noexcept;
inline Micros mark(const State&, const Limit&) noexcept { return 0; }
}  // namespace sliding_window

namespace bucket {
/// Token bucket, leaky bucket (meter and shaper) and GCRA are one function: for the same amount N,
/// period P and capacity B they admit exactly the same requests (docs/algorithms.md shows why).
/// The state is GCRA's theoretical arrival time, kept in units of 1/N µs so that every step is
/// exact integer arithmetic: tokens(t) = B − max(0, tat − t·N)/P. 24 bytes.
///
/// When a limit changes (same period; see Policy::state_id): the consumed level
/// used = max(tat, t·N) − t·N (level × P, whatever N is) is carried over unchanged at the first
/// decision t under the new amount N', tat' = t·N' + used: the same tokens are in use, and from t
/// they drain at the new rate; a new capacity applies at once. `amount` says which N `tat` counts
/// in; 0 = never committed.
struct State {
  /// A 128-bit integer kept as two 64-bit halves: 8-byte aligned, so that the state is 24 bytes
  /// and not 32 (the memory store's record for a bucket key is then 56 bytes, not 64).
  struct Int128 {
    std::uint64_t lo = 0;
    std::int64_t hi = 0;
    Int128() = default;
    Int128(int128 v) noexcept  // NOLINT: converts implicitly, like the int128 it stores
        : lo(static_cast<std::uint64_t>(v)), hi(static_cast<std::int64_t>(v >> 64)) {}
    operator int128() const noexcept {  // NOLINT
      return static_cast<int128>(hi) * (int128{1} << 64) + static_cast<int128>(lo);
    }
  };
  Int128 tat;  ///< time (× amount) at which the bucket is full again / the leaky bucket empty
  std::int64_t amount = 0;  ///< the N `tat` is scaled by
};
static_assert(sizeof(State) == 24);
/// `s` in the units of `l` at `now` (the carry-over above); `s` itself if it already is.
State rescaled(const State& s, const Limit& l, Micros now) noexcept;
/// `shape` fills Decision::delay (leaky bucket as a shaper).
Decision evaluate(const State& s, const Limit& l, Micros now, std::int64_t cost,
                  bool shape = false) noexcept;
/// `evaluate` in 128-bit arithmetic throughout: `evaluate` takes a 64-bit path when every
/// quantity fits, and must agree with this one on every input (tests compare the two).
Decision evaluate_exact(const State& s, const Limit& l, Micros now, std::int64_t cost,
                        bool shape = false) noexcept;
void commit(State& s, const Limit& l, Micros now, std::int64_t cost) noexcept;
Micros expires_at(const State& s, const Limit& l) noexcept;
/// The time (µs, rounded down) at which everything committed so far — a reservation, read right
/// after its commit — has drained: ⌊tat / N⌋.
Micros mark(const State& s, const Limit& l) noexcept;
/// A positive delta is charged at `now`: tat = max(tat, now·N) + delta·P, even past the capacity
/// (the bucket is in debt; later requests wait until it drains). While the reservation's units
/// are still in the bucket, that is exactly the state had it cost `delta` more at `at`; once they
/// have drained, it is usage charged now. A negative delta gives back at most what is left of the
/// reservation's units, those committed before `mark` and not yet drained at `now`:
/// tat −= min(−delta·P, max(0, mark·N − now·N), max(0, tat − now·N)).
void settle(State& s, const Limit& l, Micros now, Micros at, Micros mark, std::int64_t delta) noexcept;
}  // namespace bucket

}  // namespace floodgate
