// What a storage does when a policy's limit changes (a reload raising or lowering it): the usage
// is kept (Policy::state_id; docs/algorithms.md, "When a limit changes"), for every algorithm;
// another algorithm or another period starts afresh. One check, run on every storage.
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "floodgate/storage.hpp"
#include "support/variants.hpp"

namespace floodgate::testing {

/// Runs the limit-change scenarios on `storage` with user keys under `key_prefix` (distinct per
/// run on a shared server). Uses times around `t0` (µs; a storage with a client clock).
inline void check_limit_changes(Storage& storage, const std::string& key_prefix, Micros t0) {
  constexpr Micros kMinute = 60 * kMicrosPerSecond;
  // t0 at the start of an epoch-aligned minute, so that every window holds the whole test.
  const Micros t = t0 - t0 % kMinute;
  for (const Variant& v : kVariants) {
    SCOPED_TRACE(v.name);
    const std::string key = key_prefix + v.name;
    const Policy was = v.policy("100/minute", "rule");
    const Policy raised = v.policy("200/minute", "rule");
    const Policy lowered = v.policy("50/minute", "rule");
    ASSERT_TRUE(storage.apply(was, key, 80, Effect::kHit, t)->allowed);
    // Raised: 80 of 200 used, 120 left; and charged in the same state.
    const Decision up = storage.apply(raised, key, 20, Effect::kHit, t).value();
    EXPECT_TRUE(up.allowed);
    EXPECT_EQ(up.remaining, 100);
    // Lowered: 100 used of 50, denied; nothing left; the state is not charged.
    const Decision down = storage.apply(lowered, key, 1, Effect::kHit, t).value();
    EXPECT_FALSE(down.allowed);
    EXPECT_EQ(down.remaining, 0);
    if (uses_burst(v.strategy)) {
      // 100 in use, 50 fit: 51 must drain at the new rate, 50 a minute: 61.2 s.
      EXPECT_EQ(down.retry_after, 51 * kMinute / 50);
    }
    // Back to the old limit: still 100 used, nothing was charged while lowered.
    EXPECT_EQ(storage.apply(was, key, 0, Effect::kTest, t)->remaining, 0);
    // Once the windows have passed (two for the sliding window counter), the lowered limit
    // admits its own amount.
    EXPECT_TRUE(storage.apply(lowered, key, 50, Effect::kHit, t + 2 * kMinute + 1)->allowed);
    // Another algorithm or another period: a state of its own, afresh.
    const Variant& other = v.strategy == Strategy::kGcra ? kVariants[0] : kVariants[6];
    EXPECT_EQ(storage.apply(other.policy("100/minute", "rule"), key, 0, Effect::kTest, t)->remaining, 100);
    EXPECT_EQ(storage.apply(v.policy("100/hour", "rule"), key, 0, Effect::kTest, t)->remaining, 100);
  }
}

}  // namespace floodgate::testing
