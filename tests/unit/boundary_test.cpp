// The boundary table (docs/algorithms.md, "Limits of numbers"): every algorithm at the edges of
// cost, amount, period and rate. Run under UBSan in the asan preset: any overflow fails the run,
// and no edge wraps around to "allowed".
#include <gtest/gtest.h>

#include "floodgate/memory_storage.hpp"
#include "support/variants.hpp"

namespace floodgate {
namespace {

constexpr Micros kSec = kMicrosPerSecond;
constexpr Micros kT0 = 1'700'000'000 * kSec;
constexpr Micros kHundredYears = Micros{100} * 360 * 86400 * kSec;

using testing::kVariants;
using testing::Variant;

Policy make(const Variant& v, std::string_view limits) { return v.policy(limits, "edge"); }

bool is_bucket(const Variant& v) { return uses_burst(v.strategy); }

TEST(Boundary, CostZeroIsAllowedAndStoresNothing) {
  for (const Variant& v : kVariants) {
    MemoryStorage storage;
    const Policy p = make(v, "5/second");
    const Decision d = storage.apply(p, "k", 0, Effect::kHit, kT0).value();
    EXPECT_TRUE(d.allowed) << v.name;
    EXPECT_EQ(d.remaining, 5) << v.name;
    EXPECT_EQ(d.retry_after, 0) << v.name;
    EXPECT_EQ(storage.size(p), 0u) << v.name;
  }
}

TEST(Boundary, CostAboveTheLimitIsDeniedForever) {
  for (const Variant& v : kVariants) {
    MemoryStorage storage;
    const Policy p = make(v, "5/second");
    const Decision d = storage.apply(p, "k", 6, Effect::kHit, kT0).value();
    EXPECT_FALSE(d.allowed) << v.name;
    EXPECT_EQ(d.retry_after, kNever) << v.name;
    EXPECT_EQ(d.remaining, 5) << v.name;  // nothing consumed
    EXPECT_TRUE(storage.apply(p, "k", 5, Effect::kHit, kT0)->allowed) << v.name;
  }
}

TEST(Boundary, CostOfTwoToThe53) {
  for (const Variant& v : kVariants) {
    MemoryStorage storage;
    const Policy p = make(v, "9007199254740992/second");
    const Decision all = storage.apply(p, "k", kMaxAmount, Effect::kHit, kT0).value();
    EXPECT_TRUE(all.allowed) << v.name;
    EXPECT_EQ(all.remaining, 0) << v.name;
    const Decision one = storage.apply(p, "k", 1, Effect::kHit, kT0).value();
    EXPECT_FALSE(one.allowed) << v.name;
    EXPECT_TRUE(one.can_retry()) << v.name;
    EXPECT_GE(one.retry_after, 1) << v.name;
    EXPECT_LE(one.retry_after, kSec + 1) << v.name;
    // And at a time near the end of the representable range (2^62 µs ≈ 146,000 years).
    const Micros far = Micros{1} << 62;
    EXPECT_TRUE(storage.apply(p, "far", kMaxAmount, Effect::kHit, far)->allowed) << v.name;
    EXPECT_FALSE(storage.apply(p, "far", kMaxAmount, Effect::kHit, far)->allowed) << v.name;
  }
}

TEST(Boundary, OnePerMicrosecond) {
  for (const Variant& v : kVariants) {
    MemoryStorage storage;
    const Policy p = make(v, "1/microsecond");
    ASSERT_TRUE(storage.apply(p, "k", 1, Effect::kHit, kT0)->allowed) << v.name;
    const Decision d = storage.apply(p, "k", 1, Effect::kHit, kT0).value();
    EXPECT_FALSE(d.allowed) << v.name;
    // Windows and buckets free the unit 1 µs later; the moving window counts an entry that is
    // exactly one period old, and the sliding counter weighs the previous bucket fully at the
    // start of the next one: both need 2 µs.
    const bool two = v.strategy == Strategy::kMovingWindow ||
                     v.strategy == Strategy::kSlidingWindowCounter;
    EXPECT_EQ(d.retry_after, two ? 2 : 1) << v.name;
    EXPECT_TRUE(storage.apply(p, "k", 1, Effect::kHit, kT0 + d.retry_after)->allowed) << v.name;
  }
}

TEST(Boundary, OnePerHundredYears) {
  for (const Variant& v : kVariants) {
    MemoryStorage storage;
    const Policy p = make(v, "1 per 100 years");
    ASSERT_TRUE(storage.apply(p, "k", 1, Effect::kHit, kT0)->allowed) << v.name;
    const Decision d = storage.apply(p, "k", 1, Effect::kHit, kT0).value();
    EXPECT_FALSE(d.allowed) << v.name;
    EXPECT_TRUE(d.can_retry()) << v.name;
    EXPECT_GT(d.retry_after, 0) << v.name;
    EXPECT_LE(d.retry_after, 2 * kHundredYears + 1) << v.name;
    if (is_bucket(v) || v.anchor == Anchor::kFirstHit) {
      EXPECT_EQ(d.retry_after, kHundredYears) << v.name;
    }
    if (v.strategy == Strategy::kMovingWindow) {
      EXPECT_EQ(d.retry_after, kHundredYears + 1) << v.name;
    }
    EXPECT_FALSE(storage.apply(p, "k", 1, Effect::kHit, kT0 + d.retry_after - 1)->allowed) << v.name;
    EXPECT_TRUE(storage.apply(p, "k", 1, Effect::kHit, kT0 + d.retry_after)->allowed) << v.name;
  }
}

TEST(Boundary, ABillionPerSecondStaysExact) {
  // T = 0.001 µs: finer than the clock. Nothing rounds to zero or to infinity.
  for (const Variant& v : kVariants) {
    if (!is_bucket(v)) continue;
    MemoryStorage storage;
    const Policy p = make(v, "1000000000/second");
    ASSERT_TRUE(storage.apply(p, "k", 1'000'000'000, Effect::kHit, kT0)->allowed) << v.name;
    const Decision d = storage.apply(p, "k", 1, Effect::kHit, kT0).value();
    EXPECT_FALSE(d.allowed) << v.name;
    EXPECT_EQ(d.retry_after, 1) << v.name;  // 1 ns rounds up to 1 µs, never down to 0
    const Decision later = storage.apply(p, "k", 1000, Effect::kHit, kT0 + 1).value();
    EXPECT_TRUE(later.allowed) << v.name;  // exactly 1000 tokens per µs
    EXPECT_EQ(later.remaining, 0) << v.name;
    EXPECT_FALSE(storage.apply(p, "k", 1, Effect::kHit, kT0 + 1)->allowed) << v.name;
  }
  for (const Variant& v : kVariants) {
    if (is_bucket(v)) continue;
    MemoryStorage storage;
    const Policy p = make(v, "1000000000/second");
    ASSERT_TRUE(storage.apply(p, "k", 1'000'000'000, Effect::kHit, kT0)->allowed) << v.name;
    EXPECT_FALSE(storage.apply(p, "k", 1, Effect::kHit, kT0)->allowed) << v.name;
  }
}

TEST(Boundary, BurstBelowAboveAndEqualToTheAmount) {
  for (std::int64_t burst : {1, 10, 50}) {
    MemoryStorage storage;
    PolicyOptions o;
    o.burst = burst;
    const Policy p = Policy::make("b", Strategy::kGcra, "10/second", o).value();
    std::int64_t admitted = 0;
    while (storage.apply(p, "k", 1, Effect::kHit, kT0)->allowed) ++admitted;
    EXPECT_EQ(admitted, burst);  // a fresh key admits the burst at once
    EXPECT_EQ(storage.apply(p, "k", burst + 1, Effect::kHit, kT0 + 100 * kSec)->retry_after, kNever);
  }
}

}  // namespace
}  // namespace floodgate
