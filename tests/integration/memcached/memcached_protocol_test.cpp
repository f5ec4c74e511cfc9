// The memcached storage's logic without a server: URLs, keys, values, expiry, size limits.
#include <gtest/gtest.h>

#include <set>

#include "storage/memcached/protocol.hpp"

namespace floodgate::memcached {
namespace {

absl::StatusOr<MemcachedOptions> parse(const std::string& url) {
  auto parsed = parse_storage_url(url);
  if (!parsed.ok()) return parsed.status();
  auto o = parse_memcached_url(*parsed);
  if (!o) return absl::NotFoundError("not memcached");
  return *o;
}

TEST(MemcachedUrl, ServersPortsAndOptions) {
  auto o = parse("memcached://a:11300,b,[::1]:5?timeout_ms=20&pool=3&prefix=x:&cas_retries=9&"
                 "ttl_slack_ms=0&item_size_max=2048&breaker_failures=2&breaker_cooldown_ms=7&"
                 "backoff_min_ms=5&backoff_max_ms=1&connect_timeout_ms=9&clock=client");
  ASSERT_TRUE(o.ok()) << o.status();
  ASSERT_EQ(o->servers.size(), 3u);
  EXPECT_EQ(o->servers[0].name(), "a:11300");
  EXPECT_EQ(o->servers[1].name(), "b:11211");
  EXPECT_EQ(o->servers[2].name(), "[::1]:5");
  EXPECT_EQ(o->timeout.count(), 20);
  EXPECT_EQ(o->connect_timeout.count(), 9);
  EXPECT_EQ(o->pool, 3u);
  EXPECT_EQ(o->prefix, "x:");
  EXPECT_EQ(o->cas_retries, 9);
  EXPECT_EQ(o->ttl_slack.count(), 0);
  EXPECT_EQ(o->item_size_max, 2048u);
  EXPECT_EQ(o->breaker_failures, 2);
  EXPECT_EQ(o->backoff_max, o->backoff_min) << "max raised to min";
  const MemcachedOptions d = parse("memcached://h").value();
  EXPECT_GT(d.timeout.count(), 0);
  EXPECT_GT(d.pool, 0u);
  EXPECT_GT(d.cas_retries, 0);
}

TEST(MemcachedUrl, BadUrlsNameTheProblem) {
  const std::vector<std::pair<std::string, std::string>> bad{
      {"memcached://", "expected memcached://host"},
      {"memcached://h:0", "port"},
      {"memcached://h:x", "port"},
      {"memcached://h,", "host"},
      {"memcached://h/db", "no path"},
      {"memcached://u:p@h", "SASL"},
      {"memcached://h?timeout_ms=0", "timeout_ms=0"},
      {"memcached://h?pool=x", "pool=x"},
      {"memcached://h?prefix=a%20b c", "prefix"},
      {"memcached://h?prefix=" + std::string(200, 'p'), "prefix"},
      {"memcached://h?clock=server", "clock=server"},
      {"memcached://h?nope=1", "unknown option \"nope\""}};
  for (const auto& [url, needle] : bad) {
    auto o = parse(url);
    ASSERT_FALSE(o.ok()) << url;
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << url;
    EXPECT_NE(o.status().message().find(needle), std::string::npos) << o.status();
  }
  auto other = parse_storage_url("redis://h");
  EXPECT_FALSE(parse_memcached_url(*other).has_value());
}

TEST(MemcachedKeys, InjectiveOverPolicyAndKeyPrintableAndShort) {
  const Policy a = Policy::make("a", Strategy::kGcra, "1/second").value();
  const Policy a2 = Policy::make("a", Strategy::kGcra, "2/minute").value();
  const Policy b = Policy::make("b", Strategy::kGcra, "1/second").value();
  // Another amount is the same state (Policy::state_id): a changed limit keeps its usage.
  EXPECT_EQ(storage_key("pre:", a, "x"),
            storage_key("pre:", Policy::make("a", Strategy::kGcra, "2/second").value(), "x"));
  std::set<std::string> seen;
  std::size_t made = 0;
  for (const Policy* p : {&a, &a2, &b}) {
    for (const std::string& k : {std::string(), std::string("x"), std::string("x", 2),
                                std::string("\0", 1), std::string(300, 'z'), std::string("a b\r\n")}) {
      const std::string key = storage_key("pre:", *p, k);
      ++made;
      seen.insert(key);
      EXPECT_EQ(key.size(), 4u + 64u);
      EXPECT_TRUE(key.starts_with("pre:"));
      EXPECT_EQ(key.find_first_not_of("0123456789abcdef", 4), std::string::npos);
      EXPECT_EQ(storage_key("pre:", *p, k), key) << "stable";
    }
  }
  EXPECT_EQ(seen.size(), made);
}

template <class S>
std::string roundtrip(const std::vector<S>& in, std::vector<S>& out) {
  std::string v;
  encode(in.data(), in.size(), v);
  out.resize(in.size());
  EXPECT_TRUE(decode(v, out.data(), out.size()));
  return v;
}

TEST(MemcachedValues, EveryStateRoundTripsExactly) {
  std::vector<fixed_window::State> f{{123, 4}, {-5, 0}}, f2;
  const std::string fv = roundtrip(f, f2);
  EXPECT_EQ(fv.size(), 4u + 32u);
  EXPECT_EQ(f2[0].start, 123);
  EXPECT_EQ(f2[0].count, 4);
  EXPECT_EQ(f2[1].start, -5);
  std::vector<sliding_window::State> s{{7, 8, 9}}, s2;
  roundtrip(s, s2);
  EXPECT_EQ(s2[0].previous, 9);
  std::vector<bucket::State> b(2), b2;
  b[0].tat = (int128{1} << 100) + 12345;
  b[1].tat = -(int128{1} << 70);
  roundtrip(b, b2);
  EXPECT_TRUE(b2[0].tat == b[0].tat);
  EXPECT_TRUE(b2[1].tat == b[1].tat);
  std::vector<moving_window::State> m(1), m2;
  m[0].log.set_capacity(8);
  m[0].log.push_back({10, 2});
  m[0].log.push_back({20, 3});
  m[0].total = 5;
  roundtrip(m, m2);
  ASSERT_EQ(m2[0].log.size(), 2u);
  EXPECT_EQ(m2[0].log.back().at, 20);
  EXPECT_EQ(m2[0].total, 5);
}

TEST(MemcachedValues, AnythingElseDoesNotDecode) {
  std::vector<fixed_window::State> f{{1, 2}};
  std::string v;
  encode(f.data(), 1, v);
  fixed_window::State out[2];
  EXPECT_FALSE(decode(std::string_view(v).substr(0, v.size() - 1), out, 1)) << "short";
  EXPECT_FALSE(decode(v + "x", out, 1)) << "long";
  EXPECT_FALSE(decode(v, out, 2)) << "another limit count";
  sliding_window::State s[1];
  EXPECT_FALSE(decode(v, s, 1)) << "another algorithm";
  EXPECT_FALSE(decode("hello world, 20 bytes", out, 1)) << "foreign";
  EXPECT_FALSE(decode("", out, 1));
  // A moving window log whose total disagrees with its entries.
  std::vector<moving_window::State> m(1);
  m[0].log.set_capacity(4);
  m[0].log.push_back({10, 2});
  m[0].total = 3;
  encode(m.data(), 1, v);
  moving_window::State mo[1];
  EXPECT_FALSE(decode(v, mo, 1));
}

// Counts past 2^53 (docs/algorithms.md §4): a window's count or bucket reads as saturated, 2^53,
// as the algorithms would have left it; a log whose entries overflow a 64-bit sum (which no store
// wrote: its total stays at most 2^53) does not decode. Before, summing it was undefined.
TEST(MemcachedValues, CountsPast2To53ReadSaturated) {
  constexpr std::int64_t kCeiling = std::int64_t{1} << 53;
  std::vector<fixed_window::State> f{{60, std::int64_t{1} << 62}}, f2;
  roundtrip(f, f2);
  EXPECT_EQ(f2[0].count, kCeiling);
  std::vector<sliding_window::State> s{{60, INT64_MAX, kCeiling + 1}}, s2;
  roundtrip(s, s2);
  EXPECT_EQ(s2[0].current, kCeiling);
  EXPECT_EQ(s2[0].previous, kCeiling);
  std::vector<moving_window::State> m(1);
  m[0].log.set_capacity(4);
  m[0].log.push_back({10, INT64_MAX});
  m[0].log.push_back({20, 2});
  m[0].total = INT64_MIN + 1;  // what a wrapping sum of the two would give
  std::string v;
  encode(m.data(), 1, v);
  moving_window::State mo[1];
  EXPECT_FALSE(decode(v, mo, 1));
}

TEST(MemcachedExpiry, RelativeUpToThirtyDaysAbsoluteBeyond) {
  const std::int64_t wall = 1'800'000'000;
  EXPECT_EQ(expiration(std::chrono::seconds(0), wall), 1u) << "never 0 (= no expiry)";
  EXPECT_EQ(expiration(std::chrono::seconds(61), wall), 61u);
  EXPECT_EQ(expiration(std::chrono::seconds(kRelativeLimit), wall), static_cast<std::uint32_t>(kRelativeLimit));
  EXPECT_EQ(expiration(std::chrono::seconds(kRelativeLimit + 1), wall),
            static_cast<std::uint32_t>(wall + kRelativeLimit + 1));
  EXPECT_EQ(expiration(std::chrono::seconds(std::int64_t{1} << 40), wall), 0x7fffffffu) << "capped";
}

TEST(MemcachedExpiry, TimeToLiveCoversTheStateThenSlackAndOneTick) {
  using std::chrono::milliseconds;
  EXPECT_EQ(time_to_live(60'000'000, 0, milliseconds(0)).count(), 61);
  EXPECT_EQ(time_to_live(60'000'001, 0, milliseconds(0)).count(), 62) << "rounded up";
  EXPECT_EQ(time_to_live(1, 0, milliseconds(2000)).count(), 4);
  EXPECT_EQ(time_to_live(0, 5, milliseconds(0)).count(), 1) << "already absent";
}

TEST(MemcachedPolicies, MovingWindowLogsBeyondTheItemSizeAreRefused) {
  const Policy small = Policy::make("s", Strategy::kMovingWindow, "1000/minute").value();
  const Policy large = Policy::make("l", Strategy::kMovingWindow, "100000/minute").value();
  const Policy multi = Policy::make("m", Strategy::kMovingWindow, "40000/minute; 40000/hour").value();
  const Policy buckets = Policy::make("b", Strategy::kGcra, "9007199254740992/second").value();
  EXPECT_TRUE(check_policy(small, 1 << 20).ok());
  EXPECT_TRUE(check_policy(buckets, 1 << 20).ok()) << "fixed-size states fit whatever the amount";
  const auto s = check_policy(large, 1 << 20);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("\"l\""), std::string::npos) << s;
  EXPECT_FALSE(check_policy(multi, 1 << 20).ok()) << "the limits' logs add up";
  EXPECT_TRUE(check_policy(large, 4 << 20).ok());
  EXPECT_EQ(max_value_size(small), 4u + 12u + 16u * 1000u);
}

}  // namespace
}  // namespace floodgate::memcached
