// The max-min fair split of a bucket's rate, and the quota table that applies it to reports.
#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "server/rlqs/fair_split.hpp"
#include "server/rlqs/table.hpp"

namespace floodgate::server::rlqs {
namespace {

// 100 tokens per second: tokens_per_fill reads as requests per second.
constexpr Shape kShape{1, 100, 100};

std::vector<std::uint64_t> split(std::vector<Claim> claims, SplitOptions o = {}) {
  return fair_split(kShape, claims, o);
}

std::uint64_t sum(const std::vector<std::uint64_t>& v) {
  std::uint64_t s = 0;
  for (auto x : v) s += x;
  return s;
}

TEST(RlqsSplit, ClientsWithoutHistoryShareEqually) {
  EXPECT_EQ(split({{}}), (std::vector<std::uint64_t>{100}));
  EXPECT_EQ(split({{}, {}, {}}), (std::vector<std::uint64_t>{33, 33, 33}));
}

TEST(RlqsSplit, OneClientAtTwiceTheLimitGetsTheLimit) {
  EXPECT_EQ(split({{200.0, 0}}), (std::vector<std::uint64_t>{100}));
}

TEST(RlqsSplit, ThreeEqualDemandsShareEqually) {
  EXPECT_EQ(split({{80.0, 0}, {80.0, 0}, {80.0, 0}}), (std::vector<std::uint64_t>{33, 33, 33}));
}

TEST(RlqsSplit, ALowDemandGetsItsDemandWithHeadroomAndTheHighOneTheRest) {
  // 2× against 0.2× of the limit: the small one is below its fair share (50).
  EXPECT_EQ(split({{200.0, 0}, {20.0, 0}}), (std::vector<std::uint64_t>{78, 22}));
  // Below the limit together: what nobody wants is spread equally.
  EXPECT_EQ(split({{10.0, 0}, {10.0, 0}}), (std::vector<std::uint64_t>{50, 50}));
}

TEST(RlqsSplit, ANewClientGetsAnEqualShareBesideAHeavyOne) {
  EXPECT_EQ(split({{100.0, 100}, {}}), (std::vector<std::uint64_t>{50, 50}));
}

TEST(RlqsSplit, TheDeadBandKeepsSteadyAssignments) {
  // Fair shares 52/48 against 50/50 held: within 10%, nothing changes (Envoy's bucket is kept).
  EXPECT_EQ(split({{200.0, 50}, {43.0, 50}}), (std::vector<std::uint64_t>{50, 50}));
  // Without the band the split would move.
  EXPECT_EQ(split({{200.0, 50}, {43.0, 50}}, SplitOptions{0.1, 0}), (std::vector<std::uint64_t>{52, 47}));
  // A shift beyond the band moves.
  EXPECT_EQ(split({{200.0, 50}, {10.0, 50}}), (std::vector<std::uint64_t>{89, 11}));
}

TEST(RlqsSplit, AKeptAssignmentNeverBreaksTheSum) {
  // The first would keep 54 (target 50: within its band of 5.4), the second jumps to its target
  // 50 (from 10): 54 + 50 > 100, so the kept one takes its target.
  const auto out = split({{200.0, 54}, {200.0, 10}});
  EXPECT_LE(sum(out), 100u);
  EXPECT_EQ(out, (std::vector<std::uint64_t>{50, 50}));
}

TEST(RlqsSplit, TheSumNeverExceedsTheRateWhateverIsReported) {
  std::mt19937_64 rng(7);
  const double odd[] = {0, -1, 1e-300, 1e300, std::numeric_limits<double>::infinity(),
                        std::numeric_limits<double>::quiet_NaN(), 5, 50, 1e9};
  for (int round = 0; round < 2000; ++round) {
    std::vector<Claim> claims(1 + rng() % 40);
    for (Claim& c : claims) {
      c.demand = rng() % 3 == 0 ? odd[rng() % std::size(odd)] : static_cast<double>(rng() % 300);
      c.held = rng() % 4 == 0 ? rng() : rng() % 120;  // even a forged held value
    }
    const Shape shape{static_cast<std::uint32_t>(1 + rng() % 60), 1 + rng() % 5000, 1 + rng() % 100};
    const auto out = fair_split(shape, claims, {});
    ASSERT_EQ(out.size(), claims.size());
    ASSERT_LE(sum(out), shape.total) << "round " << round;
  }
}

TEST(RlqsSplit, MaxTokensIsTheBurstInProportion) {
  const Shape s{1, 100, 50};
  EXPECT_EQ(max_tokens_for(s, 100), 50u);
  EXPECT_EQ(max_tokens_for(s, 50), 25u);
  EXPECT_EQ(max_tokens_for(s, 1), 1u);  // at least 1: Envoy needs > 0
}

// ---- the table ----------------------------------------------------------------------------------

constexpr Micros kS = kMicrosPerSecond;

struct Fleet {
  Table table;
  std::map<ClientId, std::uint64_t> holds;  // what each client was last told

