#include "floodgate/memory_storage.hpp"

#include <string>

#include <gtest/gtest.h>

#include "floodgate/algorithms.hpp"
#include "floodgate/limiter.hpp"

namespace floodgate {
namespace {

constexpr Micros kSec = kMicrosPerSecond;

Policy policy(Strategy s, std::string_view limits, PolicyOptions o = {}, std::string name = "p") {
  return Policy::make(std::move(name), s, limits, o).value();
}

TEST(MemoryStorage, MultiLimitIsAllOrNothing) {
  MemoryStorage storage;
  const Policy p = policy(Strategy::kFixedWindow, "2/second; 3/minute");
  EXPECT_TRUE(storage.apply(p, "k", 2, Effect::kHit, 0)->allowed);
  const Decision denied = storage.apply(p, "k", 1, Effect::kHit, 0).value();
  EXPECT_FALSE(denied.allowed);  // the per-second limit is spent
  EXPECT_EQ(denied.remaining, 0);
  EXPECT_EQ(denied.retry_after, kSec);
  // The denied request charged neither limit: one more fits the minute after the second ends.
  const Decision next = storage.apply(p, "k", 1, Effect::kHit, kSec).value();
  EXPECT_TRUE(next.allowed);
  EXPECT_EQ(next.remaining, 0);  // minute: 3 − 3
  EXPECT_EQ(next.limit, 3);
  EXPECT_EQ(next.period, 60 * kSec);
  EXPECT_FALSE(storage.apply(p, "k", 1, Effect::kHit, 2 * kSec)->allowed);
}

TEST(MemoryStorage, DeniedMultiLimitReportsUnchargedState) {
  MemoryStorage storage;
  const Policy p = policy(Strategy::kGcra, "10/second; 2/minute");
  ASSERT_TRUE(storage.apply(p, "k", 2, Effect::kHit, 0)->allowed);
  const Decision d = storage.apply(p, "k", 1, Effect::kHit, 0).value();
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.retry_after, 30 * kSec);  // one unit of the minute limit drains every 30 s
  EXPECT_EQ(d.reset_after, 60 * kSec);
}

TEST(MemoryStorage, TestPeeksWithoutConsuming) {
  MemoryStorage storage;
  const Policy p = policy(Strategy::kTokenBucket, "3/second");
  for (int i = 0; i < 5; ++i) {
    const Decision d = storage.apply(p, "k", 2, Effect::kTest, 0).value();
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(d.remaining, 3);  // the state as it is
  }
  EXPECT_EQ(storage.size(p), 0u);  // a test on an absent key stores nothing
  ASSERT_TRUE(storage.apply(p, "k", 3, Effect::kHit, 0)->allowed);
  const Decision t = storage.apply(p, "k", 1, Effect::kTest, 0).value();
  EXPECT_FALSE(t.allowed);
  EXPECT_GT(t.retry_after, 0);
}

TEST(MemoryStorage, ClearForgetsTheKey) {
  MemoryStorage storage;
  const Policy p = policy(Strategy::kMovingWindow, "1/hour");
  ASSERT_TRUE(storage.apply(p, "k", 1, Effect::kHit, 0)->allowed);
  ASSERT_FALSE(storage.apply(p, "k", 1, Effect::kHit, 0)->allowed);
  ASSERT_TRUE(storage.clear(p, "k").ok());
  EXPECT_TRUE(storage.apply(p, "k", 1, Effect::kHit, 0)->allowed);
  EXPECT_TRUE(storage.clear(p, "absent").ok());
}

TEST(MemoryStorage, PoliciesDoNotShareStateButAChangedAmountKeepsItsUsage) {
  MemoryStorage storage;
  const Policy a = policy(Strategy::kFixedWindow, "1/minute", {}, "a");
  const Policy b = policy(Strategy::kFixedWindow, "1/minute", {}, "b");
  const Policy a2 = policy(Strategy::kFixedWindow, "2/minute", {}, "a");  // a, limit raised
  const Policy a3 = policy(Strategy::kFixedWindow, "2/hour", {}, "a");    // a, another window
  ASSERT_TRUE(storage.apply(a, "k", 1, Effect::kHit, 0)->allowed);
  EXPECT_TRUE(storage.apply(b, "k", 1, Effect::kHit, 0)->allowed);
  EXPECT_FALSE(storage.apply(a2, "k", 2, Effect::kHit, 0)->allowed);  // 1 of 2 used
  EXPECT_TRUE(storage.apply(a2, "k", 1, Effect::kHit, 0)->allowed);
  EXPECT_FALSE(storage.apply(a, "k", 1, Effect::kHit, 0)->allowed);
  EXPECT_TRUE(storage.apply(a3, "k", 2, Effect::kHit, 0)->allowed);  // afresh
}

TEST(MemoryStorage, AbsentEntriesAreReclaimedIncrementally) {
  MemoryStorageOptions o;
  o.shards = 1;
  MemoryStorage storage(o);
  const Policy p = policy(Strategy::kGcra, "10/second");
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(storage.apply(p, "old-" + std::to_string(i), 1, Effect::kHit, 0)->allowed);
  }
  EXPECT_EQ(storage.size(p), 1000u);
  // 0.1 s later every old key is back to full capacity; new keys reclaim them as they come once
  // they have been absent for a second (2.1 s: well past it).
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(storage.apply(p, "new-" + std::to_string(i), 1, Effect::kHit, 2 * kSec + kSec / 10)->allowed);
  }
  EXPECT_EQ(storage.reclaimed(), 1000u);
  EXPECT_EQ(storage.size(p), 1000u);
  EXPECT_EQ(storage.evictions(), 0u);
}

