// A slot migration under a running client: ASK while the slot is migrating, MOVED once it has
// moved; the decisions go on from the migrated state. Runs alone (RUN_SERIAL): it moves a slot.
#include <gtest/gtest.h>

#include "test_support.hpp"

namespace floodgate::redis {
namespace {

using namespace floodgate::redis::testing;

// Moves every key of `slot` (other tests' keys may share it) from one node to another.
void migrate_all(Raw& from, int to_port, const std::string& slot) {
  for (int round = 0; round < 100; ++round) {
    const std::string keys = from.cmd({"CLUSTER", "GETKEYSINSLOT", slot, "1000"});
    if (keys.empty()) return;
    std::vector<std::string> args{"MIGRATE", "127.0.0.1", std::to_string(to_port), "", "0", "5000", "KEYS"};
    std::size_t start = 0;
    while (start <= keys.size()) {
      std::size_t nl = keys.find('\n', start);
      if (nl == std::string::npos) nl = keys.size();
      args.push_back(keys.substr(start, nl - start));
      start = nl + 1;
    }
    ASSERT_EQ(from.cmd(args), "OK");
  }
}

TEST(RedisClusterMigration, AskDuringAndMovedAfterASlotMigrationAreFollowed) {
  const std::string prefix = unique_prefix("migrate");
  auto cluster = open_url(cluster_url("timeout_ms=2000&clock=client&prefix=" + prefix));
  ASSERT_NE(cluster, nullptr);
  auto p = Policy::make("migrate", Strategy::kFixedWindow, "10/minute; 20/hour").value();
  const std::string user = "migrating-user-" + std::to_string(getpid());
  const std::string k0 = state_key(prefix, user, p, 0);
  const std::string k1 = state_key(prefix, user, p, 1);
  const int slot = key_slot(k0);
  const Micros now = 1'000'000;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(cluster->apply(p, user, 1, Effect::kHit, now)->allowed);

  // Who owns the slot, and where it goes.
  const auto ports = cluster_ports();
  int source = 0;
  for (int port : ports) {
    if (Raw(port).cmd({"GET", k0}).rfind("ERR MOVED", 0) != 0) source = port;
  }
  ASSERT_NE(source, 0);
  const int target = source == ports[0] ? ports[1] : ports[0];
  Raw src(source), dst(target);
  const std::string src_id = src.cmd({"CLUSTER", "MYID"});
  const std::string dst_id = dst.cmd({"CLUSTER", "MYID"});
  const std::string s = std::to_string(slot);
  ASSERT_EQ(dst.cmd({"CLUSTER", "SETSLOT", s, "IMPORTING", src_id}), "OK");
  ASSERT_EQ(src.cmd({"CLUSTER", "SETSLOT", s, "MIGRATING", dst_id}), "OK");
  ASSERT_EQ(src.cmd({"MIGRATE", "127.0.0.1", std::to_string(target), "", "0", "5000", "KEYS", k0, k1}), "OK");

  // Migrating: the source answers ASK; the client asks the target.
  const auto during = cluster->apply(p, user, 1, Effect::kHit, now);
  ASSERT_TRUE(during.ok()) << during.status();
  EXPECT_TRUE(during->allowed);
  EXPECT_EQ(during->remaining, 6);  // the 4th hit, counted on the migrated state
  EXPECT_GT(cluster->redirects(), 0u);

  // Moved: every master learns the new owner; the client's map is stale and gets MOVED.
  migrate_all(src, target, s);
  for (int port : ports) {
    ASSERT_EQ(Raw(port).cmd({"CLUSTER", "SETSLOT", s, "NODE", dst_id}), "OK") << port;
  }
  const std::uint64_t before = cluster->redirects();
  const auto after = cluster->apply(p, user, 1, Effect::kHit, now);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->remaining, 5);
  EXPECT_GT(cluster->redirects(), before);
  const auto again = cluster->apply(p, user, 1, Effect::kHit, now);  // the map is right now
  EXPECT_EQ(again->remaining, 4);

  // Put the slot back where it was.
  ASSERT_EQ(src.cmd({"CLUSTER", "SETSLOT", s, "IMPORTING", dst_id}), "OK");
  ASSERT_EQ(dst.cmd({"CLUSTER", "SETSLOT", s, "MIGRATING", src_id}), "OK");
  migrate_all(dst, source, s);
  for (int port : ports) ASSERT_EQ(Raw(port).cmd({"CLUSTER", "SETSLOT", s, "NODE", src_id}), "OK");
  const auto back = cluster->apply(p, user, 1, Effect::kHit, now);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->remaining, 3);
}

}  // namespace
}  // namespace floodgate::redis
