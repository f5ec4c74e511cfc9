// floodgate/policy.hpp: building a policy (options against the strategy, bursts, the bound on
// limits) and the strategies' names. The identity and fingerprint (the key space) are
// keyspace_test.cpp's.
#include "floodgate/policy.hpp"

#include <gtest/gtest.h>

#include <string>

namespace floodgate {
namespace {

TEST(Policy, ValidatesOptionsAgainstTheStrategy) {
  PolicyOptions burst;
  burst.burst = 5;
  EXPECT_FALSE(Policy::make("p", Strategy::kFixedWindow, "1/second", burst).ok());
  EXPECT_TRUE(Policy::make("p", Strategy::kGcra, "1/second", burst).ok());
  EXPECT_TRUE(Policy::make("p", Strategy::kGcra, "1/second burst 3").ok());
  EXPECT_FALSE(Policy::make("p", Strategy::kMovingWindow, "1/second burst 3").ok());
  PolicyOptions shape;
  shape.shape = true;
  EXPECT_FALSE(Policy::make("p", Strategy::kTokenBucket, "1/second", shape).ok());
  PolicyOptions first_hit;
  first_hit.anchor = Anchor::kFirstHit;
  EXPECT_FALSE(Policy::make("p", Strategy::kSlidingWindowCounter, "1/second", first_hit).ok());
  EXPECT_FALSE(Policy::make("", Strategy::kGcra, "1/second").ok());
  std::string many;
  for (int i = 1; i <= 17; ++i) many += std::to_string(i) + "/second;";
  many.pop_back();
  const auto too_many = Policy::make("p", Strategy::kGcra, many);
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(std::string(too_many.status().message()).find("at most 16"), std::string::npos);
}

TEST(Policy, PolicyBurstFillsLimitsWithoutTheirOwn) {
  PolicyOptions o;
  o.burst = 50;
  const Policy p = Policy::make("p", Strategy::kTokenBucket, "10/second; 100/minute burst 7", o).value();
  EXPECT_EQ(p.limits()[0].capacity(), 50);
  EXPECT_EQ(p.limits()[1].capacity(), 7);
}

TEST(Strategy, NamesRoundTrip) {
  for (Strategy s : {Strategy::kFixedWindow, Strategy::kMovingWindow,
                     Strategy::kSlidingWindowCounter, Strategy::kTokenBucket,
                     Strategy::kLeakyBucket, Strategy::kGcra}) {
    EXPECT_EQ(parse_strategy(to_string(s)).value(), s);
  }
  EXPECT_EQ(parse_strategy("token_bucket").value(), Strategy::kTokenBucket);
  const auto lane = parse_strategy("fixed-window-first-hit");
  ASSERT_FALSE(lane.ok());
  EXPECT_NE(std::string(lane.status().message()).find("anchor first-hit"), std::string::npos) << lane.status();
  const auto bad = parse_strategy("lottery");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("\"lottery\""), std::string::npos);
}

}  // namespace
TEST(Policy, APolicyBurstThatWouldFillSeveralLimitsIsRefused) {
  PolicyOptions o;
  o.burst = 20;
  const auto p = Policy::make("api", Strategy::kGcra, "10/second; 1000/hour", o);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("e.g. \"10/second burst 20; 1000/hour\""), std::string_view::npos) << p.status();
  // One limit, or one limit left without a burst of its own: the burst is that limit's.
  EXPECT_TRUE(Policy::make("api", Strategy::kGcra, "10/second", o).ok());
  EXPECT_TRUE(Policy::make("api", Strategy::kGcra, "10/second; 1000/hour burst 1000", o).ok());
}

TEST(Policy, ABucketThatTakesLongerThan2To52MicrosecondsToDrainIsRefused) {
  // 1 per 200 years: one unit takes 200 years to drain; 142 years (2^52 µs) is the most.
  const auto long_drain = Policy::make("slow", Strategy::kTokenBucket, "1 per 73000 days");
  ASSERT_FALSE(long_drain.ok());
  EXPECT_NE(long_drain.status().message().find("at most 2^52 µs (about 142 years)"), std::string_view::npos)
      << long_drain.status();
  // A burst that fills it past 142 years likewise; the same limit is a window's, which never drains.
  EXPECT_FALSE(Policy::make("slow", Strategy::kGcra, "1 per 36500 days burst 2").ok());
  EXPECT_TRUE(Policy::make("slow", Strategy::kGcra, "1 per 36500 days").ok());
  EXPECT_TRUE(Policy::make("slow", Strategy::kFixedWindow, "1 per 73000 days").ok());
  EXPECT_TRUE(Policy::make("huge", Strategy::kLeakyBucket, "9007199254740992/minute burst 9007199254740992").ok());
}

}  // namespace floodgate
