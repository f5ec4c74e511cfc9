// A reference model of reservations, for every algorithm and storage: the state after a settle
// must be the state obtained by replaying every admitted request from scratch with the
// reservation's cost changed to its actual usage — where the algorithm still remembers the
// reservation's time — or with the difference charged at the settle's time (positive) or dropped
// (negative) where it does not (docs/algorithms.md, "Reservations"). The replay commits every
// recorded request whatever the limit says (usage that happened), limit by limit.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "floodgate/limiter.hpp"
#include "algorithms/arith.hpp"
#include "storage/decide.hpp"

namespace floodgate::testing {

struct ReservationModel {
  struct Commit {
    Micros at;
    std::int64_t cost;
    bool refund = false;  // a bucket's refund: A::settle at `at` with `mark`
    Micros mark = 0;
  };
  struct Reserved {
    std::vector<std::size_t> index;  // per limit: its commit
    std::vector<Micros> marks;       // per limit
    std::int64_t estimate = 0;
    bool settled = false;
  };

  const Policy& policy;
  std::vector<std::vector<Commit>> commits;  // per limit
  std::map<std::string, Reserved> reserved;

  explicit ReservationModel(const Policy& p) : policy(p), commits(p.limits().size()) {}

  // The decision a storage must give for a request of `cost` at `now` (a test when !hit), and
  // per-limit marks had it been committed (a reservation's).
  Decision decide(std::int64_t cost, Micros now, bool hit, std::vector<Micros>* marks = nullptr) const {
    return detail::with_algorithm(policy, [&](auto a) {
      using A = decltype(a);
      std::vector<typename A::State> st = replay<A>();
      Decision d = detail::decide<A>(st.data(), policy.limits(), policy.shape(), cost,
                                     hit ? Effect::kHit : Effect::kTest, now);
      if (marks != nullptr && d.allowed) {
        marks->resize(st.size());
        for (std::size_t i = 0; i < st.size(); ++i) (*marks)[i] = A::mark(st[i], policy.limits()[i]);
      }
      return d;
    });
  }

  // The state as it is at `now` (a test of cost 0), allowed: what a settle answers.
  Decision as_is(Micros now) const {
    Decision d = decide(0, now, false);
    d.allowed = true;
    return d;
  }

  void commit(std::int64_t cost, Micros now, Reserved* r = nullptr) {
    if (cost == 0) {
      if (r != nullptr) r->index.assign(commits.size(), SIZE_MAX);
      return;
    }
    for (std::size_t i = 0; i < commits.size(); ++i) {
      if (r != nullptr) r->index.push_back(commits[i].size());
      commits[i].push_back({now, cost});
    }
  }

  // Whether limit i still remembers the reservation's time at `now`.
  bool remembers(std::size_t i, const Reserved& r, Micros now) const {
    const Limit& l = policy.limits()[i];
    const Micros at = commits[i][r.index[i]].at;
    switch (policy.strategy()) {
      case Strategy::kFixedWindow:
        if (policy.anchor() == Anchor::kFirstHit) {
          return detail::with_algorithm(policy, [&](auto a) {
            using A = decltype(a);
            std::vector<typename A::State> st = replay<A>();
            if constexpr (std::is_same_v<typename A::State, fixed_window::State>) {
              return st[i].count > 0 && now < st[i].start + l.period && st[i].start <= at;
            }
            return false;
          });
        }
        return detail::window_start(at, l.period) == detail::window_start(now, l.period);
      case Strategy::kMovingWindow:
        return at >= now - l.period;
      case Strategy::kSlidingWindowCounter: {
        const Micros b = detail::window_start(at, l.period);
        const Micros cur = detail::window_start(now, l.period);
        return b == cur || b == cur - l.period;
      }
      default:
        return r.marks[i] > now;
    }
  }

  void settle(Reserved& r, std::int64_t actual, Micros now) {
    const std::int64_t delta = actual - r.estimate;
    r.settled = true;
    const bool bucket = uses_burst(policy.strategy());
    for (std::size_t i = 0; i < commits.size(); ++i) {
      if (bucket && delta < 0 && r.index[i] != SIZE_MAX && remembers(i, r, now)) {
        // A bucket remembers how much of the reservation is left, not when later requests came:
        // its refund is what is left of the reservation (docs/algorithms.md), at most what a
        // replay at the reservation's cost would give back (BucketRefundIsAtMostTheReplays).
        commits[i].push_back({now, delta, true, r.marks[i]});
      } else if (r.index[i] != SIZE_MAX && remembers(i, r, now)) {
        commits[i][r.index[i]].cost += delta;
      } else if (delta > 0) {
        commits[i].push_back({now, delta});
      }
    }
  }

