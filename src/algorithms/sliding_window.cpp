// Sliding window counter: the weighted two-bucket approximation of the moving window, with
// epoch-aligned buckets (first-hit buckets would let a client bypass the limit: docs/algorithms.md).
#include <algorithm>

#include "algorithms/arith.hpp"
#include "floodgate/algorithms.hpp"

namespace floodgate::sliding_window {

namespace {

using detail::i128;

struct Counts {
  Micros start;  // start of the bucket containing now
  std::int64_t current;
  std::int64_t previous;
};

Counts counts_at(const State& s, const Limit& l, Micros now) noexcept {
  const Micros start = detail::window_start(now, l.period);
  if (s.current == 0 && s.previous == 0) return {start, 0, 0};
  if (s.start == start) return {start, s.current, s.previous};
  if (s.start == start - l.period) return {start, 0, s.current};
  if (s.start > start) return {s.start, s.current, s.previous};  // clock stepped back
  return {start, 0, 0};
}

// ⌊previous·(P − elapsed)/P⌋
std::int64_t weighted_previous(std::int64_t previous, Micros elapsed, Micros period) noexcept {
  if (previous == 0) return 0;  // an empty previous bucket (often): no division
  return static_cast<std::int64_t>(
      detail::div(static_cast<i128>(previous) * (period - elapsed), period));
}

// The smallest elapsed e in [0, P] with ⌊prev·(P−e)/P⌋ ≤ room (room ≥ 0, prev ≥ 0).
Micros first_elapsed_with_room(std::int64_t prev, std::int64_t room, Micros period) noexcept {
  if (prev == 0) return 0;
  // ⌊prev·(P−e)/P⌋ ≤ room  ⇔  prev·(P−e) ≤ (room+1)·P − 1  ⇔  P − e ≤ ⌊((room+1)·P − 1)/prev⌋
  const i128 max_left = detail::div(static_cast<i128>(room + 1) * period - 1, prev);
  return static_cast<Micros>(std::max<i128>(0, period - max_left));
}

}  // namespace

Decision evaluate(const State& s, const Limit& l, Micros now, std::int64_t cost) noexcept {
  const Counts c = counts_at(s, l, now);
  const Micros elapsed = std::max<Micros>(0, now - c.start);
  const std::int64_t weighted = c.current + weighted_previous(c.previous, elapsed, l.period);
  Decision d;
  d.limit = l.amount;
  d.period = l.period;
  d.allowed = cost == 0 || cost <= l.amount - weighted;  // cost 0: even after a clock step back
  const std::int64_t current_after = d.allowed ? c.current + cost : c.current;
  const std::int64_t weighted_after = d.allowed ? weighted + cost : weighted;
  d.remaining = std::max<std::int64_t>(0, l.amount - weighted_after);
  if (current_after > 0) {
    d.reset_after = c.start + 2 * l.period - now;
  } else if (c.previous > 0) {
    d.reset_after = c.start + l.period - now;
  } else {
    d.reset_after = 0;
  }
  if (d.allowed) {
    d.retry_after = 0;
  } else if (cost > l.amount) {
    d.retry_after = kNever;
  } else if (cost <= l.amount - c.current) {  // the Lua's form: it cannot round
    // Room appears later in this bucket, as the previous bucket's weight falls.
    const Micros e = first_elapsed_with_room(c.previous, l.amount - cost - c.current, l.period);
    d.retry_after = c.start + e - now;
  } else {
    // Only in the next bucket, where this bucket's count becomes the previous one.
    const Micros e = first_elapsed_with_room(c.current, l.amount - cost, l.period);
    d.retry_after = c.start + l.period + e - now;
  }
  return d;
}

void commit(State& s, const Limit& l, Micros now, std::int64_t cost) noexcept {
  if (cost == 0) return;
  const Counts c = counts_at(s, l, now);
  s = State{c.start, detail::sat_add(c.current, cost), c.previous};
}

void settle(State& s, const Limit& l, Micros now, Micros at, Micros /*mark*/, std::int64_t delta) noexcept {
  if (delta == 0) return;
  Counts c = counts_at(s, l, now);
  const Micros bucket = detail::window_start(at, l.period);
  if (bucket == c.start) {
    c.current = detail::sat_add(c.current, delta);  // never below 0, never past kMaxCount
  } else if (bucket == c.start - l.period) {
    c.previous = detail::sat_add(c.previous, delta);
  } else if (delta > 0) {
    c.current = detail::sat_add(c.current, delta);
  } else {
    return;
  }
  s = State{c.start, c.current, c.previous};
}

Micros expires_at(const State& s, const Limit& l) noexcept {
  if (s.current > 0) return s.start + 2 * l.period;
  if (s.previous > 0) return s.start + l.period;
  return 0;
}

}  // namespace floodgate::sliding_window
