#include "floodgate/sim/simulate.hpp"

#include <sstream>

#include <gtest/gtest.h>

namespace floodgate {
namespace {

constexpr Micros kS = kMicrosPerSecond;

std::vector<TraceEvent> at_seconds(std::initializer_list<double> ts, std::string key = "a") {
  std::vector<TraceEvent> out;
  for (double t : ts) out.push_back({static_cast<Micros>(t * 1e6), key, 1});
  return out;
}

SimulateOptions opt(std::string limit, std::int64_t burst = 0, std::vector<std::string> lanes = {},
                    Micros origin = 0, std::size_t max_events = 1'000'000) {
  SimulateOptions o;
  o.limit = std::move(limit);
  o.burst = burst;
  o.lanes = std::move(lanes);
  o.origin = origin;
  o.max_events = max_events;
  return o;
}

const SimLane& lane(const std::vector<SimLane>& lanes, std::string_view name) {
  for (const SimLane& l : lanes) {
    if (l.name == name) return l;
  }
  throw std::runtime_error("no lane " + std::string(name));
}

// 3 per 10 s; three requests at 9 s and four at 10 s. Only the clock-aligned fixed window resets
// at 10 s (and so admits 6 in one second: the edge burst); every other strategy admits 3.
TEST(Simulate, EveryStrategyOnTheSameTrace) {
  const auto trace = at_seconds({9, 9, 9, 10, 10, 10, 10});
  auto lanes = simulate(opt("3 per 10 seconds"), trace);
  ASSERT_TRUE(lanes.ok()) << lanes.status();
  ASSERT_EQ(lanes->size(), 7u);
  EXPECT_EQ(lane(*lanes, "fixed-window").allowed, 6);
  EXPECT_EQ(lane(*lanes, "fixed-window").blocked, 1);
  for (auto name : {"fixed-window-first-hit", "moving-window", "sliding-window-counter",
                    "token-bucket", "leaky-bucket", "gcra"}) {
    EXPECT_EQ(lane(*lanes, name).allowed, 3) << name;
    EXPECT_EQ(lane(*lanes, name).blocked, 4) << name;
  }
  const SimLane& gcra = lane(*lanes, "gcra");
  EXPECT_EQ(gcra.policy, "gcra 3 per 10 seconds");
  ASSERT_EQ(gcra.steps.size(), trace.size());
  EXPECT_TRUE(gcra.steps[0].allowed);
  EXPECT_EQ(gcra.steps[0].remaining, 2);
  EXPECT_EQ(gcra.steps[0].level, 1);
  EXPECT_EQ(gcra.steps[0].capacity, 3);
  EXPECT_EQ(gcra.steps[2].level, 3);
  EXPECT_FALSE(gcra.steps[3].allowed);
  // One unit comes back every 10/3 s; at t = 10 s, 1 s after the bucket emptied: 7/3 s to wait,
  // rounded up to the µs.
  EXPECT_EQ(gcra.steps[3].retry_after, 2'333'334);
  const SimLane& fixed = lane(*lanes, "fixed-window");
  EXPECT_TRUE(fixed.steps[3].allowed);
  EXPECT_EQ(fixed.steps[3].level, 1);  // a new window
  EXPECT_EQ(fixed.steps[6].level, 3);
  EXPECT_FALSE(fixed.steps[6].allowed);
}

TEST(Simulate, BurstAppliesToBucketsOnly) {
  const auto trace = at_seconds({0, 0, 0, 0, 0, 0});
  auto lanes = simulate(opt("2/minute", 5, {"token-bucket", "moving-window"}), trace);
  ASSERT_TRUE(lanes.ok()) << lanes.status();
  EXPECT_EQ(lane(*lanes, "token-bucket").allowed, 5);
  EXPECT_EQ(lane(*lanes, "token-bucket").steps[4].capacity, 5);
  EXPECT_EQ(lane(*lanes, "moving-window").allowed, 2);
}

TEST(Simulate, OriginAlignsClockWindowsToTheWallClock) {
  // The trace starts 5 s into a minute: the clock-aligned window resets 55 s later.
  const auto trace = at_seconds({0, 0, 55, 55});
  auto aligned = simulate(opt("2/minute", 0, {"fixed-window"}, 65 * kS), trace);
  auto at_zero = simulate(opt("2/minute", 0, {"fixed-window"}), trace);
  ASSERT_TRUE(aligned.ok() && at_zero.ok());
  EXPECT_EQ(aligned->front().allowed, 4);
  EXPECT_EQ(at_zero->front().allowed, 2);
}

TEST(Simulate, EachRunHasItsOwnStore) {
  const auto trace = at_seconds({0, 0, 0});
  auto first = simulate(opt("2/hour", 0, {"gcra"}), trace);
  auto second = simulate(opt("2/hour", 0, {"gcra"}), trace);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->front().allowed, 2);
  EXPECT_EQ(second->front().allowed, 2);
}

TEST(Simulate, RejectsBadInputNamingIt) {
  const auto trace = at_seconds({1, 0});
  auto backwards = simulate(opt("1/second"), trace);
  ASSERT_FALSE(backwards.ok());
  EXPECT_NE(backwards.status().message().find("event 1"), std::string::npos) << backwards.status();

  auto bad_limit = simulate(opt("3/fortnight"), {});
  ASSERT_FALSE(bad_limit.ok());
  EXPECT_NE(bad_limit.status().message().find("fortnight"), std::string::npos);

  auto too_long = simulate(opt("1/second", 0, {}, 0, 2), at_seconds({0, 1, 2}));
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("at most 2"), std::string::npos);

