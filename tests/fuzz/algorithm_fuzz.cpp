// Action-trace fuzzer for the algorithms: the input is a sequence of (time step, cost) actions for
// one key; each algorithm must keep its invariants, and the bucket must agree with an independent
// exact token-bucket model (tokens kept as a fraction over P).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include <fuzzer/FuzzedDataProvider.h>

#include "floodgate/algorithms.hpp"

using namespace floodgate;

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

template <class State, class Evaluate, class Commit>
void check(const Limit& l, FuzzedDataProvider& in, Evaluate evaluate, Commit commit, bool bucket) {
  State s{};
  Micros t = in.ConsumeIntegralInRange<Micros>(0, Micros{1} << 50);
  const int128 p = l.period;
  int128 tokens = static_cast<int128>(l.capacity()) * p;
  Micros last = t;
  while (in.remaining_bytes() > 0) {
    t += in.ConsumeIntegralInRange<Micros>(0, l.period * 2);
    const std::int64_t cost = in.ConsumeIntegralInRange<std::int64_t>(0, l.capacity() + 1);
    const Decision d = evaluate(s, l, t, cost);
    require(d.remaining >= 0);
    require(d.reset_after >= 0);
    require(d.allowed ? d.retry_after == 0 : d.retry_after >= 1);
    if (!d.allowed && d.can_retry()) {
      require(evaluate(s, l, t + d.retry_after, cost).allowed);
      require(!evaluate(s, l, t + d.retry_after - 1, cost).allowed);
    }
    if (bucket) {
      tokens = std::min<int128>(static_cast<int128>(l.capacity()) * p,
                                tokens + static_cast<int128>(t - last) * l.amount);
      last = t;
      require(d.allowed == (tokens >= static_cast<int128>(cost) * p));
      if (d.allowed) tokens -= static_cast<int128>(cost) * p;
      require(d.remaining == static_cast<std::int64_t>(tokens / p));
    }
    if (d.allowed) commit(s, l, t, cost);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const int which = in.ConsumeIntegralInRange<int>(0, 4);
  const std::int64_t amount = in.ConsumeIntegralInRange<std::int64_t>(1, 1000);
  const Micros period = in.ConsumeIntegralInRange<Micros>(1, 10'000'000);
  const std::int64_t burst = which == 4 ? in.ConsumeIntegralInRange<std::int64_t>(0, 1000) : 0;
  const Limit l = Limit::make(amount, period, burst).value();
  switch (which) {
    case 0:
      check<fixed_window::State>(l, in, fixed_window::evaluate, fixed_window::commit, false);
      break;
    case 1:
      check<fixed_window::State>(l, in, fixed_window_first_hit::evaluate,
                                 fixed_window_first_hit::commit, false);
      break;
    case 2:
      check<sliding_window::State>(l, in, sliding_window::evaluate, sliding_window::commit, false);
      break;
    case 3:
      check<moving_window::State>(l, in, moving_window::evaluate, moving_window::commit, false);
      break;
    default:
      check<bucket::State>(
          l, in,
          [](const bucket::State& s, const Limit& lim, Micros now, std::int64_t c) {
            return bucket::evaluate(s, lim, now, c);
          },
          bucket::commit, true);
  }
  return 0;
}
