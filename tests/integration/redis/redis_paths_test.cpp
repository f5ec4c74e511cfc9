// The scripts' two paths agree (redis_single fixture, client clock): a one-limit policy runs the
// algorithm's one-limit `fast` (or decide.lua's `single`), a policy whose second limit never binds
// runs the generic multi-limit path. The same trace through both must give the same decisions and
// leave the same state, value and expiry, under limit 0's key: a single-limit call and a
// multi-limit call on one key, or two floodgate versions on one Redis, read each other's state
// (except a packed fixed window, below, which versions before it do not read: docs/redis.md).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "floodgate/memory_storage.hpp"
#include "storage/redis/protocol.hpp"
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

// The clock-aligned fixed window on the server's clock keeps its state packed in one integer,
// slot·2^32 + count with slot = (window start / period mod (2^21 − 1)) + 1, which the one-limit path
// raises with INCRBY (common.lua, `packs`). Here: both paths write it alike; the text form of
// an earlier version is read and rewritten packed with its expiry kept; a later window's slot
// (the server's clock stepped back) is the window the key stays in; an earlier one's is over;
// an integer floodgate did not write is an error and stays as it was; an amount of 2^31 or more,
// a period under 1 s and the client's clock keep the text form. A window of 1000 hours: the test cannot cross its
// end unless it starts in its last minute, which it waits out.
TEST(RedisPaths, PackedFixedWindowOnTheServerClock) {
  constexpr long long kCount = 1LL << 32;
  constexpr long long kSlots = (1LL << 21) - 1;
  constexpr Micros kPeriod = 1000LL * 3600 * 1'000'000;
  Raw raw(single_port());
  auto server_now = [&] {
    const std::string t = raw.cmd({"TIME"});
    const auto nl = t.find('\n');
    return std::stoll(t.substr(0, nl)) * 1'000'000 + std::stoll(t.substr(nl + 1));
  };
  while (kPeriod - server_now() % kPeriod < 60'000'000) std::this_thread::sleep_for(std::chrono::seconds(1));
  const Micros at = server_now();
  const Micros start = at - at % kPeriod;
  auto packed = [&](Micros window, long long count) {
    return std::to_string(((window / kPeriod) % kSlots + 1) * kCount + count);
  };
  const Policy one = Policy::make("packed-1", Strategy::kFixedWindow, "10 per 1000 hours").value();
  const Policy two = Policy::make("packed-2", Strategy::kFixedWindow, "10 per 1000 hours; 1000000/second").value();
  const std::string p1 = unique_prefix("packed1"), p2 = unique_prefix("packed2");
  auto r1 = open_url(single_url("timeout_ms=2000&prefix=" + p1));
  auto r2 = open_url(single_url("timeout_ms=2000&prefix=" + p2));
  ASSERT_NE(r1, nullptr);
  ASSERT_NE(r2, nullptr);
  const std::string k1 = state_key(p1, "k", one, 0), k2 = state_key(p2, "k", two, 0);
  auto hit = [&](Storage& s, const Policy& p, std::int64_t cost = 1) {
    const auto d = s.apply(p, "k", cost, Effect::kHit, 0);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *d : Decision{};
  };

  // Both paths write the same packed state; a refused hit leaves it; a test and cost 0 read it.
  for (int i = 1; i <= 12; ++i) {
    const std::int64_t cost = i == 5 ? 3 : 1;
    const Decision a = hit(*r1, one, cost), b = hit(*r2, two, cost);
    EXPECT_EQ(a.allowed, b.allowed) << i;
    EXPECT_EQ(a.remaining, b.remaining) << i;
    EXPECT_EQ(raw.cmd({"GET", k1}), raw.cmd({"GET", k2})) << i;
  }
  EXPECT_EQ(raw.cmd({"GET", k1}), packed(start, 10));
  const Decision refused = hit(*r1, one);
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.remaining, 0);
  EXPECT_GT(refused.retry_after, kPeriod - (server_now() - start) - 10'000'000);
  EXPECT_LE(refused.retry_after, kPeriod - (server_now() - start) + 10'000'000);
  EXPECT_EQ(hit(*r1, one, 11).retry_after, kNever);
  EXPECT_EQ(hit(*r1, one, 0).remaining, 0);
  EXPECT_EQ(raw.cmd({"GET", k1}), packed(start, 10));
  // The expiry is the window's end: PTTL lies between what is left of the window read before it
  // and what is left after it (less a margin). Redis sets expiries and answers PTTL in the
  // milliseconds of its cached clock, which may trail TIME's microseconds by one at either end:
  // 2 ms over what TIME leaves (+1 failed about once in 300 runs).
  const Micros before = server_now();
  const long long ttl = std::stoll(raw.cmd({"PTTL", k1}));
  EXPECT_GT(ttl, (kPeriod - (server_now() - start)) / 1000 - 10'000);
  EXPECT_LE(ttl, (kPeriod - (before - start)) / 1000 + 2);

  // An earlier version's text form, this window: read, then written packed, its expiry kept.
  raw.cmd({"SET", k1, fmt::format("{} 4", start), "PX", "5000000"});
  Decision d = hit(*r1, one);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 5);
  EXPECT_EQ(raw.cmd({"GET", k1}), packed(start, 5));
  EXPECT_LE(std::stoll(raw.cmd({"PTTL", k1})), 5'000'000);
  // The text form of a window that is over: a new window.
  raw.cmd({"SET", k1, fmt::format("{} 10", start - kPeriod), "PX", "5000000"});
  EXPECT_EQ(hit(*r1, one).remaining, 9);
  EXPECT_EQ(raw.cmd({"GET", k1}), packed(start, 1));

  // A later window's slot (the server's clock stepped back): the key stays in that window.
  raw.cmd({"SET", k1, packed(start + kPeriod, 7), "PX", "5000000"});
  d = hit(*r1, one);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 2);
  EXPECT_GT(d.reset_after, kPeriod);
  EXPECT_EQ(raw.cmd({"GET", k1}), packed(start + kPeriod, 8));
  d = hit(*r1, one, 3);
  EXPECT_FALSE(d.allowed);
  EXPECT_GT(d.retry_after, kPeriod);
  EXPECT_EQ(raw.cmd({"GET", k1}), packed(start + kPeriod, 8));
  // An earlier window's: over, whatever it holds.
  raw.cmd({"SET", k1, packed(start - kPeriod, 10), "PX", "5000000"});
  EXPECT_EQ(hit(*r1, one).remaining, 9);
  EXPECT_EQ(raw.cmd({"GET", k1}), packed(start, 1));
  EXPECT_GT(std::stoll(raw.cmd({"PTTL", k1})), 5'000'000);

  // Integers floodgate did not write: an error, never a decision, and the value as it was.
  for (const std::string& foreign :
       std::vector<std::string>{"5", "-3", std::to_string(kCount - 1), std::to_string(kCount * (kSlots + 1)),
                                "99999999999999999999"}) {
    raw.cmd({"SET", k1, foreign});
    const auto bad = r1->apply(one, "k", 1, Effect::kHit, 0);
    EXPECT_FALSE(bad.ok()) << foreign;
    EXPECT_EQ(raw.cmd({"GET", k1}), foreign);
    EXPECT_FALSE(r1->apply(one, "k", 0, Effect::kTest, 0).ok()) << foreign;
  }
  // Packed where exact only: an amount of 2^31, a period under 1 s and the client's clock keep
  // the text form.
  for (const char* rate : {"2147483648 per 1000 hours", "5 per 250 ms"}) {
    const Policy text = Policy::make("packed-text", Strategy::kFixedWindow, rate).value();
    hit(*r1, text);
    EXPECT_NE(raw.cmd({"GET", state_key(p1, "k", text, 0)}).find(' '), std::string::npos) << rate;
  }
  auto client = open_url(single_url("timeout_ms=2000&clock=client&prefix=" + p1 + "c"));
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->apply(one, "k", 1, Effect::kHit, server_now()).ok());
  EXPECT_EQ(raw.cmd({"GET", state_key(p1 + "c", "k", one, 0)}), fmt::format("{} 1", start));
}

}  // namespace
}  // namespace floodgate::redis