  std::vector<TraceEvent> no_key{{0, "", 1}};
  auto empty_key = simulate(opt("1/second"), no_key);
  ASSERT_FALSE(empty_key.ok());
  EXPECT_NE(empty_key.status().message().find("\"key\""), std::string::npos);

  auto bad_burst = simulate(opt("1/second", -1), {});
  EXPECT_FALSE(bad_burst.ok());
}

TEST(ParseLanes, AllListsAndErrors) {
  auto all = parse_lanes("all");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 7u);
  auto two = parse_lanes("GCRA, token_bucket");
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(*two, (std::vector<std::string>{"gcra", "token-bucket"}));
  auto unknown = parse_lanes("gcra,tokenbucket");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("\"tokenbucket\""), std::string::npos);
  EXPECT_FALSE(parse_lanes("gcra,gcra").ok());
  EXPECT_FALSE(parse_lanes("gcra,").ok());
  EXPECT_FALSE(parse_lanes("").ok());
}

TEST(Summarize, MaxInPeriodAndWorstBurst) {
  const auto trace = at_seconds({9, 9, 9, 10, 10, 10, 10});
  auto lanes = simulate(opt("3 per 10 seconds"), trace);
  ASSERT_TRUE(lanes.ok());
  const LaneSummary fixed = summarize(lane(*lanes, "fixed-window"), trace, 3, 10 * kS);
  EXPECT_EQ(fixed.allowed, 6);
  EXPECT_EQ(fixed.blocked, 1);
  EXPECT_EQ(fixed.max_in_period, 6);  // twice the limit across the window edge
  EXPECT_EQ(fixed.worst_burst, 6);
  EXPECT_EQ(fixed.burst_span, 3'333'334);
  const LaneSummary gcra = summarize(lane(*lanes, "gcra"), trace, 3, 10 * kS);
  EXPECT_EQ(gcra.max_in_period, 3);
  EXPECT_EQ(gcra.worst_burst, 3);
}

TEST(Summarize, AnEvenStreamScoresOne) {
  // 1 per second for 10 s against 1/second: everything is admitted, never two within 1 s.
  std::vector<TraceEvent> trace;
  for (int i = 0; i < 10; ++i) trace.push_back({i * kS, "a", 1});
  auto lanes = simulate(opt("1/second", 0, {"gcra"}), trace);
  ASSERT_TRUE(lanes.ok());
  const LaneSummary s = summarize(lanes->front(), trace, 1, kS);
  EXPECT_EQ(s.allowed, 10);
  EXPECT_EQ(s.max_in_period, 1);
  EXPECT_EQ(s.worst_burst, 1);
}