  explicit Fleet(TableOptions o = {}) : table(o) {}
  // One report; applies every assignment handed out, as the streams would.
  bool report(ClientId c, Micros now, std::int64_t elapsed, std::uint64_t allowed, std::uint64_t denied = 0) {
    std::vector<Assignment> out;
    const bool ok = table.report(Report{c, "k", kShape, now, elapsed, allowed, denied}, out);
    apply(out);
    return ok;
  }
  void apply(const std::vector<Assignment>& out) {
    for (const Assignment& a : out) holds[a.client] = a.tokens_per_fill;
  }
  std::uint64_t total() const {
    std::uint64_t s = 0;
    for (const auto& [c, h] : holds) s += h;
    return s;
  }
};

TEST(RlqsTable, ANewBucketIsAnsweredAtOnceAndANewcomerTakesFromTheOthersAtOnce) {
  Fleet f;
  ASSERT_TRUE(f.report(1, 0, 0, 1));
  EXPECT_EQ(f.holds[1], 100u);
  ASSERT_TRUE(f.report(1, 5 * kS, 5, 500));  // steady at the limit
  ASSERT_TRUE(f.report(2, 6 * kS, 0, 1));    // first report of a second client
  EXPECT_EQ(f.holds[2], 50u);
  EXPECT_EQ(f.holds[1], 50u);  // pushed to client 1 in the same rebalance
  EXPECT_LE(f.total(), 100u);
}

TEST(RlqsTable, ADemandFlipConvergesInOneReportOfEachClient) {
  Fleet f;
  f.report(1, 0, 0, 0);
  f.report(2, 0, 0, 0);
  Micros t = 5 * kS;
  f.report(1, t, 5, 450);  // 90/s
  f.report(2, t, 5, 50);   // 10/s
  EXPECT_EQ(f.holds[1], 89u);
  EXPECT_EQ(f.holds[2], 11u);
  t += 5 * kS;  // the flip: 1 now wants 10/s, 2 wants 90/s (its denials count)
  f.report(1, t, 5, 50);
  EXPECT_LE(f.total(), 100u);
  f.report(2, t, 5, 55, 395);
  EXPECT_EQ(f.holds[1], 11u);
  EXPECT_EQ(f.holds[2], 89u);
  EXPECT_LE(f.total(), 100u);
}

TEST(RlqsTable, AClientThatLeavesOrFallsSilentGivesItsShareBack) {
  Fleet f;
  f.report(1, 0, 0, 0);
  f.report(2, 0, 0, 0);
  f.report(3, 0, 0, 0);
  EXPECT_EQ(f.holds[1], 33u);
  std::vector<Assignment> out;
  f.table.leave(3, {"k"}, kS, out);  // its stream closed
  f.apply(out);
  f.holds.erase(3);
  EXPECT_EQ(f.holds[1], 50u);
  EXPECT_EQ(f.holds[2], 50u);
  // Client 2 stops reporting: after 3 of its 5 s intervals, client 1's next report takes it all.
  f.report(1, 5 * kS, 5, 500);
  f.report(2, 5 * kS, 5, 500);
  f.report(1, 20 * kS, 5, 500);
  EXPECT_EQ(f.holds[1], 50u) << "15 s of silence is not yet more than 3 intervals";
  f.report(1, 21 * kS, 5, 500);
  EXPECT_EQ(f.holds[1], 100u);
  EXPECT_EQ(f.table.entries(), 1u);
  out.clear();
  f.table.sweep(100 * kS, out);  // and the sweep frees the bucket once nobody reports it
  EXPECT_EQ(f.table.buckets(), 0u);
}

TEST(RlqsTable, TheTimeToLiveEndsWhenTheShareIsGivenBack) {
  Table t;
  std::vector<Assignment> out;
  t.report(Report{1, "k", kShape, 0, 0, 0, 0}, out);
  t.report(Report{2, "k", kShape, 2 * kS, 0, 0, 0}, out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].ttl_seconds, 15u);                                    // 3 × 5 s
  EXPECT_EQ(out[1].client == 1 ? out[1].ttl_seconds : out[2].ttl_seconds, 13u);  // pushed 2 s later
  EXPECT_LT(out[0].seq, out[1].seq);
}

TEST(RlqsTable, AFloodOfBucketsIsBoundedAndCounted) {
  TableOptions o;
  o.max_buckets = 10;
  Table t(o);
  std::vector<Assignment> out;
  for (int i = 0; i < 1000; ++i) t.report(Report{1, "k" + std::to_string(i), kShape, 0, 0, 0, 0}, out);
  EXPECT_EQ(t.buckets(), 10u);
  EXPECT_EQ(t.refused(), 990u);
  // A tracked bucket keeps working.
  out.clear();
  EXPECT_TRUE(t.report(Report{2, "k0", kShape, kS, 0, 0, 0}, out));
  EXPECT_EQ(t.held_sum("k0"), 100u);
}

TEST(RlqsTable, ANewRateReachesEveryClientAtTheNextReport) {
  Fleet f;
  f.report(1, 0, 0, 0);
  f.report(2, 0, 0, 0);
  std::vector<Assignment> out;
  const Shape half{1, 50, 50};
  f.table.report(Report{1, "k", half, kS, 1, 10, 0}, out);
  f.apply(out);
  EXPECT_EQ(out.size(), 2u);  // both, though client 2's share would be in its dead band
  EXPECT_LE(f.total(), 50u);
}

TEST(RlqsTable, AHostileReportChangesOthersOnlyThroughItsDemand) {
  Fleet f;
  f.report(1, 0, 0, 0);
  f.report(2, 0, 0, 0);
  f.report(1, 5 * kS, 5, 100);
  // Client 2 claims an absurd demand over a long time, then a zero elapsed: client 1 keeps at
  // least its own demand with headroom, and the sum holds.
  f.report(2, 5 * kS, 1, std::numeric_limits<std::uint64_t>::max(), std::numeric_limits<std::uint64_t>::max());
  EXPECT_GE(f.holds[1], 22u);
  EXPECT_LE(f.total(), 100u);
  f.report(2, 6 * kS, -5, 1);
  EXPECT_LE(f.total(), 100u);
}

TEST(RlqsTable, ABucketOfManyClientsIsRebalancedAtMostOnceASecond) {
  Fleet f;  // eager_clients 16
  for (ClientId c = 1; c <= 20; ++c) f.report(c, 0, 0, 0);
  EXPECT_EQ(f.holds[1], 5u);
  EXPECT_LE(f.total(), 100u);
  // Client 1's demand falls to nothing within the second: it keeps what it holds, renewed.
  f.report(1, kS / 2, 1, 0);
  EXPECT_EQ(f.holds[1], 5u);
  // The sweep (or any report a second after the last rebalance) applies it.
  std::vector<Assignment> out;
  f.table.sweep(kS, out);
  f.apply(out);
  EXPECT_EQ(f.holds[1], 0u);
  EXPECT_LE(f.total(), 100u);
}

}  // namespace
}  // namespace floodgate::server::rlqs
