// The pure algorithm functions: the worked examples of docs/algorithms.md, and properties checked on random
// request sequences against independent reference models.
#include "floodgate/algorithms.hpp"

#include <algorithm>
#include <deque>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "storage/decide.hpp"

namespace floodgate {
namespace {

constexpr Micros kSec = kMicrosPerSecond;

Limit limit(std::int64_t amount, Micros period, std::int64_t burst = 0) {
  return Limit::make(amount, period, burst).value();
}

// ---- the worked example: the moving window, 10/minute -------------------------------------------------
TEST(MovingWindow, Seed000TenPerMinute) {
  const Limit l = limit(10, 60 * kSec);
  moving_window::State s;
  auto hit = [&](Micros t, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
      const Decision d = moving_window::evaluate(s, l, t, 1);
      if (!d.allowed) return false;
      moving_window::commit(s, l, t, 1);
    }
    return true;
  };
  EXPECT_TRUE(hit(10 * kSec, 1));
  EXPECT_TRUE(hit(20 * kSec, 2));
  EXPECT_TRUE(hit(30 * kSec, 4));
  EXPECT_TRUE(hit(50 * kSec, 3));                                       // total 10
  EXPECT_FALSE(moving_window::evaluate(s, l, 51 * kSec, 1).allowed);   // full
  EXPECT_TRUE(hit(71 * kSec, 1));   // the 10th most recent (00:00:10) is 61 s old
  const Decision d = moving_window::evaluate(s, l, 72 * kSec, 1);
  EXPECT_FALSE(d.allowed);          // the 10th most recent (00:00:20) is 52 s old
  // It leaves the window one microsecond after it is 60 s old: at 00:01:20.000001.
  EXPECT_EQ(d.retry_after, 20 * kSec + 60 * kSec + 1 - 72 * kSec);
  EXPECT_EQ(d.remaining, 0);
}

// ---- the worked example: the sliding window counter, 100/minute with 80 + 40 -------------------------
TEST(SlidingWindow, Seed000EightyPlusForty) {
  const Limit l = limit(100, 60 * kSec);
  const Micros bucket = 600 * kSec;  // an epoch-aligned minute
  const sliding_window::State s{bucket, 80, 40};
  // 30 s into the bucket: 80 + 0.5·40 = 100 → denied.
  const Decision at30 = sliding_window::evaluate(s, l, bucket + 30 * kSec, 1);
  EXPECT_FALSE(at30.allowed);
  EXPECT_EQ(at30.remaining, 0);
  // 40 s in: 80 + ⌊40·20/60⌋ = 93 → allowed, 6 left after it.
  const Decision at40 = sliding_window::evaluate(s, l, bucket + 40 * kSec, 1);
  EXPECT_TRUE(at40.allowed);
  EXPECT_EQ(at40.remaining, 100 - 94);
  // Room for one: ⌊40·(60 s − e)/60 s⌋ ≤ 19 ⇔ 40·(60 s − e) < 20·60 s ⇔ e > 30 s: 1 µs later.
  EXPECT_EQ(at30.retry_after, 1);
  // Room for two: ⌊40·(60 s − e)/60 s⌋ ≤ 18 ⇔ e > 31.5 s.
  const Decision two = sliding_window::evaluate(s, l, bucket + 30 * kSec, 2);
  EXPECT_EQ(two.retry_after, 1'500'001);
  EXPECT_FALSE(sliding_window::evaluate(s, l, bucket + 31'500'000, 2).allowed);
  EXPECT_TRUE(sliding_window::evaluate(s, l, bucket + 31'500'001, 2).allowed);
}

// ---- the worked example: a token bucket of 3 that refills one token every 4 s ---------------------------
TEST(Bucket, Seed001ThreeTokensOneEveryFourSeconds) {
  const Limit l = limit(3, 12 * kSec);
  bucket::State s;
  struct Step {
    Micros t;
    bool allowed;
    std::int64_t remaining;
    Micros retry_after;
    Micros reset_after;
  };
  const Step steps[] = {
      {0, true, 2, 0, 4 * kSec},           {0, true, 1, 0, 8 * kSec},
      {0, true, 0, 0, 12 * kSec},          {0, false, 0, 4 * kSec, 12 * kSec},
      {1 * kSec, false, 0, 3 * kSec, 11 * kSec}, {4 * kSec, true, 0, 0, 12 * kSec},
      {4 * kSec, false, 0, 4 * kSec, 12 * kSec}, {6 * kSec, false, 0, 2 * kSec, 10 * kSec},
  };
  for (const Step& step : steps) {
    const Decision d = bucket::evaluate(s, l, step.t, 1);
    EXPECT_EQ(d.allowed, step.allowed) << step.t;
    EXPECT_EQ(d.remaining, step.remaining) << step.t;
    EXPECT_EQ(d.retry_after, step.retry_after) << step.t;
    EXPECT_EQ(d.reset_after, step.reset_after) << step.t;
    if (d.allowed) bucket::commit(s, l, step.t, 1);
  }
}

// ---- the worked example: the leaky bucket as a shaper returns the wait for the water already in it ------
TEST(Bucket, Seed002ShaperDelayIsLevelBeforeOverRate) {
  const Limit l = limit(3, 12 * kSec);  // leaks one drop every 4 s, holds 3
  bucket::State s;
  const Micros expected[] = {0, 4 * kSec, 8 * kSec};
  for (Micros want : expected) {
    const Decision d = bucket::evaluate(s, l, 0, 1, /*shape=*/true);
    ASSERT_TRUE(d.allowed);
    EXPECT_EQ(d.delay, want);
    bucket::commit(s, l, 0, 1);
  }
  const Decision full = bucket::evaluate(s, l, 0, 1, true);
  EXPECT_FALSE(full.allowed);
  EXPECT_EQ(full.delay, 0);
}

TEST(FixedWindow, ClockAlignedResetsAtTheBoundaryForEveryKey) {
  const Limit l = limit(10, 60 * kSec);
  fixed_window::State s;
  const Micros t = 45 * kSec;  // 00:00:45
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(fixed_window::evaluate(s, l, t, 1).allowed);
    fixed_window::commit(s, l, t, 1);
  }
  const Decision d = fixed_window::evaluate(s, l, t, 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 15 * kSec);  // the window [0, 60 s) ends at 00:01:00
  EXPECT_TRUE(fixed_window::evaluate(s, l, 60 * kSec, 10).allowed);
  EXPECT_EQ(fixed_window::evaluate(s, l, t, 11).retry_after, kNever);
}

