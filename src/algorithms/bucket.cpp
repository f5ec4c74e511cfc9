// Token bucket, leaky bucket (meter and shaper) and GCRA: one exact function.
//
// With amount N per period P and capacity B, all three admit a request of cost c at time t iff
//     max(tat, t) + c·T − t ≤ B·T,   T = P/N
// (token bucket: tokens(t) = B − max(0, tat − t)/T ≥ c; leaky bucket: level(t) = max(0, tat − t)/T
// and level + c ≤ B; GCRA with τ = (B − 1)·T). T is rarely a whole number of microseconds, so all
// times are multiplied by N: `tat` and `now_s` are in units of 1/N µs, T becomes P and every step
// is exact 128-bit integer arithmetic (t·N < 2^63·2^53 = 2^116; c·P, B·P < 2^106).
#include <algorithm>

#include "algorithms/arith.hpp"
#include "floodgate/algorithms.hpp"

namespace floodgate::bucket {

using detail::ceil_div;
using detail::clamp_micros;
using detail::i128;

State rescaled(const State& s, const Limit& l, Micros now) noexcept {
  if (s.amount == 0 || s.amount == l.amount) return s;
  const i128 used = std::max<i128>(0, s.tat - static_cast<i128>(now) * s.amount);
  return State{static_cast<i128>(now) * l.amount + used, l.amount};
}

namespace {

/// ⌈a / b⌉ for a ≥ 0, b > 0, in 64 bits (one division: the quotient and remainder together).
constexpr std::int64_t ceil_div64(std::int64_t a, std::int64_t b) noexcept {
  return a / b + (a % b != 0 ? 1 : 0);
}

/// The decision in 64-bit integers when every quantity but `now`·N fits (the usual case: a
/// capacity·P and cost·P below 2^63, a state in N's units, a level below 2^63); false, `d`
/// untouched, otherwise. The same formula as `evaluate_wide`, step for step.
[[gnu::always_inline]] inline bool evaluate_narrow(const State& s, const Limit& l, Micros now,
                                                    std::int64_t cost, bool shape, Decision& d) noexcept {
  std::int64_t capacity = 0;
  std::int64_t step = 0;
  if (cost < 0 || (s.amount != 0 && s.amount != l.amount) ||
      __builtin_mul_overflow(l.capacity(), l.period, &capacity) || __builtin_mul_overflow(cost, l.period, &step)) {
    return false;
  }
  const i128 ahead = static_cast<i128>(s.tat) - static_cast<i128>(now) * l.amount;
  if (ahead > static_cast<i128>(INT64_MAX)) return false;
  const std::int64_t used = ahead > 0 ? static_cast<std::int64_t>(ahead) : 0;  // level·T
  std::int64_t needed = 0;
  if (__builtin_add_overflow(used, step, &needed)) return false;
  d.limit = l.amount;
  d.period = l.period;
  d.allowed = cost == 0 || needed <= capacity;
  const std::int64_t used_after = d.allowed ? needed : used;
  const std::int64_t room = capacity - used_after;  // less than one request's worth: no division
  d.remaining = room < l.period ? 0 : room / l.period;
  d.reset_after = std::min(ceil_div64(used_after, l.amount), kNever - 1);
  if (d.allowed) {
    d.retry_after = 0;
    d.delay = shape ? std::min(ceil_div64(used, l.amount), kNever - 1) : 0;
  } else {
    d.retry_after = cost > l.capacity() ? kNever : std::min(ceil_div64(needed - capacity, l.amount), kNever - 1);
  }
  return true;
}

/// The decision in exact 128-bit arithmetic, for any state and limit.
void evaluate_wide(const State& state, const Limit& l, Micros now, std::int64_t cost, bool shape,
                   Decision& d) noexcept {
  const State s = rescaled(state, l, now);
  const i128 n = l.amount;
  const i128 p = l.period;
  const i128 capacity = static_cast<i128>(l.capacity()) * p;  // B·T, scaled
  const i128 now_s = static_cast<i128>(now) * n;
  const i128 used = std::max<i128>(s.tat, now_s) - now_s;  // level·T before this request
  const i128 needed = used + static_cast<i128>(cost) * p;

  d.limit = l.amount;
  d.period = l.period;
  d.allowed = cost == 0 || needed <= capacity;  // cost 0: even after a clock step back
  const i128 used_after = d.allowed ? needed : used;
  d.remaining = static_cast<std::int64_t>(detail::div(std::max<i128>(0, capacity - used_after), p));
  d.reset_after = clamp_micros(ceil_div(used_after, n));
  if (d.allowed) {
    d.retry_after = 0;
    d.delay = shape ? clamp_micros(ceil_div(used, n)) : 0;
  } else {
    d.retry_after = cost > l.capacity() ? kNever : clamp_micros(ceil_div(needed - capacity, n));
  }
}

}  // namespace

Decision evaluate(const State& state, const Limit& l, Micros now, std::int64_t cost,
                  bool shape) noexcept {
  Decision d;
  if (!evaluate_narrow(state, l, now, cost, shape, d)) evaluate_wide(state, l, now, cost, shape, d);
  return d;
}

Decision evaluate_exact(const State& state, const Limit& l, Micros now, std::int64_t cost,
                        bool shape) noexcept {
  Decision d;
  evaluate_wide(state, l, now, cost, shape, d);
  return d;
}

namespace {

/// `tat` after `units` more (units·P) are charged at `now_s`: a level never above kMaxBucketDrain.
i128 charged(i128 tat, i128 now_s, const Limit& l, std::int64_t units) noexcept {
  const i128 ceiling = now_s + static_cast<i128>(kMaxBucketDrain) * l.amount;
  const i128 base = std::max<i128>(tat, now_s);
  if (base >= ceiling) return base;
  return std::min<i128>(base + static_cast<i128>(units) * l.period, ceiling);
}

}  // namespace

void commit(State& s, const Limit& l, Micros now, std::int64_t cost) noexcept {
  if (cost == 0) return;
  if (s.amount != 0 && s.amount != l.amount) s = rescaled(s, l, now);
  s.tat = charged(s.tat, static_cast<i128>(now) * l.amount, l, cost);
  s.amount = l.amount;
}

Micros mark(const State& s, const Limit& l) noexcept {
  const i128 n = s.amount != 0 ? s.amount : l.amount;
  return s.tat <= 0 ? 0 : clamp_micros(detail::div(s.tat, n));
}

void settle(State& s, const Limit& l, Micros now, Micros /*at*/, Micros mark, std::int64_t delta) noexcept {
  if (delta == 0) return;
  if (s.amount != 0 && s.amount != l.amount) s = rescaled(s, l, now);
  const i128 now_s = static_cast<i128>(now) * l.amount;
  if (delta > 0) {
    s.tat = charged(s.tat, now_s, l, delta);
    s.amount = l.amount;
    return;
  }
  if (s.amount == 0) return;  // never committed: nothing to give back
  const i128 reserved_left = std::max<i128>(0, static_cast<i128>(mark) * l.amount - now_s);
  const i128 level = std::max<i128>(0, s.tat - now_s);
  const i128 give = std::min({static_cast<i128>(-delta) * l.period, reserved_left, level});
  s.tat = s.tat - give;
}

Micros expires_at(const State& s, const Limit& l) noexcept {
  return clamp_micros(ceil_div(std::max<i128>(0, s.tat), s.amount != 0 ? s.amount : l.amount));
}

}  // namespace floodgate::bucket