  template <class A>
  std::vector<typename A::State> replay() const {
    std::vector<typename A::State> st(commits.size());
    for (std::size_t i = 0; i < commits.size(); ++i) {
      for (const Commit& c : commits[i]) {
        if (c.refund) {
          A::settle(st[i], policy.limits()[i], c.at, c.at, c.mark, c.cost);
        } else if (c.cost > 0) {
          A::commit(st[i], policy.limits()[i], c.at, c.cost);
        }
      }
    }
    return st;
  }
};

/// Whether the storage's decision matches the model's: exactly for the windows; for the buckets,
/// `remaining` within 1 and `reset_after` within 1 µs (a bucket's mark is rounded down to the
/// microsecond, so a refund may give back up to one microsecond's drain less).
inline void expect_same(const Policy& p, const Decision& got, const Decision& want, const std::string& what) {
  EXPECT_EQ(got.allowed, want.allowed) << what;
  if (uses_burst(p.strategy())) {
    EXPECT_LE(std::abs(got.remaining - want.remaining), 1) << what << " remaining " << got.remaining << " vs "
                                                           << want.remaining;
    EXPECT_LE(std::abs(got.reset_after - want.reset_after), 1) << what << " reset_after " << got.reset_after
                                                               << " vs " << want.reset_after;
  } else {
    EXPECT_EQ(got.remaining, want.remaining) << what;
    EXPECT_EQ(got.reset_after, want.reset_after) << what;
    EXPECT_EQ(got.retry_after, want.retry_after) << what;
  }
}

/// Random hits, reservations, settles (known, unknown and repeated ids) and clock steps on one
/// key through `limiter` (on `clock`), each decision checked against the model.
inline void check_against_model(Limiter& limiter, ManualClock& clock, const Policy& p, const std::string& key,
                                std::uint32_t seed, int steps) {
  ReservationModel model(p);
  std::mt19937 gen(seed);
  const auto rng = [&gen] { return static_cast<std::uint32_t>(gen()); };
  const Micros period = p.limits().front().period;
  const bool first_hit = p.anchor() == Anchor::kFirstHit && p.strategy() == Strategy::kFixedWindow;
  int next_id = 0;
  std::vector<std::string> outstanding;
  for (int step = 0; step < steps; ++step) {
    clock.advance(static_cast<Micros>(rng() % static_cast<std::uint32_t>(period / 4)));
    const Micros now = clock.now();
    const std::string what = std::string(p.describe()) + " seed " + std::to_string(seed) + " step " +
                             std::to_string(step);
    const unsigned op = rng() % 10;
    if (op < 3) {
      const std::int64_t cost = 1 + rng() % 3;
      const Decision want = model.decide(cost, now, true);
      auto got = limiter.hit(p, key, cost);
      ASSERT_TRUE(got.ok()) << got.status() << what;
      expect_same(p, *got, want, what + " hit");
      if (want.allowed) model.commit(cost, now);
    } else if (op < 6) {
      const std::int64_t estimate = 1 + rng() % 5;
      std::vector<Micros> marks;
      const Decision want = model.decide(estimate, now, true, &marks);
      const std::string id = "r" + std::to_string(next_id++);
      auto got = limiter.reserve(p, key, estimate, id);
      ASSERT_TRUE(got.ok()) << got.status() << what;
      expect_same(p, got->decision, want, what + " reserve " + id);
      if (want.allowed) {
        ReservationModel::Reserved& r = model.reserved[id];
        r.estimate = estimate;
        r.marks = marks;
        model.commit(estimate, now, &r);
        outstanding.push_back(id);
      }
    } else if (op < 9 && !outstanding.empty()) {
      const std::size_t pick = rng() % outstanding.size();
      const std::string id = outstanding[pick];
      outstanding.erase(outstanding.begin() + static_cast<std::ptrdiff_t>(pick));
      const std::int64_t actual = (first_hit ? 1 : 0) + rng() % 8;
      model.settle(model.reserved[id], actual, now);
      auto got = limiter.settle(p, key, id, actual);
      ASSERT_TRUE(got.ok()) << got.status() << what;
      expect_same(p, *got, model.as_is(now), what + " settle " + id);
      // The same settle again changes nothing.
      auto again = limiter.settle(p, key, id, actual);
      ASSERT_TRUE(again.ok()) << again.status() << what;
      expect_same(p, *again, model.as_is(now), what + " settle again " + id);
    } else {
      // An id never reserved: its usage is charged now.
      const std::int64_t actual = rng() % 4;
      const std::string id = "u" + std::to_string(next_id++);
      model.commit(actual, now);
      auto got = limiter.settle(p, key, id, actual);
      ASSERT_TRUE(got.ok()) << got.status() << what;
      expect_same(p, *got, model.as_is(now), what + " unknown " + id);
    }
    if (::testing::Test::HasFailure()) return;
  }
}

}  // namespace floodgate::testing