// Keys revisited soon after going absent are not removed and re-inserted (which would make every
// decision of a busy GCRA key take the shard's exclusive lock): within a second of going absent a
// record stays, and a decision on it is a plain decision.
TEST(MemoryStorage, KeysAbsentForLessThanASecondAreNotReclaimed) {
  MemoryStorageOptions o;
  o.shards = 1;
  MemoryStorage storage(o);
  const Policy p = policy(Strategy::kGcra, "10/second");
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(storage.apply(p, "k-" + std::to_string(i), 1, Effect::kHit, 0)->allowed);
  }
  // At 0.5 s every key is absent (since 0.1 s), and new keys arrive: none of the old is reclaimed.
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(storage.apply(p, "n-" + std::to_string(i), 1, Effect::kHit, kSec / 2)->allowed);
  }
  EXPECT_EQ(storage.reclaimed(), 0u);
  EXPECT_EQ(storage.size(p), 2000u);
  // The bound still wins: with room for 1000, absent keys go first and count as reclaimed.
  MemoryStorageOptions small = o;
  small.max_keys = 1000;
  MemoryStorage bounded(small);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(bounded.apply(p, "k-" + std::to_string(i), 1, Effect::kHit, 0)->allowed);
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(bounded.apply(p, "n-" + std::to_string(i), 1, Effect::kHit, kSec / 2)->allowed);
  EXPECT_LE(bounded.size(p), 1000u);
  EXPECT_EQ(bounded.evictions(), 0u);
  EXPECT_GE(bounded.reclaimed(), 500u);
}

TEST(MemoryStorage, MaxKeysEvictsTheEntriesClosestToFullCapacity) {
  MemoryStorageOptions o;
  o.shards = 1;
  o.max_keys = 100;
  MemoryStorage storage(o);
  const Policy p = policy(Strategy::kTokenBucket, "100/hour");
  // A heavy user, far from full capacity: its state is what evictions must keep.
  ASSERT_TRUE(storage.apply(p, "heavy", 100, Effect::kHit, 0)->allowed);
  // A flood of unique keys, each one hit (close to full capacity).
  for (int i = 0; i < 10'000; ++i) {
    ASSERT_TRUE(storage.apply(p, "flood-" + std::to_string(i), 1, Effect::kHit, 0)->allowed);
  }
  EXPECT_LE(storage.size(p), 100u);
  EXPECT_GE(storage.evictions(), 9'900u);
  EXPECT_FALSE(storage.apply(p, "heavy", 1, Effect::kHit, 0)->allowed);  // still limited
}

TEST(MemoryStorage, ShaperDelayOnlyOnAllowed) {
  MemoryStorage storage;
  PolicyOptions o;
  o.shape = true;
  const Policy p = policy(Strategy::kLeakyBucket, "2/second", o);
  EXPECT_EQ(storage.apply(p, "k", 1, Effect::kHit, 0)->delay, 0);
  EXPECT_EQ(storage.apply(p, "k", 1, Effect::kHit, 0)->delay, 500'000);
  const Decision full = storage.apply(p, "k", 1, Effect::kHit, 0).value();
  EXPECT_FALSE(full.allowed);
  EXPECT_EQ(full.delay, 0);
}

}  // namespace
}  // namespace floodgate

