// The key space: the state of (policy identity, user key) is reached by that pair
// only. A property test generates adversarial names, overrides, rule paths and keys, and finds no
// two distinct pairs sharing a memory table (the fingerprint) or a Redis key.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <tuple>

#include "server/config/config.hpp"
#include "server/rls/rules.hpp"
#include "storage/envoyproxy_layout.hpp"
#include "storage/redis/protocol.hpp"

namespace floodgate {
namespace {

using server::parse_config;

// The pieces names are made of: the separators of every encoding in the code base.
std::string adversarial(std::mt19937_64& rng, std::size_t max_parts) {
  static const std::vector<std::string> kPieces{
      "a", "api", "/", "/override/", "override", ":", "|", "{", "}", "\x01", std::string(1, '\0'), "1", "10",
      "inline", "inline ", " ", "gcra", "-", "_", ".", "=", "*", "n1", ":3:", "|gcra|clock|meter|"};
  std::string out;
  const std::size_t n = 1 + rng() % max_parts;
  for (std::size_t i = 0; i < n; ++i) out += kPieces[rng() % kPieces.size()];
  return out;
}

// Who a state belongs to, spelled out: kind, identity parts, strategy, limits and the user key.
using Owner = std::tuple<int, std::vector<std::string>, std::string, std::string>;

struct Collector {
  std::map<std::string, Owner> by_fingerprint;
  std::map<std::string, std::pair<Owner, std::string>> by_redis_key;
  int collisions = 0;