TEST(Summarize, CountsPerKey) {
  // Two keys each admitted twice at the same instant: per key the most in a period is 2, not 4.
  std::vector<TraceEvent> trace{{0, "a", 1}, {0, "b", 1}, {0, "a", 1}, {0, "b", 1}};
  auto lanes = simulate(opt("2/minute", 0, {"moving-window"}), trace);
  ASSERT_TRUE(lanes.ok());
  const LaneSummary s = summarize(lanes->front(), trace, 2, 60 * kS);
  EXPECT_EQ(s.allowed, 4);
  EXPECT_EQ(s.max_in_period, 2);
}

TEST(Traffic, PoissonIsSeededAndNearItsRate) {
  auto a = make_traffic("poisson:rate=20/s,duration=100s", 7);
  auto b = make_traffic("poisson:rate=20/s,duration=100s", 7);
  auto c = make_traffic("poisson:rate=20/s,duration=100s", 8);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << a.status();
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
  // 2000 expected; a Poisson count has standard deviation √2000 ≈ 45: 5 σ either side.
  EXPECT_GT(a->size(), 1775u);
  EXPECT_LT(a->size(), 2225u);
  for (std::size_t i = 1; i < a->size(); ++i) ASSERT_LE((*a)[i - 1].t, (*a)[i].t);
  EXPECT_LT(a->back().t, 100 * kS);
  EXPECT_EQ(a->front().key, "a");
}

TEST(Traffic, BurstAndJoinedParts) {
  auto t = make_traffic("burst:n=3,at=2s,key=k + burst:n=2,at=500ms", 1);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 5u);
  EXPECT_EQ((*t)[0].t, 500'000);
  EXPECT_EQ((*t)[0].key, "a");
  EXPECT_EQ((*t)[4].t, 2 * kS);
  EXPECT_EQ((*t)[4].key, "k");
  auto p = make_traffic("poisson:rate=1 per 2 seconds,duration=1m,start=10s", 3);
  ASSERT_TRUE(p.ok()) << p.status();
  for (const TraceEvent& e : *p) {
    EXPECT_GE(e.t, 10 * kS);
    EXPECT_LT(e.t, 70 * kS);
  }
}

// Every error quotes the part that is wrong.
TEST(Traffic, BadSpecsQuoteTheBadPart) {
  struct Case {
    const char* spec;
    const char* expect;
  };
  for (const Case& c : {
           Case{"poisson:rate=2/s", "poisson needs rate=… and duration=…"},
           Case{"poisson:rate=x/s,duration=60s", "bad rate \"x/s\""},
           Case{"poisson:rate=2/fortnight,duration=60s", "\"fortnight\""},
           Case{"poisson:rate=2/s,duration=60 parsecs", "unknown unit \"parsecs\""},
           Case{"poisson:rate=2/s,duration=-1s", "bad duration \"-1s\""},
           Case{"poisson:rate=2/s,duration=60s,colour=red", "unknown parameter \"colour\""},
           Case{"poisson:rate=2/s,rate=3/s,duration=1s", "\"rate\" is given twice"},
           Case{"poisson:rate=1000000/s,duration=1h", "at most 1000000"},
           Case{"burst:n=abc,at=1s", "bad n \"abc\""},
           Case{"burst:n=0,at=1s", "bad n \"0\""},
           Case{"burst:n=5", "burst needs n=… and at=…"},
           Case{"burst:n=5,at", "\"at\" is not name=value"},
           Case{"burst:n=5,at=1s+wave:n=3", "traffic \"wave:n=3\": expected poisson:… or burst:…"},
           Case{"/no/such/trace.jsonl", "traffic \"/no/such/trace.jsonl\": not poisson"},
       }) {
    auto t = make_traffic(c.spec, 1);
    ASSERT_FALSE(t.ok()) << c.spec;
    EXPECT_NE(t.status().message().find(c.expect), std::string::npos)
        << c.spec << " → " << t.status().message();
  }
}

