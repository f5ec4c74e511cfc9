// Several instances on one store: the shared quota's step (Storage::share_quota on the memory
// store), the table splitting a budget below the total, and two tables kept under one limit.
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "floodgate/memory_storage.hpp"
#include "server/rlqs/sync.hpp"
#include "server/rlqs/table.hpp"

namespace floodgate::server::rlqs {
namespace {

constexpr Shape kShape{1, 100, 100};
constexpr Micros kSecond = kMicrosPerSecond;

TEST(RlqsShare, MemoryStoreKeepsLiveGrantsWithinTheTotal) {
  MemoryStorage store;
  std::mt19937_64 rng(7);
  struct Record {
    std::uint64_t granted = 0;
    Micros expiry = 0;
  };
  std::map<std::string, Record> model;  // what each member last recorded
  const std::uint64_t total = 100;
  Micros now = 1'000'000;
  for (int step = 0; step < 5000; ++step) {
    now += static_cast<Micros>(rng() % 400'000);
    const std::string member = "m" + std::to_string(rng() % 5);
    QuotaClaim claim;
    claim.total = total;
    claim.requested = rng() % (total + 1);  // often more than is free
    claim.expiry = now + 1 + static_cast<Micros>(rng() % 3'000'000);
    claim.wants = {static_cast<std::int64_t>(rng() % 100), kNoHistory};
    std::uint64_t others = 0;
    std::size_t live = 0;
    for (const auto& [name, r] : model) {
      if (name != member && r.expiry > now) {
        others += r.granted;
        ++live;
      }
    }
    auto share = store.share_quota("edge|chat", member, claim, now);
    ASSERT_TRUE(share.ok()) << share.status();
    EXPECT_EQ(share->granted, std::min(claim.requested, total - std::min(total, others))) << step;
    EXPECT_EQ(share->others.size(), 2 * live) << step;
    model[member] = Record{share->granted, claim.expiry};
    std::uint64_t sum = 0;
    for (const auto& [name, r] : model) sum += r.expiry > now ? r.granted : 0;
    ASSERT_LE(sum, total) << "live grants past the total at step " << step;
  }
}

TEST(RlqsShare, BadClaimsAreRefusedNamingTheField) {
  MemoryStorage store;
  QuotaClaim claim{{1}, 10, 100, 2 * kSecond};
  EXPECT_TRUE(store.share_quota("k", "a", claim, kSecond).ok());
  auto bad = [&](QuotaClaim c, std::string_view member, std::string_view field) {
    auto r = store.share_quota("k", member, c, kSecond);
    ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(r.status().message()).find(field), std::string::npos) << r.status();
  };
  bad(QuotaClaim{{1}, 101, 100, 2 * kSecond}, "a", "requested");
  bad(QuotaClaim{{1}, 1, 0, 2 * kSecond}, "a", "total");
  bad(QuotaClaim{{1}, 1, 100, kSecond}, "a", "expiry");
  bad(QuotaClaim{{101}, 1, 100, 2 * kSecond}, "a", "want");
  bad(claim, "a:b", "member");
  bad(claim, "", "member");
}

TEST(RlqsShare, WantsAndOwnShare) {
  const SplitOptions o;
  const std::vector<Claim> own{{200.0, 0}};
  EXPECT_EQ(wants_of(kShape, own, o), (std::vector<std::int64_t>{100}));
  EXPECT_EQ(wants_of(kShape, std::vector<Claim>{{20.0, 0}, {}}, o), (std::vector<std::int64_t>{22, kNoHistory}));
  EXPECT_EQ(own_share(kShape, own, std::vector<std::int64_t>{22}, o), 78u);  // 2x against 0.2x
  EXPECT_EQ(own_share(kShape, own, std::vector<std::int64_t>{}, o), 100u);
  EXPECT_EQ(own_share(kShape, std::vector<Claim>{{}}, std::vector<std::int64_t>{kNoHistory}, o), 50u);
}

Report report(ClientId c, Micros now, std::int64_t elapsed = 0, std::uint64_t allowed = 0) {
  return Report{c, "edge|chat", kShape, now, elapsed, allowed, 0, "edge", "edge.yaml:3 edge"};
}

TableOptions shared() {
  TableOptions o;
  o.shared = true;
  return o;
}

TEST(RlqsShare, TableSplitsItsBudgetAndEndsALapsedGrant) {
  Table table(shared());
  std::vector<Assignment> out;
  ASSERT_TRUE(table.report(report(1, kSecond), out));
  ASSERT_TRUE(table.report(report(2, kSecond), out));
  EXPECT_EQ(table.held_sum("edge|chat"), 0u) << "nothing before the first grant";
  out.clear();
  table.grant("edge|chat", kShape, 40, 40, 4 * kSecond, kSecond, out);
  EXPECT_EQ(table.held_sum("edge|chat"), 40u);
  EXPECT_EQ(out.size(), 2u);
  for (const Assignment& a : out) EXPECT_EQ(a.tokens_per_fill, 20u);
  // Not renewed by its expiry: nothing more is handed out.
  ASSERT_TRUE(table.report(report(1, 3 * kSecond, 1, 20), out));
  ASSERT_TRUE(table.report(report(2, 3 * kSecond, 1, 20), out));
  out.clear();
  table.sweep(4 * kSecond, out);
  EXPECT_EQ(table.held_sum("edge|chat"), 0u);
  EXPECT_EQ(out.size(), 2u);
}

TEST(RlqsShare, AReloadKeepsTheGrantsFractionOfTheRate) {
  Table table(shared());
  std::vector<Assignment> out;
  ASSERT_TRUE(table.report(report(1, kSecond), out));
  table.grant("edge|chat", kShape, 40, 40, 4 * kSecond, kSecond, out);
  ASSERT_EQ(table.held_sum("edge|chat"), 40u);
  Report halved = report(1, 2 * kSecond, 1, 40);
  halved.shape.total = 50;  // the rule now 50/second: 40% of it is 20
  out.clear();
  ASSERT_TRUE(table.report(halved, out));
  EXPECT_EQ(table.held_sum("edge|chat"), 20u);
}

// Two instances (tables, each with its sync) on one store, one client each: client 1 on `a`
// reports first and is granted the whole rate, then client 2 on `b`.
struct TwoInstances : ::testing::Test {
  void SetUp() override {
    ASSERT_TRUE(a.report(report(1, now), out));
    sa.sync(a, true, now);
    ASSERT_TRUE(b.report(report(2, now), out));
    sb.sync(b, true, now);
  }
  std::shared_ptr<MemoryStorage> store = std::make_shared<MemoryStorage>();
  Table a{shared()};
  Table b{shared()};
  QuotaSync sa{store, {}, [](const std::vector<Assignment>&) {}};
  QuotaSync sb{store, {}, [](const std::vector<Assignment>&) {}};
  std::vector<Assignment> out;
  Micros now = kSecond;
};

// 200/s against 20/s of a 100/s limit.
TEST_F(TwoInstances, KeepOneLimit) {
  EXPECT_EQ(a.held_sum("edge|chat") + b.held_sum("edge|chat"), 100u);
  int periods = 0;
  for (; periods < 10; ++periods) {
    now += kSecond;
    ASSERT_TRUE(a.report(report(1, now, 1, 200), out));
    ASSERT_TRUE(b.report(report(2, now, 1, 20), out));
    sa.sync(a, false, now);
    ASSERT_LE(a.held_sum("edge|chat") + b.held_sum("edge|chat"), 100u) << periods;
    sb.sync(b, false, now);
    ASSERT_LE(a.held_sum("edge|chat") + b.held_sum("edge|chat"), 100u) << periods;
    if (a.held_sum("edge|chat") == 78 && b.held_sum("edge|chat") == 22) break;
  }
  EXPECT_EQ(a.held_sum("edge|chat"), 78u);
  EXPECT_EQ(b.held_sum("edge|chat"), 22u);
  EXPECT_LE(periods, 2) << "converged after " << periods + 1 << " sync periods";
}

// The second instance to see a bucket is granted nothing while the first holds the whole rate. It
// syncs first in the next period (still nothing: the first has not shrunk yet); the first shrinks at
// its own sync; the second, short of what it asked, syncs again a short_retry later and takes the
// rest then, not a period later.
TEST_F(TwoInstances, OneGrantedLessThanItAskedTakesTheRestAtItsShortRetry) {
  ASSERT_EQ(a.held_sum("edge|chat"), 100u);
  ASSERT_EQ(b.held_sum("edge|chat"), 0u);
  EXPECT_TRUE(b.has_short());
  now += kSecond;
  ASSERT_TRUE(a.report(report(1, now, 1, 200), out));
  ASSERT_TRUE(b.report(report(2, now, 1, 20), out));
  sb.sync(b, false, now);
  EXPECT_EQ(b.held_sum("edge|chat"), 0u) << "the first instance has not shrunk yet";
  sa.sync(a, false, now);
  EXPECT_EQ(a.held_sum("edge|chat"), 78u);
  EXPECT_FALSE(a.has_short());
  now += sb.options().short_retry;
  sb.sync_short(b, now);
  EXPECT_EQ(b.held_sum("edge|chat"), 22u) << "taken at the short retry, not at the next period";
  EXPECT_LE(a.held_sum("edge|chat") + b.held_sum("edge|chat"), 100u);
  EXPECT_FALSE(b.has_short()) << "granted what it asked: back to the period";
}

}  // namespace
}  // namespace floodgate::server::rlqs
