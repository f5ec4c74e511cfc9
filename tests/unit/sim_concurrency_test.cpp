// The concurrency lane of `floodgate simulate`: requests hold a lease from start to end through the
// real Limiter; decisions checked against a trace worked by hand and against a plain count of the
// requests in progress.
#include "floodgate/sim/concurrency.hpp"

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace floodgate {
namespace {

constexpr Micros kS = kMicrosPerSecond;

std::vector<bool> decisions(const ConcurrencyLane& c) {
  std::vector<bool> out;
  for (const SimStep& s : c.lane.steps) out.push_back(s.allowed);
  return out;
}

// N = 2 for key a: two long requests fill it, a third is denied; at 10 s the first ends before the
// request at 10 s starts (ends first), which is admitted, and the next one at 10 s is denied; a
// request of key b is admitted whatever a holds.
TEST(SimConcurrency, DecisionsOfASmallTrace) {
  const std::vector<TraceEvent> trace{{0, "a", 1},       {1 * kS, "a", 1},  {2 * kS, "a", 1}, {2 * kS, "b", 1},
                                      {10 * kS, "a", 1}, {10 * kS, "a", 1}, {11 * kS, "a", 1}};
  const std::vector<Micros> durations{10 * kS, 10 * kS, 1 * kS, 1 * kS, 5 * kS, 1 * kS, 0};
  ConcurrencyOptions o;
  o.limit = 2;
  auto c = simulate_concurrency(o, trace, durations);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(decisions(*c), (std::vector<bool>{true, true, false, true, true, false, true}));
  EXPECT_EQ(c->lane.allowed, 5);
  EXPECT_EQ(c->lane.blocked, 2);
  EXPECT_EQ(c->max_held, 2);
  EXPECT_EQ(c->expired, 0);
  EXPECT_EQ(c->key, "a");
  EXPECT_EQ(c->keys, 2);
  EXPECT_EQ(c->last, 15 * kS);
  EXPECT_EQ(c->lane.policy, "concurrency 2 concurrent for 1 day");
  // The limiter's own count after each admission (capacity − remaining) is a's leases held.
  EXPECT_EQ(c->lane.steps[1].level, 2);
  EXPECT_EQ(c->lane.steps[1].capacity, 2);
  EXPECT_EQ(c->lane.steps[3].level, 1);  // b's first lease
  EXPECT_EQ(c->lane.steps[4].level, 2);
  const std::vector<std::pair<Micros, std::int64_t>> expected{
      {0, 1}, {1 * kS, 2}, {10 * kS, 1}, {10 * kS, 2}, {11 * kS, 1}, {11 * kS, 2}, {11 * kS, 1}, {15 * kS, 0}};
  ASSERT_EQ(c->held.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(c->held[i].t, expected[i].first) << i;
    EXPECT_EQ(c->held[i].held, expected[i].second) << i;
  }
  // Each request's lease ends at its request's end; a denied one's "ends" at its start.
  const std::vector<Micros> ends{10 * kS, 11 * kS, 2 * kS, 3 * kS, 15 * kS, 10 * kS, 11 * kS};
  ASSERT_EQ(c->spans.size(), ends.size());
  for (std::size_t i = 0; i < ends.size(); ++i) {
    EXPECT_EQ(c->spans[i].end, ends[i]) << i;
    EXPECT_FALSE(c->spans[i].expired) << i;
  }
}

// 20 requests at once, each lasting a second, against 5: the lane saturates at exactly N.
TEST(SimConcurrency, ABurstSaturatesTheLimit) {
  std::vector<TraceEvent> trace(20, TraceEvent{0, "k", 1});
  ConcurrencyOptions o;
  o.limit = 5;
  o.default_duration = 1 * kS;
  auto c = simulate_concurrency(o, trace);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->lane.allowed, 5);
  EXPECT_EQ(c->lane.blocked, 15);
  EXPECT_EQ(c->max_held, 5);
  EXPECT_EQ(c->held.back().held, 0);
  EXPECT_EQ(c->held.back().t, 1 * kS);
}

// Random arrivals and durations over three keys: every decision is the one a plain count of the
// key's admitted requests still in progress (end > start, ends first) gives, and held ≤ N.
TEST(SimConcurrency, MatchesACountOfRequestsInProgress) {
  std::mt19937_64 rng(7);
  std::vector<TraceEvent> trace;
  std::vector<Micros> durations;
  Micros t = 0;
  for (int i = 0; i < 3000; ++i) {
    t += static_cast<Micros>(rng() % 400) * 1000;  // 0 to 0.4 s apart, often equal
    trace.push_back({t, std::string(1, static_cast<char>('a' + rng() % 3)), 1});
    durations.push_back(static_cast<Micros>(rng() % 3000) * 1000);  // 0 to 3 s
  }
  ConcurrencyOptions o;
  o.limit = 3;
  auto c = simulate_concurrency(o, trace, durations);
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<bool> admitted;
  std::int64_t allowed = 0, most = 0;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    std::int64_t in_progress = 0;
    for (std::size_t j = 0; j < i; ++j) {
      if (admitted[j] && trace[j].key == trace[i].key && trace[j].t + durations[j] > trace[i].t) ++in_progress;
    }
    admitted.push_back(in_progress < o.limit);
    if (admitted.back()) {
      ++allowed;
      most = std::max(most, in_progress + 1);
    }
  }
  EXPECT_EQ(decisions(*c), admitted);
  EXPECT_EQ(c->lane.allowed, allowed);
  EXPECT_EQ(c->max_held, most);
  EXPECT_EQ(c->max_held, 3);
  EXPECT_GT(c->lane.blocked, 0);
  for (const HeldChange& h : c->held) {
    EXPECT_GE(h.held, 0);
    EXPECT_LE(h.held, o.limit);
  }
}