TEST(FixedWindow, FirstHitSeed000WindowFromFirstRequest) {
  const Limit l = limit(10, 60 * kSec);
  fixed_window_first_hit::State s;
  const Micros t = 45 * kSec;  // 00:00:45 opens [00:00:45, 00:01:45)
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(fixed_window_first_hit::evaluate(s, l, t + i * kSec, 1).allowed);
    fixed_window_first_hit::commit(s, l, t + i * kSec, 1);
  }
  const Decision d = fixed_window_first_hit::evaluate(s, l, 100 * kSec, 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 5 * kSec);  // until 00:01:45
  EXPECT_TRUE(fixed_window_first_hit::evaluate(s, l, 105 * kSec, 10).allowed);
  // A denied request opens nothing.
  fixed_window_first_hit::State fresh;
  EXPECT_FALSE(fixed_window_first_hit::evaluate(fresh, l, 0, 11).allowed);
  EXPECT_EQ(fixed_window_first_hit::evaluate(fresh, l, 0, 11).reset_after, 0);
}

TEST(Algorithms, CostZeroIsAllowedAndConsumesNothing) {
  const Limit l = limit(1, kSec);
  fixed_window::State f{0, 1};
  EXPECT_TRUE(fixed_window::evaluate(f, l, 10, 0).allowed);
  bucket::State b;
  bucket::commit(b, l, 0, 1);
  const Decision d = bucket::evaluate(b, l, 0, 0);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  bucket::commit(b, l, 0, 0);
  EXPECT_EQ(bucket::expires_at(b, l), kSec);
  fixed_window_first_hit::State fh;
  fixed_window_first_hit::commit(fh, l, 5, 0);
  EXPECT_EQ(fh.count, 0);  // no window opened
}