TEST(Traffic, ReadsReplayTracesRelativeToTheFirstRequest) {
  std::istringstream in("{\"t\": 100.5, \"key\": \"x\"}\n\n{\"t\": 101, \"key\": \"y\", \"cost\": 2}\n");
  auto t = read_trace(in);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[0], (TraceEvent{0, "x", 1}));
  EXPECT_EQ((*t)[1], (TraceEvent{500'000, "y", 2}));
  std::istringstream bad("{\"t\": 1, \"key\": \"x\"}\n{\"t\": 0.5, \"key\": \"x\"}\n");
  auto b = read_trace(bad);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("line 2: \"t\" goes backwards"), std::string::npos) << b.status();
}

TEST(Traffic, ALineWithoutEndIsAnError) {
  std::istringstream in("{\"t\": 0, \"key\": \"a\"}\n" + std::string(100'000, ' '));
  auto t = read_trace(in);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("line 2: longer than 65536 bytes"), std::string::npos) << t.status();
  std::istringstream last_without_newline("{\"t\": 0, \"key\": \"a\"}\n{\"t\": 1, \"key\": \"b\"}");
  auto ok = read_trace(last_without_newline);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->size(), 2u);
}

TEST(Chart, DrawsADotOrCrossPerRequest) {
  const auto trace = at_seconds({9, 9, 9, 10, 10, 10, 10});
  auto lanes = simulate(opt("3 per 10 seconds", 0, {"fixed-window", "gcra"}), trace);
  ASSERT_TRUE(lanes.ok());
  const std::string svg = render_svg(*lanes, trace, "3 per 10 s <test> & more");
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find("&lt;test&gt; &amp; more"), std::string::npos);
  auto count = [&](std::string_view needle) {
    std::size_t n = 0;
    for (std::size_t at = svg.find(needle); at != std::string::npos; at = svg.find(needle, at + 1)) ++n;
    return n;
  };
  // Each admitted request is one circle drawn as two arcs; each blocked one a cross.
  EXPECT_EQ(count("a3 3 0 1 0 6 0"), 6u + 3u);
  EXPECT_EQ(count("l6 6m0 -6l-6 6"), 1u + 4u);
  EXPECT_EQ(count("data-lane=\""), 2u);
  EXPECT_NE(svg.find("allowed 6</tspan>"), std::string::npos);
  EXPECT_NE(svg.find("blocked 4</tspan>"), std::string::npos);
}

// With several keys the level line is the busiest key's (one step per request of it), and the
// legend says so; with one key it is every request's.
TEST(Chart, TheLevelLineFollowsTheBusiestKey) {
  std::vector<TraceEvent> trace;
  for (int i = 0; i < 6; ++i) trace.push_back({i * kMicrosPerSecond, i % 3 == 0 ? "b" : "a", 1});  // a: 4, b: 2
  auto lanes = simulate(opt("3 per 10 seconds", 0, {"gcra"}), trace);
  ASSERT_TRUE(lanes.ok());
  const std::string svg = render_svg(*lanes, trace, "two keys");
  EXPECT_NE(svg.find("level of key a (the busiest of 2 keys)"), std::string::npos) << svg;
  const auto level = svg.substr(svg.find("class=\"level\" d=\""));
  const auto path = level.substr(0, level.find('"', 17));
  std::size_t steps = 0;
  for (std::size_t at = path.find('V'); at != std::string::npos; at = path.find('V', at + 1)) ++steps;
  EXPECT_EQ(steps, 4u) << path;
  const std::string one = render_svg(*simulate(opt("3 per 10 seconds", 0, {"gcra"}), at_seconds({1, 2, 3})), at_seconds({1, 2, 3}), "one");
  EXPECT_EQ(one.find("the busiest"), std::string::npos);
}

}  // namespace
}  // namespace floodgate
