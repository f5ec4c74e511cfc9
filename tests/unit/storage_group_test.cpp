// Storage::apply_group's default (test, then charge) on the memory store, including the documented
// case of two items that share a (policy, key).
#include <gtest/gtest.h>

#include <vector>

#include "floodgate/memory_storage.hpp"

namespace floodgate {
namespace {

constexpr Micros kNow = 1'700'000'000LL * kMicrosPerSecond;

class StorageGroup : public ::testing::Test {
 protected:
  MemoryStorage storage;
  Policy a = Policy::make("a", Strategy::kFixedWindow, "3/hour").value();
  Policy b = Policy::make("b", Strategy::kTokenBucket, "10/hour").value();
  std::int64_t remaining(const Policy& p, std::string_view key) {
    return storage.apply(p, key, 0, Effect::kTest, kNow)->remaining;
  }
};

TEST_F(StorageGroup, AllAllowedCommitsEveryHit) {
  std::vector<Storage::BatchItem> items{{&a, "k", 2, Effect::kHit}, {&b, "k", 4, Effect::kHit}};
  std::vector<absl::StatusOr<Decision>> out(2);
  EXPECT_TRUE(storage.apply_group(items, kNow, out));
  EXPECT_EQ(remaining(a, "k"), 1);
  EXPECT_EQ(remaining(b, "k"), 6);
}

TEST_F(StorageGroup, ARequiredDenialChargesNothingAndReportsEachVerdict) {
  std::vector<Storage::BatchItem> items{{&a, "k", 4, Effect::kHit}, {&b, "k", 4, Effect::kHit}};
  std::vector<absl::StatusOr<Decision>> out(2);
  EXPECT_FALSE(storage.apply_group(items, kNow, out));
  EXPECT_FALSE(out[0]->allowed);
  EXPECT_TRUE(out[1]->allowed);  // its own verdict, though not committed
  EXPECT_EQ(remaining(a, "k"), 3);
  EXPECT_EQ(remaining(b, "k"), 10);
}

TEST_F(StorageGroup, AnOptionalDenialDoesNotStopTheOthers) {
  std::vector<Storage::BatchItem> items{{&a, "k", 4, Effect::kHit, true}, {&b, "k", 4, Effect::kHit}};
  std::vector<absl::StatusOr<Decision>> out(2);
  EXPECT_TRUE(storage.apply_group(items, kNow, out));
  EXPECT_FALSE(out[0]->allowed);
  EXPECT_EQ(remaining(a, "k"), 3);
  EXPECT_EQ(remaining(b, "k"), 6);
}

// The header's rule for items that share a (policy, key): each is tested alone, then charged in
// turn; when together they do not fit, the later one is refused, the group is not committed and
// the earlier charge stays.
TEST_F(StorageGroup, ItemsSharingAPolicyAndKeyAreChargedInTurnAndTheFirstChargeStays) {
  std::vector<Storage::BatchItem> items{{&a, "k", 2, Effect::kHit}, {&a, "k", 2, Effect::kHit}};
  std::vector<absl::StatusOr<Decision>> out(2);
  EXPECT_FALSE(storage.apply_group(items, kNow, out));
  EXPECT_TRUE(out[0]->allowed);
  EXPECT_FALSE(out[1]->allowed);
  EXPECT_EQ(remaining(a, "k"), 1);  // 3 − the first copy's 2
  // When both fit together, both are charged.
  std::vector<Storage::BatchItem> small{{&b, "s", 2, Effect::kHit}, {&b, "s", 3, Effect::kHit}};
  EXPECT_TRUE(storage.apply_group(small, kNow, out));
  EXPECT_EQ(remaining(b, "s"), 5);
}

}  // namespace
}  // namespace floodgate