// ---- properties on random sequences -----------------------------------------------------------

// Drives one algorithm through random requests; at every denial checks that retry_after is the
// exact earliest time the same request is allowed (denied one microsecond earlier).
template <class State, class Evaluate, class Commit>
void check_retry_after_is_exact(const Limit& l, Evaluate evaluate, Commit commit,
                                std::uint32_t seed) {
  std::mt19937_64 rng(seed);
  State s{};
  Micros t = 1'000 * kSec;
  int denials = 0;
  for (int i = 0; i < 3000; ++i) {
    t += static_cast<Micros>(rng() % static_cast<std::uint64_t>(l.period / 3 + 1));
    const std::int64_t cost = 1 + static_cast<std::int64_t>(rng() % 6);  // up to 6 of 7
    const Decision d = evaluate(s, l, t, cost);
    if (d.allowed) {
      commit(s, l, t, cost);
      continue;
    }
    ++denials;
    ASSERT_GE(d.retry_after, 1);
    if (!d.can_retry()) continue;
    ASSERT_TRUE(evaluate(s, l, t + d.retry_after, cost).allowed) << "late retry at i=" << i;
    ASSERT_FALSE(evaluate(s, l, t + d.retry_after - 1, cost).allowed) << "early retry at i=" << i;
  }
  EXPECT_GT(denials, 100);  // the sequence did exercise denials
}

TEST(Properties, RetryAfterIsTheExactEarliestTime) {
  for (std::uint32_t seed = 1; seed <= 5; ++seed) {
    const Limit l = limit(7, 3 * kSec + 7);
    check_retry_after_is_exact<fixed_window::State>(l, fixed_window::evaluate, fixed_window::commit, seed);
    check_retry_after_is_exact<fixed_window::State>(l, fixed_window_first_hit::evaluate,
                                                    fixed_window_first_hit::commit, seed);
    check_retry_after_is_exact<sliding_window::State>(l, sliding_window::evaluate,
                                                      sliding_window::commit, seed);
    check_retry_after_is_exact<moving_window::State>(l, moving_window::evaluate,
                                                     moving_window::commit, seed);
    auto bucket_eval = [](const bucket::State& s, const Limit& lim, Micros t, std::int64_t c) {
      return bucket::evaluate(s, lim, t, c);
    };
    check_retry_after_is_exact<bucket::State>(l, bucket_eval, bucket::commit, seed);
    check_retry_after_is_exact<bucket::State>(limit(7, 3 * kSec + 7, 2), bucket_eval,
                                              bucket::commit, seed);
  }
}

