// A reload that raises or lowers a limit keeps the usage (Policy::state_id): the memory store.
// Before: a changed limit was a new fingerprint with a table of its own, so it started afresh.
#include <gtest/gtest.h>

#include "floodgate/memory_storage.hpp"
#include "support/limit_change.hpp"

namespace floodgate {
namespace {

TEST(LimitChange, MemoryStoreKeepsUsageAcrossAmountsAndStartsAfreshForAnotherAlgorithm) {
  MemoryStorage storage;
  testing::check_limit_changes(storage, "k-", 1'700'000'000 * kMicrosPerSecond);
  // One table per state: the algorithm's, and the ones of the other algorithm and period.
  EXPECT_LE(storage.policies(), 7u * 3u);
}

TEST(LimitChange, BucketUsageIsCarriedExactlyWhenTheAmountChanges) {
  // 3 per 7 s, 2 used at t = 1 s; the amount becomes 5 at t = 2 s. Used level × P is kept:
  // before, 2 tokens less 1 s·3/7 s drained = 11/7 tokens; after, 11/7 at 5 per 7 s.
  const Limit three = Limit::make(3, 7 * kMicrosPerSecond).value();
  const Limit five = Limit::make(5, 7 * kMicrosPerSecond).value();
  bucket::State s;
  bucket::commit(s, three, kMicrosPerSecond, 2);
  const bucket::State r = bucket::rescaled(s, five, 2 * kMicrosPerSecond);
  EXPECT_EQ(r.amount, 5);
  const int128 used = r.tat - int128{2 * kMicrosPerSecond} * 5;
  EXPECT_TRUE(used == int128{11} * kMicrosPerSecond);  // 11/7 tokens × P (7 s)
  EXPECT_EQ(bucket::evaluate(s, five, 2 * kMicrosPerSecond, 0).remaining, 3);  // ⌊5 − 11/7⌋
}

}  // namespace
}  // namespace floodgate
