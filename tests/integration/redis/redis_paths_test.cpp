// The scripts' two paths agree (redis_single fixture, client clock): a one-limit policy runs the
// algorithm's one-limit `fast` (or decide.lua's `single`), a policy whose second limit never binds
// runs the generic multi-limit path. The same trace through both must give the same decisions and
// leave the same state, value and expiry, under limit 0's key: a single-limit call and a
// multi-limit call on one key, or two floodgate versions on one Redis, read each other's state.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "floodgate/memory_storage.hpp"
#include "test_support.hpp"

namespace floodgate::redis {
namespace {

using namespace floodgate::redis::testing;

struct Step {
  std::int64_t cost;
  Effect effect;
  Micros advance;  // before the step; negative: the client clock steps back
};

// Hits up to and past the limit within a window, costs of 0 and above the amount, tests, a clock
// that steps back (less than the first limit's used time: the second limit, never binding, must
// not set reset_after either), and gaps of part of a window and of several windows.
const Step kTrace[] = {
    {1, Effect::kHit, 0},         {3, Effect::kHit, 10'000},    {0, Effect::kHit, 1},
    {2, Effect::kTest, 5'000},    {4, Effect::kHit, 20'000},    {5, Effect::kHit, 1'000},
    {11, Effect::kHit, 1'000},    {1, Effect::kTest, 2'000},    {2, Effect::kHit, 300'000},
    {1, Effect::kHit, -20'000},  {6, Effect::kHit, 650'000},   {1, Effect::kHit, 90'000},
    {0, Effect::kTest, 1},        {10, Effect::kHit, 2'500'000}, {1, Effect::kHit, 1},
    {3, Effect::kHit, 999'999},   {1, Effect::kHit, 7},         {2, Effect::kTest, 123'456},
};

struct Pair {
  Policy one;
  Policy two;  // the same first limit and a second that never binds
};

std::vector<Pair> pairs() {
  const char* kOne = "10/second";
  const char* kTwo = "10/second; 1000000/second";
  std::vector<Pair> out;
  auto add = [&](const char* name, Strategy s, PolicyOptions o = {}) {
    out.push_back({Policy::make(std::string(name) + "-1", s, kOne, o).value(),
                   Policy::make(std::string(name) + "-2", s, kTwo, o).value()});
  };
  add("fixed", Strategy::kFixedWindow);
  add("first", Strategy::kFixedWindow, PolicyOptions{.anchor = Anchor::kFirstHit});
  add("sliding", Strategy::kSlidingWindowCounter);
  add("moving", Strategy::kMovingWindow);
  add("gcra", Strategy::kGcra);
  add("token", Strategy::kTokenBucket);
  add("shaper", Strategy::kLeakyBucket, PolicyOptions{.shape = true});
  return out;
}

// The key of limit 0 under `prefix` (the only key matching "*:0").
std::string limit0_key(Raw& raw, const std::string& prefix) {
  const std::string keys = raw.cmd({"KEYS", prefix + "*:0"});
  EXPECT_EQ(keys.find('\n'), std::string::npos) << keys;
  return keys;
}

void expect_same_decision(const Decision& a, const Decision& b, const std::string& what) {
  EXPECT_EQ(a.allowed, b.allowed) << what;
  EXPECT_EQ(a.limit, b.limit) << what;
  EXPECT_EQ(a.period, b.period) << what;
  EXPECT_EQ(a.remaining, b.remaining) << what;
  EXPECT_EQ(a.reset_after, b.reset_after) << what;
  EXPECT_EQ(a.retry_after, b.retry_after) << what;
  EXPECT_EQ(a.delay, b.delay) << what;
}

void expect_same_state(Raw& raw, const std::string& one, const std::string& two, const std::string& what) {
  const std::string k1 = limit0_key(raw, one), k2 = limit0_key(raw, two);
  ASSERT_EQ(k1.empty(), k2.empty()) << what;
  if (k1.empty()) return;
  const std::string type = raw.cmd({"TYPE", k1});
  EXPECT_EQ(type, raw.cmd({"TYPE", k2})) << what;
  const char* read = type == "list" ? "LRANGE" : type == "hash" ? "HGETALL" : "GET";
  std::vector<std::string> a{read, k1}, b{read, k2};
  if (type == "list") {
    a.insert(a.end(), {"0", "-1"});
    b.insert(b.end(), {"0", "-1"});
  }
  EXPECT_EQ(raw.cmd(a), raw.cmd(b)) << what;
  // Written within a few ms of each other: the same expiry to within that.
  const long t1 = std::stol(raw.cmd({"PTTL", k1})), t2 = std::stol(raw.cmd({"PTTL", k2}));
  EXPECT_LE(std::labs(t1 - t2), 50) << what << ": PTTL " << t1 << " / " << t2;
}

TEST(RedisPaths, OneLimitAndMultiLimitPathsGiveTheSameDecisionsAndState) {
  Raw raw(single_port());
  for (const Pair& p : pairs()) {
    const std::string one = unique_prefix("paths1"), two = unique_prefix("paths2");
    auto r1 = open_url(single_url("timeout_ms=2000&clock=client&prefix=" + one));
    auto r2 = open_url(single_url("timeout_ms=2000&clock=client&prefix=" + two));
    ASSERT_NE(r1, nullptr);
    ASSERT_NE(r2, nullptr);
    MemoryStorage memory;
    Micros now = 1'700'000'000'123'456;
    for (std::size_t i = 0; i < std::size(kTrace); ++i) {
      const Step& s = kTrace[i];
      now += s.advance;
      const std::string what = fmt::format("{} step {}", p.one.name(), i);
      const auto a = r1->apply(p.one, "k", s.cost, s.effect, now);
      const auto b = r2->apply(p.two, "k", s.cost, s.effect, now);
      ASSERT_TRUE(a.ok()) << what << ": " << a.status();
      ASSERT_TRUE(b.ok()) << what << ": " << b.status();
      expect_same_decision(*a, *b, what + " (one limit / two)");
      const auto want = memory.apply(p.one, "k", s.cost, s.effect, now);  // the reference
      ASSERT_TRUE(want.ok()) << what;
      expect_same_decision(*want, *a, what + " (memory / one limit)");
      expect_same_state(raw, one, two, what);
    }
  }
}

}  // namespace
}  // namespace floodgate::redis
