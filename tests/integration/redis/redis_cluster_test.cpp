// The Redis storage against a 3-master Redis Cluster (the redis_cluster fixture): conformance,
// keys spread over the masters without CROSSSLOT, concurrency.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "conformance_support.hpp"
#include "floodgate/memory_storage.hpp"
#include "test_support.hpp"

namespace floodgate::redis {
namespace {

using namespace floodgate::redis::testing;

class ClusterConformance : public ::testing::TestWithParam<Case> {};

TEST_P(ClusterConformance, SameOutputAsMemory) {
  const Case& c = GetParam();
  MemoryStorage memory;
  const std::string expected = replay_through(c, memory);
  auto cluster = open_url(cluster_url("timeout_ms=2000&clock=client&prefix=" + unique_prefix(c.name)));
  ASSERT_NE(cluster, nullptr);
  EXPECT_EQ(replay_through(c, *cluster), expected);
}

INSTANTIATE_TEST_SUITE_P(Cases, ClusterConformance, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& p) { return p.param.name; });

// Counts the keys that start with `prefix` on one node.
long long count_keys(int port, const std::string& prefix) {
  Raw raw(port);
  long long n = 0;
  std::string cursor = "0";
  do {
    const std::string reply = raw.cmd({"SCAN", cursor, "MATCH", prefix + "*", "COUNT", "1000"});
    const std::size_t nl = reply.find('\n');
    cursor = reply.substr(0, nl);
    if (nl != std::string::npos) {
      std::string rest = reply.substr(nl + 1);
      n += rest.empty() ? 0 : 1 + std::count(rest.begin(), rest.end(), '\n');
    }
  } while (cursor != "0");
  return n;
}

TEST(RedisCluster, TenThousandKeysSpreadOverAllMastersWithoutCrossslot) {
  const std::string prefix = unique_prefix("spread");
  auto cluster = open_url(cluster_url("timeout_ms=2000&prefix=" + prefix));
  ASSERT_NE(cluster, nullptr);
  // Per-minute and per-hour limits: every key lives a minute or more, so none expires before the
  // count below, however slow the run (a per-second limit's keys lived 1-2 s).
  auto p = Policy::make("spread", Strategy::kSlidingWindowCounter, "5/minute; 100/hour").value();
  std::vector<std::string> keys;
  for (int i = 0; i < 10'000; ++i) keys.push_back(fmt::format("user-{}", i));
  int allowed = 0;
  for (std::size_t start = 0; start < keys.size(); start += 500) {
    std::vector<Storage::BatchItem> items;
    for (std::size_t i = start; i < start + 500; ++i) items.push_back({&p, keys[i], 1, Effect::kHit});
    std::vector<absl::StatusOr<Decision>> out(items.size());
    cluster->apply_batch(items, 0, out);
    for (const auto& d : out) {
      ASSERT_TRUE(d.ok()) << d.status();  // a CROSSSLOT would be an error here
      allowed += d->allowed ? 1 : 0;
    }
  }
  EXPECT_EQ(allowed, 10'000);
  long long total = 0;
  for (int port : cluster_ports()) {
    const long long n = count_keys(port, prefix);
    EXPECT_GT(n, 5'000) << "master on port " << port << " holds too few keys";
    total += n;
  }
  EXPECT_EQ(total, 20'000);  // two limits per user key
}

// A group whose keys share a slot (two policies of one user key) runs as the group script on
// that slot's master; one whose keys do not (two users) as a test and then a charge. Either way a
// group with a denied item charges nothing, and one without charges every hit.
TEST(RedisCluster, GroupsInOneSlotAndAcrossSlotsAreAllOrNothing) {
  auto cluster = open_url(cluster_url("timeout_ms=2000&clock=client&prefix=" + unique_prefix("group")));
  ASSERT_NE(cluster, nullptr);
  const Policy tight = Policy::make("tight", Strategy::kGcra, "1/hour").value();
  const Policy wide = Policy::make("wide", Strategy::kMovingWindow, "100/hour").value();
  constexpr Micros kNow = 5'000'000;
  for (const bool one_slot : {true, false}) {
    const std::string a = one_slot ? "same-user" : "user-a";
    const std::string b = one_slot ? "same-user" : "user-b";
    const Storage::BatchItem items[] = {{&wide, a, 3, Effect::kHit}, {&tight, b, 1, Effect::kHit}};
    std::vector<absl::StatusOr<Decision>> out(2);
    EXPECT_TRUE(cluster->apply_group(items, kNow, out)) << one_slot;
    ASSERT_TRUE(out[0].ok() && out[1].ok()) << out[0].status() << out[1].status();
    EXPECT_EQ(out[0]->remaining, 97);
    EXPECT_TRUE(out[1]->allowed);
    EXPECT_FALSE(cluster->apply_group(items, kNow, out)) << "the tight limit is spent";
    ASSERT_TRUE(out[0].ok() && out[1].ok());
    EXPECT_TRUE(out[0]->allowed) << "the wide item alone would pass";
    EXPECT_FALSE(out[1]->allowed);
    const auto w = cluster->apply(wide, a, 0, Effect::kTest, kNow);
    ASSERT_TRUE(w.ok());
    EXPECT_EQ(w->remaining, 97) << "the refused group charged nothing (one slot: " << one_slot << ")";
  }
}

TEST(RedisCluster, ScriptsLoadPerNodeAfterScriptFlushEverywhere) {
  auto cluster = open_url(cluster_url("timeout_ms=2000&clock=client&prefix=" + unique_prefix("flush")));
  ASSERT_NE(cluster, nullptr);
  auto p = Policy::make("flush", Strategy::kGcra, "100/second").value();
  for (int round = 0; round < 3; ++round) {
    for (int port : cluster_ports()) Raw(port).cmd({"SCRIPT", "FLUSH"});
    for (int i = 0; i < 30; ++i) {
      const auto d = cluster->apply(p, fmt::format("k{}", i), 1, Effect::kHit, 1'000'000);
      ASSERT_TRUE(d.ok()) << d.status();
      EXPECT_EQ(d->remaining, 99 - round);
    }
  }
}

}  // namespace
}  // namespace floodgate::redis