// A request longer than the lease's time to live loses its lease at T: the next one is admitted.
TEST(SimConcurrency, ALeaseFreesItselfAtItsTimeToLive) {
  const std::vector<TraceEvent> trace{{0, "a", 1}, {4 * kS, "a", 1}, {5 * kS, "a", 1}};
  ConcurrencyOptions o;
  o.limit = 1;
  o.lease_ttl = 5 * kS;
  o.default_duration = 60 * kS;
  auto c = simulate_concurrency(o, trace);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(decisions(*c), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(c->expired, 2);
  EXPECT_EQ(c->last, 10 * kS);
}

TEST(SimConcurrency, BadInputIsNamed) {
  const std::vector<TraceEvent> trace{{0, "a", 1}, {1, "a", 1}};
  ConcurrencyOptions o;
  o.limit = 0;
  o.default_duration = kS;
  auto c = simulate_concurrency(o, trace);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("--concurrency 0"), std::string_view::npos) << c.status();
  o.limit = 2;
  o.lease_ttl = 0;
  c = simulate_concurrency(o, trace);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("--lease-ttl"), std::string_view::npos) << c.status();
  o.lease_ttl = kSimLeaseTtl;
  o.default_duration = -1;
  c = simulate_concurrency(o, trace, std::vector<Micros>{kS, -1});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("event 1: no duration"), std::string_view::npos) << c.status();
  EXPECT_NE(c.status().message().find("--duration"), std::string_view::npos) << c.status();
  c = simulate_concurrency(o, trace, std::vector<Micros>{kS, kMaxRequestDuration + 1});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("event 1: the duration must be from 0 to 23 hours"), std::string_view::npos);
  c = simulate_concurrency(o, trace, std::vector<Micros>{kS});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("1 durations for 2 requests"), std::string_view::npos);
  const std::vector<TraceEvent> backwards{{5, "a", 1}, {1, "a", 1}};
  c = simulate_concurrency(o, backwards, std::vector<Micros>{kS, kS});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("event 1"), std::string_view::npos) << c.status();
}

TEST(SimConcurrency, TheChartHasAMarkPerRequestAndTheLimit) {
  std::vector<TraceEvent> trace(6, TraceEvent{0, "k", 1});
  ConcurrencyOptions o;
  o.limit = 4;
  o.default_duration = 2 * kS;
  auto c = simulate_concurrency(o, trace);
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string svg = render_concurrency_svg(*c, trace, "t <&>");
  std::size_t dots = 0, crosses = 0;
  for (std::size_t at = svg.find("a3 3 0 1 0 6 0a3 3"); at != std::string::npos; at = svg.find("a3 3 0 1 0 6 0a3 3", at + 1)) ++dots;
  for (std::size_t at = svg.find("l6 6m0 -6l-6 6"); at != std::string::npos; at = svg.find("l6 6m0 -6l-6 6", at + 1)) ++crosses;
  EXPECT_EQ(dots, 4u);
  EXPECT_EQ(crosses, 2u);
  EXPECT_NE(svg.find("limit 4</text>"), std::string::npos);
  EXPECT_NE(svg.find("t &lt;&amp;&gt;"), std::string::npos);
  EXPECT_NE(svg.find("class=\"level\""), std::string::npos);
}

}  // namespace
}  // namespace floodgate