  void add(const Policy& p, const std::vector<std::string>& keys) {
    const Owner owner{static_cast<int>(p.kind()), p.identity(), p.describe(), ""};
    if (auto [it, fresh] = by_fingerprint.emplace(p.fingerprint(), owner); !fresh && it->second != owner) {
      ++collisions;
      ADD_FAILURE() << "two policies share a fingerprint: " << p.fingerprint();
    }
    for (const std::string& key : keys) {
      for (std::size_t i = 0; i < p.limits().size(); ++i) {
        const std::string k = redis::state_key("fg:", key, p, i);
        const auto who = std::make_pair(owner, key + "#" + std::to_string(i));
        if (auto [it, fresh] = by_redis_key.emplace(k, who); !fresh && it->second != who) {
          ++collisions;
          ADD_FAILURE() << "two states share a Redis key";
        }
      }
    }
  }
};

TEST(KeySpace, AnOverrideAndAPolicyNamedLikeItNeverShareState) {
  // Before: the override of "api" for key "vip" was the policy "api/override/vip".
  auto c = parse_config(
      "policies:\n"
      "  - {name: api, strategy: fixed-window, limit: 10/minute, overrides: {vip: 100/minute}}\n"
      "  - {name: api/override/vip, strategy: fixed-window, limit: 100/minute}\n"
      "  - {name: a/override/b, strategy: fixed-window, limit: 5/minute, overrides: {c: 1/minute}}\n"
      "  - {name: a, strategy: fixed-window, limit: 5/minute, overrides: {b/override/c: 1/minute}}\n",
      "cfg.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  const Policy& vip = c->find("api")->for_key("vip");
  const Policy& named = *c->find("api/override/vip")->policy;
  EXPECT_EQ(vip.name(), named.name());  // the same display name ...
  EXPECT_NE(vip.fingerprint(), named.fingerprint());  // ... and separate state
  EXPECT_NE(c->find("a/override/b")->for_key("c").fingerprint(), c->find("a")->for_key("b/override/c").fingerprint());
}

TEST(KeySpace, InlineAndRuleIdentitiesAreTheirOwn) {
  const Policy named = Policy::make("d/k_v", Strategy::kFixedWindow, "10/minute").value();
  const Policy as_inline = named.with_identity(PolicyKind::kInline, {});
  const Policy as_rule = named.with_identity(PolicyKind::kRule, {"d", "k", "=v"});
  EXPECT_NE(named.fingerprint(), as_inline.fingerprint());
  EXPECT_NE(named.fingerprint(), as_rule.fingerprint());
  EXPECT_NE(as_rule.fingerprint(), named.with_identity(PolicyKind::kRuleOverride, {"d", "k", "=v"}).fingerprint());
  // Two descriptors with one stat-key path ("k_v"): key "k_v" alone, and key "k" with value "v".
  server::RlsConfig rules;
  ASSERT_TRUE(server::parse_rls_file("domain: d\ndescriptors:\n"
                                     "  - {key: k_v, rate_limit: {unit: minute, requests_per_unit: 10}}\n"
                                     "  - {key: k, value: v, rate_limit: {unit: minute, requests_per_unit: 10}}\n",
                                     "r.yaml", rules)
                  .ok());
  ASSERT_EQ(rules.rules.size(), 2u);
  EXPECT_EQ(rules.rules[0]->path, rules.rules[1]->path);
  EXPECT_NE(rules.rules[0]->policy->fingerprint(), rules.rules[1]->policy->fingerprint());
}

TEST(KeySpace, RedisKeysAreOneToOneWhereTheHashWasNot) {
  const Policy p = Policy::make("p", Strategy::kGcra, "10/minute").value();
  EXPECT_EQ(redis::state_key("fg:", "user-42", p, 2), "fg:{user-42}:n1:1:p|g|1m:11:2");
  // The amount is not in the key (a raised or lowered limit counts on); the period is.
  const Policy raised = Policy::make("p", Strategy::kGcra, "20/minute").value();
  const Policy hourly = Policy::make("p", Strategy::kGcra, "10/hour").value();
  EXPECT_EQ(redis::state_key("fg:", "k", p, 0), redis::state_key("fg:", "k", raised, 0));
  EXPECT_NE(redis::state_key("fg:", "k", p, 0), redis::state_key("fg:", "k", hourly, 0));
  EXPECT_NE(redis::state_key("fg:", "}", p, 0), redis::state_key("fg:", "\x01}", p, 0));
  EXPECT_NE(redis::state_key("fg:", "", p, 0), redis::state_key("fg:", "\x01", p, 0));
  for (const char* key : {"", "}", "a}b", "{x}", "\x01"}) {
    const int slot = redis::key_slot(redis::state_key("fg:", key, p, 0));
    EXPECT_EQ(redis::key_slot(redis::state_key("fg:", key, p, 5)), slot) << key;
  }
}

TEST(KeySpace, PropertyNoTwoOwnersShareAState) {
  std::mt19937_64 rng(13);
  Collector seen;
  for (int round = 0; round < 300; ++round) {
    const std::string a = adversarial(rng, 4);
    const std::string b = adversarial(rng, 4);
    std::vector<std::string> keys{adversarial(rng, 3), adversarial(rng, 3), "", a, b, a + "/override/" + b};
    const Policy base = Policy::make("x", Strategy::kFixedWindow, "10/minute").value();
    seen.add(Policy::make(a, Strategy::kFixedWindow, "10/minute").value(), keys);
    seen.add(Policy::make(a + "/override/" + b, Strategy::kFixedWindow, "10/minute").value(), keys);
    seen.add(base.with_identity(PolicyKind::kOverride, {a, b}), keys);
    seen.add(base.with_identity(PolicyKind::kOverride, {a + "/override/" + b}), keys);
    seen.add(base.with_identity(PolicyKind::kInline, {}), keys);
    seen.add(base.with_identity(PolicyKind::kRule, {a, b}), keys);
    seen.add(base.with_identity(PolicyKind::kRule, {a + b}), keys);
    seen.add(base.with_identity(PolicyKind::kRuleOverride, {a, b}), keys);
    seen.add(Policy::make(a, Strategy::kFixedWindow, "10/minute; 20/hour").value(), keys);
  }
  EXPECT_EQ(seen.collisions, 0);
  EXPECT_GT(seen.by_fingerprint.size(), 1000u);
  EXPECT_GT(seen.by_redis_key.size(), 10000u);
}

// The key id (redis::key_id) spells the state id short: one letter for the strategy and anchor,
// periods in their largest whole unit. Each state id has one key id and no two share one.
TEST(KeySpace, RedisKeyIdsAreShortAndOneToOne) {
  const auto id = [](std::string_view limits, Strategy s = Strategy::kFixedWindow, PolicyOptions o = {}) {
    return redis::key_id(Policy::make("api", s, limits, o).value().state_id());
  };
  EXPECT_EQ(id("10/minute"), "n1:3:api|f|1m");
  EXPECT_EQ(id("10/minute", Strategy::kFixedWindow, {.anchor = Anchor::kFirstHit}), "n1:3:api|F|1m");
  EXPECT_EQ(id("5 per 90 seconds; 100/day", Strategy::kGcra), "n1:3:api|g|90s|1d");
  EXPECT_EQ(id("5 per 25 hours", Strategy::kSlidingWindowCounter), "n1:3:api|s|25h");
  EXPECT_EQ(id("5 per 1500 milliseconds", Strategy::kMovingWindow), "n1:3:api|m|1500000");
  EXPECT_EQ(id("1 per 60 seconds", Strategy::kTokenBucket), id("7/minute", Strategy::kTokenBucket));
  const Policy inl = Policy::make("x", Strategy::kLeakyBucket, "10/hour", {.burst = 20}).value().with_identity(
      PolicyKind::kInline, {});
  EXPECT_EQ(redis::key_id(inl.state_id()), "i0|l|10/1h/20");
  const std::string cal = id("5/calendar month in Europe/Berlin");
  EXPECT_EQ(cal.substr(0, 14), "n1:3:api|f|30d") << cal;
  EXPECT_NE(cal.find("~m"), std::string::npos) << cal;
  EXPECT_NE(cal.find(":13:Europe/Berlin"), std::string::npos) << cal;
  // Outside the state id's grammar (a period with a leading zero, an unknown strategy): "!" and
  // the string as it is, never a key id of the grammar.
  EXPECT_EQ(redis::key_id("n1:1:a|fixed-window|clock|060000000"), "!n1:1:a|fixed-window|clock|060000000");
  EXPECT_EQ(redis::key_id("n1:1:a|pacer|clock|60000000"), "!n1:1:a|pacer|clock|60000000");
  EXPECT_EQ(redis::key_id(""), "!");

  // Every state id of a sample of strategies, anchors, kinds and periods (several spellings of
  // one period among them) against its key id: a function both ways.
  std::map<std::string, std::string> to_key, to_state;
  const char* limits[] = {"1/second", "60/minute", "1 per 60 seconds", "1/minute", "2 per 3600 seconds", "1/hour",
                          "1/day", "1 per 24 hours", "3 per 2 days", "1 per 500 milliseconds", "1 per 1001 milliseconds",
                          "1/second; 1/minute", "1/minute; 1/second", "10/hour; 100/day", "5/calendar day in UTC",
                          "5/calendar week", "1/second; 5/calendar month in Europe/Berlin"};
  for (const Strategy s : {Strategy::kFixedWindow, Strategy::kMovingWindow, Strategy::kSlidingWindowCounter,
                           Strategy::kTokenBucket, Strategy::kLeakyBucket, Strategy::kGcra}) {
    for (const Anchor a : {Anchor::kClock, Anchor::kFirstHit}) {
      for (const char* l : limits) {
        auto p = Policy::make("p|f|1m", s, l, {.anchor = a});
        if (!p.ok()) continue;  // a calendar limit of another strategy
        for (const Policy& q : {*p, p->with_identity(PolicyKind::kInline, {}), p->with_identity(PolicyKind::kRule, {"d", "k"})}) {
          const std::string k = redis::key_id(q.state_id());
          EXPECT_NE(k.front(), '!') << q.state_id();
          EXPECT_LT(k.size(), q.state_id().size()) << q.state_id();
          EXPECT_EQ(to_key.emplace(q.state_id(), k).first->second, k);
          EXPECT_EQ(to_state.emplace(k, q.state_id()).first->second, q.state_id()) << k;
        }
      }
    }
  }
  EXPECT_GT(to_key.size(), 200u);
}

// envoyproxy/ratelimit has no calendar periods: a calendar rule keeps floodgate's own keys under
// key_layout=envoyproxy, and its Redis script is the calendar one (never the packed fixed window).
TEST(Keyspace, CalendarRulesKeepFloodgatesKeysAndTheirOwnScript) {
  const auto rule = [](std::string_view limit) {
    return Policy::make("d/k", Strategy::kFixedWindow, limit).value().with_identity(PolicyKind::kRule, {"d", "k", ""});
  };
  EXPECT_TRUE(envoyproxy_window(rule("5/day")));
  EXPECT_FALSE(envoyproxy_window(rule("5/calendar day in UTC")));
  EXPECT_EQ(redis::script_for(rule("5/day")), redis::ScriptId::kFixedWindow);
  EXPECT_EQ(redis::script_for(rule("5/calendar day in UTC")), redis::ScriptId::kFixedWindowCalendar);
  EXPECT_EQ(redis::script_for(Policy::make("m", Strategy::kFixedWindow, "1/second; 5/calendar week").value()),
            redis::ScriptId::kFixedWindowCalendar);
  // The calendar script's arguments: amount, nominal period, then four period starts (or four
  // empty strings for a limit without a calendar), around the caller's clock.
  std::vector<std::string> args;
  const Micros now = 1'806'440'400'000'000;  // 2027-03-30T21:00:00Z
  redis::limit_args(Policy::make("m", Strategy::kFixedWindow, "1/second; 5 per calendar month in Europe/Berlin anchored 31").value(),
                    1, now, args);
  const std::vector<std::string> want{"1", "1000000", "", "", "", "",
                                      "5", "2592000000000",
                                      "1801350000000000",   // 2027-01-30T23:00:00Z, Jan 31 00:00 +01
                                      "1803769200000000",   // 2027-02-27T23:00:00Z, Feb 28 00:00 +01
                                      "1806444000000000",   // 2027-03-30T22:00:00Z, Mar 31 00:00 +02
                                      "1809036000000000"};  // 2027-04-29T22:00:00Z, Apr 30 00:00 +02
  EXPECT_EQ(args, want);
}

}  // namespace
}  // namespace floodgate
