// Fixed window: one counter per window; clock-aligned or anchored at the first admitted request.
#include <algorithm>

#include "algorithms/arith.hpp"
#include "floodgate/algorithms.hpp"

namespace floodgate {

namespace {
// A fixed window's decision, both anchors: `count` units are in the window at `now`, which
// (or the one a hit opens) ends at `end`. Mirrored by window_decision in the Redis scripts.
[[gnu::always_inline]] inline Decision window_decision(const Limit& l, Micros now, std::int64_t cost,
                                                       std::int64_t count, Micros end) noexcept {
  Decision d;
  d.limit = l.amount;
  d.period = l.period;
  d.allowed = cost == 0 || cost <= l.amount - count;  // count > amount after a lowered limit
  const std::int64_t after = d.allowed ? count + cost : count;
  d.remaining = std::max<std::int64_t>(0, l.amount - after);
  d.reset_after = after > 0 ? end - now : 0;
  // Denied with cost ≤ amount: the window is open (first hit), or the clock's.
  d.retry_after = d.allowed ? 0 : (cost > l.amount ? kNever : end - now);
  return d;
}
}  // namespace

namespace fixed_window {

namespace {
// The window the key is in at `now`: the clock's (a calendar period for a calendar limit), or
// the stored one if the clock stepped back into an earlier window (no time is taken to have
// passed).
Period current_window(const State& s, const Limit& l, Micros now) noexcept {
  const Period w = l.window_at(now);
  return (s.count > 0 && s.start > w.start) ? l.window_at(s.start) : w;
}
}  // namespace

Decision evaluate(const State& s, const Limit& l, Micros now, std::int64_t cost) noexcept {
  const Period w = current_window(s, l, now);
  const Micros start = w.start;
  const Micros end = w.end;
  const std::int64_t count = (s.count > 0 && s.start == start) ? s.count : 0;
  return window_decision(l, now, cost, count, end);
}

void commit(State& s, const Limit& l, Micros now, std::int64_t cost) noexcept {
  if (cost == 0) return;
  const Micros start = current_window(s, l, now).start;
  if (s.count == 0 || s.start != start) s = State{start, 0};
  s.count = detail::sat_add(s.count, cost);
}

Micros expires_at(const State& s, const Limit& l) noexcept {
  if (s.count == 0) return 0;
  return l.calendar ? l.calendar.period_at(s.start).end : s.start + l.period;
}

void settle(State& s, const Limit& l, Micros now, Micros at, Micros /*mark*/, std::int64_t delta) noexcept {
  if (delta == 0) return;
  const Micros start = current_window(s, l, now).start;
  if (s.count > 0 && s.start == start && l.window_at(at).start == start) {
    s.count = detail::sat_add(s.count, delta);  // never below 0, never past kMaxCount
  } else if (delta > 0) {
    if (s.count == 0 || s.start != start) s = State{start, 0};
    s.count = detail::sat_add(s.count, delta);
  }
}

}  // namespace fixed_window

namespace fixed_window_first_hit {

namespace {
bool open_at(const State& s, const Limit& l, Micros now) noexcept {
  return s.count > 0 && now < s.start + l.period;
}
}  // namespace

Decision evaluate(const State& s, const Limit& l, Micros now, std::int64_t cost) noexcept {
  const bool open = open_at(s, l, now);
  const std::int64_t count = open ? s.count : 0;
  // The window the key is in after this decision, if any.
  const Micros end = open ? s.start + l.period : now + l.period;
  return window_decision(l, now, cost, count, end);
}

void commit(State& s, const Limit& l, Micros now, std::int64_t cost) noexcept {
  if (cost == 0) return;
  if (!open_at(s, l, now)) s = State{now, 0};
  s.count = detail::sat_add(s.count, cost);
}

Micros expires_at(const State& s, const Limit& l) noexcept {
  return s.count == 0 ? 0 : s.start + l.period;
}

void settle(State& s, const Limit& l, Micros now, Micros at, Micros /*mark*/, std::int64_t delta) noexcept {
  if (delta == 0) return;
  if (open_at(s, l, now) && s.start <= at) {
    s.count = detail::sat_add(s.count, delta);
  } else if (delta > 0) {
    fixed_window_first_hit::commit(s, l, now, delta);
  }
}

}  // namespace fixed_window_first_hit

}  // namespace floodgate