// The moving window against a naive log of every unit's timestamp.
TEST(Properties, MovingWindowMatchesNaiveLog) {
  std::mt19937_64 rng(42);
  const Limit l = limit(20, 5 * kSec);
  moving_window::State s;
  std::deque<Micros> naive;
  Micros t = 0;
  for (int i = 0; i < 20000; ++i) {
    t += static_cast<Micros>(rng() % 400'000);
    const std::int64_t cost = static_cast<std::int64_t>(rng() % 4);
    std::int64_t in_window = 0;
    for (Micros at : naive) in_window += at >= t - l.period ? 1 : 0;
    const bool want = in_window + cost <= l.amount;
    const Decision d = moving_window::evaluate(s, l, t, cost);
    ASSERT_EQ(d.allowed, want) << i;
    ASSERT_EQ(d.remaining, l.amount - in_window - (want ? cost : 0)) << i;
    if (want) {
      moving_window::commit(s, l, t, cost);
      for (std::int64_t k = 0; k < cost; ++k) naive.push_back(t);
    }
    while (!naive.empty() && naive.front() < t - l.period) naive.pop_front();
  }
  EXPECT_LE(s.log.size(), static_cast<std::size_t>(l.amount));  // memory bounded by the amount
}

// A long log (up to 300 entries), a clock that also stands still and steps back, costs 0–3: the
// decision, remaining and reset_after against a list of single units (a unit admitted after the
// clock stepped back is logged at the newest time already logged: docs/algorithms.md).
TEST(Properties, MovingWindowLongLogWithClockStepsMatchesNaiveLog) {
  std::mt19937_64 rng(2026);
  const Limit l = limit(300, 2 * kSec);
  moving_window::State s;
  std::vector<Micros> naive;  // every admitted unit's time, in admission order
  Micros t = 10 * kSec;
  for (int i = 0; i < 20000; ++i) {
    const std::uint64_t r = rng() % 100;
    t += r < 5 ? -static_cast<Micros>(rng() % 5000) : r < 15 ? 0 : static_cast<Micros>(rng() % 14000);
    const std::int64_t cost = static_cast<std::int64_t>(rng() % 4);
    std::int64_t in_window = 0;
    Micros newest = std::numeric_limits<Micros>::min();
    for (Micros at : naive) {
      if (at >= t - l.period) ++in_window;
      newest = std::max(newest, at);
    }
    const bool want = cost == 0 || in_window + cost <= l.amount;
    const Decision d = moving_window::evaluate(s, l, t, cost);
    ASSERT_EQ(d.allowed, want) << i;
    ASSERT_EQ(d.remaining, std::max<std::int64_t>(0, l.amount - in_window - (want ? cost : 0))) << i;
    if (want && cost > 0) {
      ASSERT_EQ(d.reset_after, std::max(t, naive.empty() ? t : newest) + l.period + 1 - t) << i;
    } else {
      ASSERT_EQ(d.reset_after, in_window > 0 ? newest + l.period + 1 - t : 0) << i;
    }
    if (want) {
      moving_window::commit(s, l, t, cost);
      // A commit of cost 0 changes nothing; one of cost > 0 also drops what has left the window
      // (what a later step back of the clock would otherwise count again).
      if (cost > 0) std::erase_if(naive, [&](Micros at) { return at < t - l.period; });
      // After a step back of the clock, units are admitted at the newest time already logged.
      const Micros at = naive.empty() ? t : std::max(t, newest);
      for (std::int64_t k = 0; k < cost; ++k) naive.push_back(at);
    }
  }
  EXPECT_GT(naive.size(), 100u);  // the log did grow long
}

// The bucket against a token bucket kept as an exact fraction tokens = num / P (refill N per P).
TEST(Properties, BucketMatchesExactFractionalTokenBucket) {
  std::mt19937_64 rng(7);
  for (const Limit& l : {limit(3, 12 * kSec), limit(1000, kSec, 10), limit(7, 999'983, 20)}) {
    bucket::State s;
    const int128 p = l.period;
    int128 tokens_num = static_cast<int128>(l.capacity()) * p;  // tokens · P, starts full
    Micros last = 0;
    Micros t = 0;
    for (int i = 0; i < 20000; ++i) {
      t += static_cast<Micros>(rng() % static_cast<std::uint64_t>(l.period / l.amount * 3 + 1));
      const std::int64_t cost = static_cast<std::int64_t>(rng() % 3);
      tokens_num = std::min<int128>(static_cast<int128>(l.capacity()) * p,
                                    tokens_num + static_cast<int128>(t - last) * l.amount);
      last = t;
      const bool want = tokens_num >= static_cast<int128>(cost) * p;
      const Decision d = bucket::evaluate(s, l, t, cost);
      ASSERT_EQ(d.allowed, want) << i;
      if (want) {
        tokens_num -= static_cast<int128>(cost) * p;
        bucket::commit(s, l, t, cost);
      }
      ASSERT_EQ(d.remaining, static_cast<std::int64_t>(tokens_num / p)) << i;
    }
  }
}

TEST(Properties, ClockSteppingBackDoesNotAdmitMore) {
  const Limit l = limit(5, kSec);
  bucket::State b;
  moving_window::State m;
  sliding_window::State sw;
  fixed_window::State fw;
  fixed_window_first_hit::State fh;
  for (int i = 0; i < 5; ++i) {
    bucket::commit(b, l, 10 * kSec, 1);
    moving_window::commit(m, l, 10 * kSec, 1);
    sliding_window::commit(sw, l, 10 * kSec, 1);
    fixed_window::commit(fw, l, 10 * kSec, 1);
    fixed_window_first_hit::commit(fh, l, 10 * kSec, 1);
  }
  // The clock steps back into an earlier window: no time has passed, nothing more is admitted.
  EXPECT_FALSE(bucket::evaluate(b, l, 9 * kSec, 1).allowed);
  EXPECT_FALSE(moving_window::evaluate(m, l, 9 * kSec, 1).allowed);
  EXPECT_FALSE(sliding_window::evaluate(sw, l, 9 * kSec, 1).allowed);
  EXPECT_FALSE(fixed_window::evaluate(fw, l, 9 * kSec, 1).allowed);
  EXPECT_FALSE(fixed_window_first_hit::evaluate(fh, l, 9 * kSec, 1).allowed);
  EXPECT_EQ(fixed_window::evaluate(fw, l, 9 * kSec, 1).retry_after, 2 * kSec);  // until 11 s
  // Cost 0 is still allowed, and consumes nothing.
  for (const Decision& d :
       {bucket::evaluate(b, l, 9 * kSec, 0), moving_window::evaluate(m, l, 9 * kSec, 0),
        sliding_window::evaluate(sw, l, 9 * kSec, 0), fixed_window::evaluate(fw, l, 9 * kSec, 0)}) {
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(d.retry_after, 0);
    EXPECT_GE(d.remaining, 0);
  }
}

// ---- the buckets' 64-bit path against the 128-bit one -----------------------------------------
// bucket::evaluate decides in 64-bit integers when every quantity fits and in 128 bits otherwise;
// both must give the same decision, field for field, on any state, limit, time and cost — near
// the point where the 64-bit path gives way (a level or capacity·P around 2^63) above all.
void expect_same_as_exact(const bucket::State& s, const Limit& l, Micros now, std::int64_t cost, bool shape) {
  const Decision a = bucket::evaluate(s, l, now, cost, shape);
  const Decision b = bucket::evaluate_exact(s, l, now, cost, shape);
  const auto shown = [&] {
    return "amount " + std::to_string(l.amount) + " period " + std::to_string(l.period) + " burst " +
           std::to_string(l.burst) + " now " + std::to_string(now) + " cost " + std::to_string(cost) +
           " tat.hi " + std::to_string(s.tat.hi) + " tat.lo " + std::to_string(s.tat.lo) + " state amount " +
           std::to_string(s.amount);
  };
  ASSERT_EQ(a.allowed, b.allowed) << shown();
  ASSERT_EQ(a.limit, b.limit) << shown();
  ASSERT_EQ(a.period, b.period) << shown();
  ASSERT_EQ(a.remaining, b.remaining) << shown();
  ASSERT_EQ(a.reset_after, b.reset_after) << shown();
  ASSERT_EQ(a.retry_after, b.retry_after) << shown();
  ASSERT_EQ(a.delay, b.delay) << shown();
}

TEST(Bucket, SixtyFourBitPathAgreesWithTheExactOneNearItsBounds) {
  const Limit limits[] = {limit(1, kSec), limit(1000000000, 3600 * kSec), limit(7, 3 * kSec, 5),
                          limit(3, 1, 1000000), limit(1, Micros{1} << 52, 2048),
                          limit(1, Micros{1} << 52, 2049), limit(1, Micros{1} << 52, 2047)};
  const Micros now = 1'800'000'000'000'000;
  for (const Limit& l : limits) {
    const int128 now_s = static_cast<int128>(now) * l.amount;
    const int128 capacity = static_cast<int128>(l.capacity()) * l.period;
    for (const int128 level : {int128{0}, int128{1}, capacity - 1, capacity, capacity + 1,
                               static_cast<int128>(INT64_MAX) - 1, static_cast<int128>(INT64_MAX),
                               static_cast<int128>(INT64_MAX) + 1, int128{1} << 70}) {
      for (const int128 tat : {now_s + level, now_s - level}) {
        for (const std::int64_t amount : {std::int64_t{0}, l.amount, l.amount + 1}) {
          const std::int64_t most = INT64_MAX / l.period;  // cost·P fits up to here
          for (const int128 cost : {int128{0}, int128{1}, int128{l.capacity()}, int128{l.capacity()} + 1,
                                    int128{most}, int128{most} + 1}) {
            if (cost > INT64_MAX) continue;
            for (const bool shape : {false, true}) {
              expect_same_as_exact(bucket::State{tat, amount}, l, now, static_cast<std::int64_t>(cost), shape);
            }
          }
        }
      }
    }
  }
}

TEST(Bucket, SixtyFourBitPathAgreesWithTheExactOneOnRandomSequences) {
  std::mt19937_64 rng(17);
  const std::int64_t amounts[] = {1, 3, 1000, 1000000000, std::int64_t{1} << 40};
  const Micros periods[] = {1, 1000, kSec, 3600 * kSec, Micros{1} << 45};
  for (int trial = 0; trial < 400; ++trial) {
    const std::int64_t amount = amounts[rng() % std::size(amounts)];
    const Micros period = periods[rng() % std::size(periods)];
    const auto made = Limit::make(amount, period, static_cast<std::int64_t>(rng() % 3) * amount);
    if (!made.ok()) continue;
    const Limit l = *made;
    bucket::State s;
    Micros now = 1'700'000'000'000'000 + static_cast<Micros>(rng() % 1000000);
    for (int step = 0; step < 200; ++step) {
      now += static_cast<Micros>(rng() % (2 * static_cast<std::uint64_t>(std::min<Micros>(period, kSec))));
      const std::int64_t cost = static_cast<std::int64_t>(rng() % 3);
      expect_same_as_exact(s, l, now, cost, step % 2 == 0);
      if (bucket::evaluate(s, l, now, cost).allowed) bucket::commit(s, l, now, cost);
    }
  }
}


// ---- sums of amounts from outside saturate (docs/algorithms.md §4) --------------------------------
// Each amount is at most 2^53, but 1,024 settles (or commits) of 2^53 on one key sum to 2^63: a
// signed 64-bit count overflowed (undefined behaviour; the sanitizer build aborts). A count
// saturates at 2^53 instead: the key is denied, with nothing remaining, until its window passes.
namespace saturation {

constexpr std::int64_t kCeiling = std::int64_t{1} << 53;  // arith.hpp's kMaxCount
constexpr int kTimes = 1100;                              // 1,100 × 2^53 > 2^63
constexpr Micros kT0 = 1'767'787'200 * kSec + 7 * kSec;  // 2026-01-07T12:00:07Z

// A saturated key at `now`: a request of 1 is denied with nothing remaining, and retries within
// the period (never "never": its cost fits the limit); a request of 0 is allowed.
template <class A>
void expect_denied(const typename A::State& s, const Limit& l, Micros now) {
  const Decision d = A::evaluate(s, l, now, 1, false);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_GT(d.retry_after, 0);
  EXPECT_LE(d.retry_after, 2 * l.period + 1);
  const Decision zero = A::evaluate(s, l, now, 0, false);
  EXPECT_TRUE(zero.allowed);
  EXPECT_EQ(zero.remaining, 0);
}

// A fresh key at `now`: the whole amount is there.
template <class A>
void expect_fresh(const typename A::State& s, const Limit& l, Micros now) {
  const Decision d = A::evaluate(s, l, now, l.amount, false);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(A::evaluate(s, l, now, 1, false).remaining, l.amount - 1);
}

// One admitted unit at kT0, then kTimes settles of +2^53 on it (the reservation's window still
// holds it), then kTimes settles of +2^53 charged at `now` (`at` long before: the usage is
// charged where the state is now).
template <class A>
typename A::State settled_past_2_63(const Limit& l) {
  typename A::State s{};
  EXPECT_TRUE(A::evaluate(s, l, kT0, 1, false).allowed);
  A::commit(s, l, kT0, 1);
  const Micros mark = A::mark(s, l);
  for (int i = 0; i < kTimes; ++i) A::settle(s, l, kT0 + 1, kT0, mark, kMaxAmount);
  for (int i = 0; i < kTimes; ++i) A::settle(s, l, kT0 + 2, 0, 0, kMaxAmount);
  return s;
}

}  // namespace saturation

TEST(Saturation, FixedWindowClockAlignedCountStopsAt2To53) {
  using namespace saturation;
  using A = detail::FixedClock;
  const Limit l = limit(100, 60 * kSec);
  fixed_window::State s = settled_past_2_63<A>(l);
  EXPECT_EQ(s.count, kCeiling);
  expect_denied<A>(s, l, kT0 + 2);
  expect_fresh<A>(s, l, kT0 + 60 * kSec);  // the next window
  // Commits of 2^53 (a lease renewed, never refused) saturate the same way.
  fixed_window::State c;
  for (int i = 0; i < kTimes; ++i) fixed_window::commit(c, l, kT0, kMaxAmount);
  EXPECT_EQ(c.count, kCeiling);
  expect_denied<A>(c, l, kT0);
  // A refund takes from the saturated count, never below 0.
  for (int i = 0; i < 3; ++i) fixed_window::settle(c, l, kT0, kT0, 0, -kMaxAmount);
  EXPECT_EQ(c.count, 0);
}

TEST(Saturation, FixedWindowCalendarCountStopsAt2To53) {
  using namespace saturation;
  using A = detail::FixedClock;
  const Limit l = parse_limits("100 per calendar day in Europe/Berlin").value().front();
  ASSERT_TRUE(l.calendar);
  fixed_window::State s = settled_past_2_63<A>(l);
  EXPECT_EQ(s.count, kCeiling);
  expect_denied<A>(s, l, kT0 + 2);
  expect_fresh<A>(s, l, l.window_at(kT0).end);  // the next calendar day
}

TEST(Saturation, FixedWindowFirstHitCountStopsAt2To53) {
  using namespace saturation;
  using A = detail::FixedFirstHit;
  const Limit l = limit(100, 60 * kSec);
  fixed_window_first_hit::State s = settled_past_2_63<A>(l);
  EXPECT_EQ(s.count, kCeiling);
  expect_denied<A>(s, l, kT0 + 2);
  EXPECT_EQ(A::evaluate(s, l, kT0 + 2, 1, false).retry_after, 60 * kSec - 2);  // the window opened at kT0
  expect_fresh<A>(s, l, kT0 + 60 * kSec);
  fixed_window_first_hit::State c;
  for (int i = 0; i < kTimes; ++i) fixed_window_first_hit::commit(c, l, kT0, kMaxAmount);
  EXPECT_EQ(c.count, kCeiling);
}

TEST(Saturation, SlidingWindowBucketsStopAt2To53) {
  using namespace saturation;
  using A = detail::Sliding;
  const Limit l = limit(100, 60 * kSec);
  sliding_window::State s = settled_past_2_63<A>(l);
  EXPECT_EQ(s.current, kCeiling);
  expect_denied<A>(s, l, kT0 + 2);
  // The next bucket: the saturated one is the previous, weighing on it (and on the Lua's muldiv,
  // whose quotient must stay below 2^53) until it has passed too.
  const Micros next = (kT0 - kT0 % l.period) + l.period;
  expect_denied<A>(s, l, next);
  expect_denied<A>(s, l, next + l.period - 1);
  expect_fresh<A>(s, l, next + l.period);
  // The previous bucket takes a settle at its time, saturating too.
  sliding_window::State p = s;
  for (int i = 0; i < kTimes; ++i) sliding_window::settle(p, l, next + 5, kT0, 0, kMaxAmount);
  EXPECT_EQ(p.previous, kCeiling);
  EXPECT_EQ(p.current, 0);
  expect_denied<A>(p, l, next + 5);
  sliding_window::State c;
  for (int i = 0; i < kTimes; ++i) sliding_window::commit(c, l, kT0, kMaxAmount);
  EXPECT_EQ(c.current, kCeiling);
}

TEST(Saturation, MovingWindowTotalStopsAt2To53) {
  using namespace saturation;
  using A = detail::Moving;
  const Limit l = limit(100, 60 * kSec);
  moving_window::State s = settled_past_2_63<A>(l);
  EXPECT_EQ(s.total, kCeiling);
  std::int64_t sum = 0;
  for (const auto& e : s.log) sum += e.count;
  EXPECT_EQ(sum, s.total);  // still the sum of the entries
  EXPECT_EQ(s.log.size(), 1u);  // all went to the entry at kT0: nothing was left to append
  expect_denied<A>(s, l, kT0 + 2);
  expect_fresh<A>(s, l, kT0 + 60 * kSec + 1);  // the entry at kT0 has left the window
  // Charges at different instants (entries of their own) saturate the same way.
  moving_window::State c;
  for (int i = 0; i < kTimes; ++i) moving_window::settle(c, l, kT0 + i, 0, 0, kMaxAmount);
  EXPECT_EQ(c.total, kCeiling);
  EXPECT_EQ(c.log.size(), 1u);
  expect_denied<A>(c, l, kT0 + kTimes);
  expect_fresh<A>(c, l, kT0 + 60 * kSec + 1);
}

// A bucket's charges past what it can drain stop at kMaxBucketDrain (2^52 µs, about 142 years):
// 1,100 settles of +2^53 on "1 per 100 years" (one unit is 100 years; their sum in 1/N µs passes
// 2^116) and on "100/minute" leave the key denied for 142 years, then fresh.
TEST(Saturation, BucketDebtStopsAt2To52Microseconds) {
  using namespace saturation;
  const Micros century = Micros{100} * 365 * 86'400 * kSec;
  for (const Limit& l : {limit(1, century), limit(100, 60 * kSec), limit(9'007'199'254'740'992, century, 5)}) {
    SCOPED_TRACE(to_string(l));
    bucket::State s;
    ASSERT_TRUE(bucket::evaluate(s, l, kT0, 1).allowed);
    bucket::commit(s, l, kT0, 1);
    const Micros mark = bucket::mark(s, l);
    for (int i = 0; i < kTimes; ++i) bucket::settle(s, l, kT0 + 1, kT0, mark, kMaxAmount);
    for (int i = 0; i < kTimes; ++i) bucket::settle(s, l, kT0 + 2, 0, 0, kMaxAmount);
    EXPECT_EQ(s.tat, (static_cast<int128>(kT0 + 2) + kMaxBucketDrain) * l.amount);
    EXPECT_EQ(bucket::expires_at(s, l), kT0 + 2 + kMaxBucketDrain);
    const Decision d = bucket::evaluate(s, l, kT0 + 2, 1);
    EXPECT_FALSE(d.allowed);
    EXPECT_EQ(d.remaining, 0);
    EXPECT_EQ(d.retry_after, kMaxBucketDrain - (l.capacity() - 1) * l.period / l.amount);
    // A refund takes from the saturated level, never below now.
    bucket::settle(s, l, kT0 + 2, kT0, kT0 + 2 + kMaxBucketDrain, -kMaxAmount);
    EXPECT_LE(s.tat, (static_cast<int128>(kT0 + 2) + kMaxBucketDrain) * l.amount);
    EXPECT_TRUE(bucket::evaluate(s, l, kT0 + 3 + kMaxBucketDrain, l.capacity()).allowed);
  }
}

}  // namespace
}  // namespace floodgate
