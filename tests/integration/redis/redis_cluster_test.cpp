// The Redis storage against a 3-master Redis Cluster (the redis_cluster fixture): conformance,
// keys spread over the masters without CROSSSLOT, concurrency, leases against their model.
#include <netinet/in.h>
#include <sys/socket.h>

#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "conformance_support.hpp"
#include "floodgate/limiter.hpp"
#include "floodgate/memory_storage.hpp"
#include "support/lease_model.hpp"
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

// The leases of a concurrency policy against the reference model (support/lease_model.hpp), over
// user keys in several slots, interleaved: "a" and "a}b" share the hash tag "a", the two "{team}"
// keys the tag "{team"; each key's counts and lease records stay in its own slot (a CROSSSLOT or a
// record on the wrong master would fail the acquisition), and no key's leases count in another's.
// Times to live far longer than the test runs: a lease's record expires in Redis's real time,
// while the model's time is the manual clock's.
TEST(RedisClusterLeases, MatchTheModelAcrossSlots) {
  const std::vector<std::string> keys = {"k", "tenant-7", "a", "a}b", "{team}:alice", "{team}:bob"};
  for (const char* limits : {"3 concurrent for 5 minutes", "1 concurrent for 10 minutes"}) {
    for (std::uint32_t seed = 1; seed <= 2; ++seed) {
      const std::string prefix = unique_prefix("lease");
      auto cluster = open_url(cluster_url("timeout_ms=2000&clock=client&prefix=" + prefix));
      ASSERT_NE(cluster, nullptr);
      auto clock = std::make_shared<ManualClock>(Micros{1'700'000'040} * kMicrosPerSecond);
      Limiter limiter(cluster, clock);
      const Policy p = Policy::make("slots", Strategy::kConcurrency, limits).value();
      floodgate::testing::check_leases_against_model(limiter, *clock, p, keys, seed, 300);
      if (HasFailure()) return;
      // Where each key's records are: one master each, shared by keys of one tag, and the six
      // keys on more than one master. An acquisition first (held until the end), so that every key
      // has a record.
      std::map<std::string, int> master_of;
      std::vector<floodgate::Lease> last;
      for (const std::string& key : keys) {
        auto lease = limiter.acquire(p, key, 1, "last");
        ASSERT_TRUE(lease.ok()) << lease.status();
        last.push_back(*std::move(lease));
        for (const int port : cluster_ports()) {
          if (count_keys(port, prefix + "{" + key + "}:") == 0) continue;
          EXPECT_EQ(master_of.count(key), 0u) << key << " has records on two masters";
          master_of[key] = port;
        }
        ASSERT_EQ(master_of.count(key), 1u) << key << " has no record";
      }
      EXPECT_EQ(master_of["a"], master_of["a}b"]);
      EXPECT_EQ(master_of["{team}:alice"], master_of["{team}:bob"]);
      std::set<int> masters;
      for (const auto& [key, port] : master_of) masters.insert(port);
      EXPECT_GE(masters.size(), 2u);
    }
  }
}

// Whether a loopback port is free (a bind succeeds).
bool free_port(int port) {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(s);
  return ok;
}

// `n` free ports whose cluster bus ports (+10000) are free too: below the ephemeral range, so
// that the bus port exists, from a start that differs between processes.
std::vector<int> free_ports(int n) {
  std::vector<int> out;
  for (int p = 12000 + (getpid() % 600) * 10; static_cast<int>(out.size()) < n && p < 19000; ++p) {
    if (free_port(p) && free_port(p + 10000)) out.push_back(p);
  }
  return out;
}

// Started before its cluster exists (StorageStart::kBackground, as `serve` does): the fail mode
// decides and probe() says why; once the cluster is up the slot map is read and decisions are real,
// without a restart.
TEST(RedisCluster, StartsBeforeTheCluster) {
  if (tls_cluster()) GTEST_SKIP() << "the plain cluster suite runs it";
  const std::string dir = cluster_dir() + "-late";
  const std::vector<int> ports = free_ports(3);
  ASSERT_EQ(ports.size(), 3u);
  struct Stop {
    std::string dir;
    ~Stop() { std::system((std::string(FLOODGATE_REDIS_FIXTURE) + " stop " + dir).c_str()); }
  } stop{dir};
  const std::string url = fmt::format("redis-cluster://127.0.0.1:{},127.0.0.1:{},127.0.0.1:{}?timeout_ms=2000",
                                      ports[0], ports[1], ports[2]);
  auto options = parse_redis_url(*parse_storage_url(url));
  ASSERT_TRUE(options && options->ok());
  EXPECT_FALSE(RedisStorage::open(**options).ok());  // fail-fast refuses
  auto storage = RedisStorage::open(**options, StorageStart::kBackground);
  ASSERT_TRUE(storage.ok()) << storage.status();
  Limiter limiter(*storage);
  const Policy closed = Policy::make("closed", Strategy::kGcra, "10/second", PolicyOptions{.fail = FailMode::kClosed}).value();
  const auto before = limiter.hit(closed, "k");
  ASSERT_TRUE(before.ok());
  EXPECT_TRUE(before->degraded && !before->allowed);
  EXPECT_FALSE((*storage)->probe().ok());
  const std::string start = fmt::format("{} start-cluster {} {} {} {} >/dev/null", FLOODGATE_REDIS_FIXTURE, dir,
                                        ports[0], ports[1], ports[2]);
  ASSERT_EQ(std::system(start.c_str()), 0);
  bool up = false;
  for (int i = 0; i < 200 && !up; ++i) {
    up = (*storage)->probe().ok();
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(up) << (*storage)->probe();
  for (int i = 0; i < 20; ++i) {  // keys on every master
    const auto d = limiter.hit(closed, fmt::format("key{}", i));
    ASSERT_TRUE(d.ok());
    EXPECT_FALSE(d->degraded) << i;
    EXPECT_TRUE(d->allowed) << i;
  }
}

}  // namespace
}  // namespace floodgate::redis