namespace floodgate {
namespace {

// The table a thread remembers for a policy object (Policy::serial) must not outlive the table:
// after forget(), the same object decides afresh on a new table (with a stale one it would deny,
// or, under ASan, read freed memory).
TEST(MemoryStorage, ARememberedTableIsNotUsedAfterItIsFreed) {
  MemoryStorage storage;
  const Policy p = Policy::make("once", Strategy::kFixedWindow, "1/hour").value();
  ASSERT_TRUE(storage.apply(p, "k", 1, Effect::kHit, 0)->allowed);
  ASSERT_FALSE(storage.apply(p, "k", 1, Effect::kHit, 1)->allowed);  // remembered, and full
  storage.forget(p);
  EXPECT_EQ(storage.policies(), 0u);
  EXPECT_TRUE(storage.apply(p, "k", 1, Effect::kHit, 2)->allowed);
  EXPECT_EQ(storage.policies(), 1u);
  const Policy copy = p;  // a copy is another object: its own serial, the same table
  EXPECT_NE(copy.serial(), p.serial());
  EXPECT_FALSE(storage.apply(copy, "k", 1, Effect::kHit, 3)->allowed);
}

// A record holds its key inline up to 20 characters and on the heap beyond (record.hpp), and a
// removed record is reused for the next key whatever its length: every length around those
// bounds keeps its own state, apart from a key that differs in one middle character only, and
// across reuse from inline to heap and back.
TEST(MemoryStorage, KeysOfEveryLengthKeepTheirOwnStateAcrossRecordReuse) {
  for (const Strategy s : {Strategy::kFixedWindow, Strategy::kGcra}) {
    MemoryStorage storage;
    const Policy p = policy(s, "1/hour");
    for (std::size_t n = 0; n <= 48; ++n) {
      std::string a(n, 'a');
      std::string b = a;
      if (n > 0) b[n / 2] = 'b';
      SCOPED_TRACE(n);
      ASSERT_TRUE(storage.apply(p, a, 1, Effect::kHit, 0)->allowed);
      EXPECT_FALSE(storage.apply(p, a, 1, Effect::kHit, 0)->allowed);
      if (n == 0) continue;
      EXPECT_TRUE(storage.apply(p, b, 1, Effect::kHit, 0)->allowed);
      EXPECT_FALSE(storage.apply(p, b, 1, Effect::kHit, 0)->allowed);
      ASSERT_TRUE(storage.clear(p, b).ok());  // its record goes to the next, longer key
      EXPECT_TRUE(storage.apply(p, b, 1, Effect::kTest, 0)->allowed);
      EXPECT_FALSE(storage.apply(p, a, 1, Effect::kTest, 0)->allowed);
    }
    for (std::size_t n = 0; n <= 48; ++n) {  // still counted, after all that reuse
      EXPECT_FALSE(storage.apply(p, std::string(n, 'a'), 1, Effect::kTest, 0)->allowed) << n;
    }
    EXPECT_EQ(storage.size(p), 49u);
  }
}


// Whether a decision was made and allows: a refusal fails the check instead of aborting the test.
::testing::AssertionResult allowed(const absl::StatusOr<Decision>& d) {
  if (!d.ok()) return ::testing::AssertionFailure() << d.status();
  if (!d->allowed) return ::testing::AssertionFailure() << "denied";
  return ::testing::AssertionSuccess();
}

// A moving window's log holds an entry per instant with admitted units: a client that picks a
// large amount could grow it without end (1.17 M inline hits on one key: +18 MB of RSS). The
// logs stay within max_log_bytes: a hit that would grow one past it is refused, with nothing
// committed; merging into the newest entry, entries ageing out and a cleared key free room.
TEST(MemoryStorage, MovingWindowLogsStayWithinTheirBound) {
  MemoryStorageOptions o;
  o.max_log_bytes = 64 * sizeof(moving_window::Entry);  // buffers of 4, 8, 16, 32, 64 entries
  MemoryStorage storage(o);
  const Policy p = policy(Strategy::kMovingWindow, "1000000/hour");
  for (Micros t = 0; t < 64; ++t) ASSERT_TRUE(allowed(storage.apply(p, "k", 1, Effect::kHit, t))) << t;
  EXPECT_EQ(storage.log_bytes(), 64 * sizeof(moving_window::Entry));
  const auto refused = storage.apply(p, "k", 1, Effect::kHit, 64);  // needs 64 more entries
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_NE(refused.status().message().find("max_log_bytes"), std::string_view::npos) << refused.status();
  EXPECT_EQ(storage.log_refusals(), 1u);
  EXPECT_EQ(storage.apply(p, "k", 0, Effect::kTest, 64)->remaining, 1000000 - 64) << "nothing committed";
  EXPECT_TRUE(allowed(storage.apply(p, "k", 1, Effect::kTest, 64))) << "a test stores nothing";
  EXPECT_TRUE(allowed(storage.apply(p, "k", 5, Effect::kHit, 63))) << "merged into the newest entry";
  EXPECT_EQ(storage.apply(p, "other", 1, Effect::kHit, 64).status().code(), absl::StatusCode::kResourceExhausted);
  const Micros hour = 3600 * kSec;
  EXPECT_TRUE(allowed(storage.apply(p, "k", 1, Effect::kHit, hour + 1))) << "the oldest entries left";
  ASSERT_TRUE(storage.clear(p, "k").ok());
  EXPECT_EQ(storage.log_bytes(), 0u);
  EXPECT_TRUE(allowed(storage.apply(p, "other", 1, Effect::kHit, hour + 2)));
  EXPECT_EQ(storage.log_bytes(), 4 * sizeof(moving_window::Entry));
  EXPECT_EQ(storage.log_refusals(), 2u);
  storage.forget(p);  // the table goes: its logs give their bytes back
  EXPECT_EQ(storage.log_bytes(), 0u);
}

// The logs of request-made policies (a client picks their amounts) have a bound of their own
// within max_log_bytes: reaching it leaves the configured policies' logs their room.
TEST(MemoryStorage, RequestMadeLogsHaveABoundOfTheirOwn) {
  MemoryStorageOptions o;
  o.max_request_log_bytes = 16 * sizeof(moving_window::Entry);
  MemoryStorage storage(o);
  const Policy inline_limit = policy(Strategy::kMovingWindow, "1000000000/hour").with_identity(PolicyKind::kInline, {});
  const Policy configured = policy(Strategy::kMovingWindow, "1000000000/hour", {}, "api");
  for (Micros t = 0; t < 16; ++t) ASSERT_TRUE(allowed(storage.apply(inline_limit, "k", 1, Effect::kHit, t))) << t;
  const auto refused = storage.apply(inline_limit, "k", 1, Effect::kHit, 16);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_NE(refused.status().message().find("max_request_log_bytes"), std::string_view::npos) << refused.status();
  for (Micros t = 0; t < 100; ++t) ASSERT_TRUE(allowed(storage.apply(configured, "k", 1, Effect::kHit, t))) << t;
  EXPECT_EQ(storage.request_log_bytes(), 16 * sizeof(moving_window::Entry));
  EXPECT_EQ(storage.log_bytes(), (16 + 128) * sizeof(moving_window::Entry));
}

// A refusal is the request's, not a failure of the storage: the Limiter hands it to the caller
// and the policy's fail mode does not decide (an open one would admit the flood it bounds).
TEST(MemoryStorage, ALogBoundRefusalIsNotDegraded) {
  MemoryStorageOptions o;
  o.max_log_bytes = 4 * sizeof(moving_window::Entry);
  auto storage = std::make_shared<MemoryStorage>(o);
  auto clock = std::make_shared<ManualClock>(kSec);
  Limiter limiter(storage, clock);
  PolicyOptions open;
  open.fail = FailMode::kOpen;
  const Policy p = policy(Strategy::kMovingWindow, "100/minute", open);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(allowed(limiter.hit(p, "k")));
    clock->advance(1);
  }
  const auto refused = limiter.hit(p, "k");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_EQ(limiter.degraded_count(), 0u);
}


// A log's buffer halves when three quarters empty: the bytes it gives back are counted back.
TEST(MemoryStorage, AShrinkingLogGivesItsBytesBack) {
  MemoryStorage storage;
  const Policy p = policy(Strategy::kMovingWindow, "1000000/minute");
  for (Micros t = 0; t < 1024; ++t) ASSERT_TRUE(allowed(storage.apply(p, "k", 1, Effect::kHit, t))) << t;
  EXPECT_EQ(storage.log_bytes(), 1024 * sizeof(moving_window::Entry));
  ASSERT_TRUE(allowed(storage.apply(p, "k", 1, Effect::kHit, 61 * kSec)));  // the others left
  EXPECT_EQ(storage.log_bytes(), 512 * sizeof(moving_window::Entry));
  // Still three quarters empty with no entry leaving: it halves on each hit, down to 64 entries.
  ASSERT_TRUE(allowed(storage.apply(p, "k", 1, Effect::kHit, 61 * kSec + 1)));
  EXPECT_EQ(storage.log_bytes(), 256 * sizeof(moving_window::Entry));
  for (Micros t = 2; t < 10; ++t) ASSERT_TRUE(allowed(storage.apply(p, "k", 1, Effect::kHit, 61 * kSec + t)));
  EXPECT_EQ(storage.log_bytes(), 64 * sizeof(moving_window::Entry));
}

}  // namespace
}  // namespace floodgate
