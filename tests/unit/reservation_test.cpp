// Reservations (docs/algorithms.md, "Reservations"): each algorithm's settle on the worked
// examples of the docs, the memory store against the reference model (support/reservation_model),
// and the Limiter's contract — ids, time to live, the bound, repeated and unknown settles.
#include <gtest/gtest.h>

#include <string>

#include "algorithms/arith.hpp"
#include "floodgate/limiter.hpp"
#include "floodgate/memory_storage.hpp"
#include "support/reservation_model.hpp"
#include "support/variants.hpp"

namespace floodgate {
namespace {

constexpr Micros kS = kMicrosPerSecond;
constexpr Micros kT0 = Micros{1'700'000'040} * kS;  // on a minute boundary

Limit limit(std::string_view text) { return parse_limits(text).value().front(); }

// ---- the worked examples of docs/algorithms.md ---------------------------------------------------

TEST(ReservationExamples, FixedWindowRefundInTheSameWindow) {
  // 100/minute. 60 reserved at :00, 30 hit at :10, the reservation settles at 20 at :30: the window
  // holds 20 + 30 = 50.
  const Limit l = limit("100/minute");
  const Micros w = detail::window_start(kT0, 60 * kS);
  fixed_window::State s;
  fixed_window::commit(s, l, w, 60);
  fixed_window::commit(s, l, w + 10 * kS, 30);
  fixed_window::settle(s, l, w + 30 * kS, w, fixed_window::mark(s, l), 20 - 60);
  EXPECT_EQ(s.count, 50);
  EXPECT_EQ(fixed_window::evaluate(s, l, w + 30 * kS, 0).remaining, 50);
}

TEST(ReservationExamples, FixedWindowExtraChargeAfterTheWindowGoesToTheWindowAtNow) {
  // 60 reserved at :50, settled at 90 at 1:10: the first window is gone, so the 30 more are
  // charged in the window at 1:10 (even past the limit, were it reached); a refund would be dropped.
  const Limit l = limit("100/minute");
  const Micros w = detail::window_start(kT0, 60 * kS);
  fixed_window::State s;
  fixed_window::commit(s, l, w + 50 * kS, 60);
  fixed_window::settle(s, l, w + 70 * kS, w + 50 * kS, 0, 30);
  EXPECT_EQ(s.start, w + 60 * kS);
  EXPECT_EQ(s.count, 30);
  fixed_window::settle(s, l, w + 75 * kS, w + 50 * kS, 0, -20);  // another from :50, refunding: dropped
  EXPECT_EQ(s.count, 30);
}

TEST(ReservationExamples, FixedWindowFirstHitKeepsItsWindow) {
  const Limit l = limit("10/minute");
  fixed_window_first_hit::State s;
  fixed_window_first_hit::commit(s, l, kT0, 4);           // opens [T0, T0 + 60 s)
  fixed_window_first_hit::commit(s, l, kT0 + 5 * kS, 3);
  fixed_window_first_hit::settle(s, l, kT0 + 20 * kS, kT0, 0, -4);  // the 4 cost 0 after all
  EXPECT_EQ(s.start, kT0);
  EXPECT_EQ(s.count, 3);
}

TEST(ReservationExamples, MovingWindowChangesTheLogsEntryAtTheReservationsTime) {
  // 10/minute. 4 reserved at 0 s, 3 hit at 10 s, settled at 1 at 30 s: the log is {0 s: 1, 10 s: 3}.
  const Limit l = limit("10/minute");
  moving_window::State s;
  moving_window::commit(s, l, kT0, 4);
  moving_window::commit(s, l, kT0 + 10 * kS, 3);
  moving_window::settle(s, l, kT0 + 30 * kS, kT0, 0, 1 - 4);
  ASSERT_EQ(s.log.size(), 2u);
  EXPECT_EQ(s.log[0].count, 1);
  EXPECT_EQ(s.total, 4);
  EXPECT_EQ(moving_window::evaluate(s, l, kT0 + 30 * kS, 0).remaining, 6);
  // Settled at 0 the entry leaves the log; at 61 s the 0 s entry has left the window: a refund of
  // another reservation from 0 s is dropped, an extra charge is appended at 61 s.
  moving_window::settle(s, l, kT0 + 40 * kS, kT0, 0, -1);
  ASSERT_EQ(s.log.size(), 1u);
  EXPECT_EQ(s.total, 3);
  moving_window::settle(s, l, kT0 + 61 * kS, kT0, 0, -2);
  EXPECT_EQ(s.total, 3);
  moving_window::settle(s, l, kT0 + 61 * kS, kT0, 0, 2);
  ASSERT_EQ(s.log.size(), 2u);
  EXPECT_EQ(s.log.back().at, kT0 + 61 * kS);
  EXPECT_EQ(s.log.back().count, 2);
}

TEST(ReservationExamples, SlidingWindowCounterSettlesThePreviousBucket) {
  // 100/minute. 50 reserved at :50 (bucket 0); at 1:10 (bucket 1, 10 s in) it settles at 20: the
  // previous bucket holds 20, weighted 20·50/60 = 16.
  const Limit l = limit("100/minute");
  const Micros w = detail::window_start(kT0, 60 * kS);
  sliding_window::State s;
  sliding_window::commit(s, l, w + 50 * kS, 50);
  sliding_window::settle(s, l, w + 70 * kS, w + 50 * kS, 0, 20 - 50);
  EXPECT_EQ(s.start, w + 60 * kS);
  EXPECT_EQ(s.current, 0);
  EXPECT_EQ(s.previous, 20);
  EXPECT_EQ(sliding_window::evaluate(s, l, w + 70 * kS, 0).remaining, 84);
  // Two buckets later the reservation's bucket is gone: an extra charge goes to the current one.
  sliding_window::settle(s, l, w + 130 * kS, w + 50 * kS, 0, 7);
  EXPECT_EQ(s.start, w + 120 * kS);
  EXPECT_EQ(s.current, 7);
}

TEST(ReservationExamples, BucketRefundsOnlyWhatIsLeftOfTheReservation) {
  // 10/second, capacity 10. 8 reserved at 0 (2 left); by 0.5 s, 5 have drained, 3 of the
  // reservation remain. It settles at 2: the refund is min(6, 3) = 3, the bucket is full again —
  // as if it had cost 2 at 0 (drained by 0.2 s).
  const Limit l = limit("10/second");
  bucket::State s;
  EXPECT_EQ(bucket::evaluate(s, l, kT0, 8).remaining, 2);
  bucket::commit(s, l, kT0, 8);
  const Micros mark = bucket::mark(s, l);
  EXPECT_EQ(mark, kT0 + 800'000);  // the 8 have drained at 0.8 s
  bucket::settle(s, l, kT0 + 500'000, kT0, mark, 2 - 8);
  EXPECT_EQ(bucket::evaluate(s, l, kT0 + 500'000, 0).remaining, 10);
  EXPECT_EQ(bucket::evaluate(s, l, kT0 + 500'000, 0).reset_after, 0);
}

TEST(ReservationExamples, BucketRefundLeavesLaterRequestsCharged) {
  // 8 reserved at 0, 3 hit at 0.5 s (level 6: 3 of the reservation, 3 new); the reservation
  // settles at 0 at 0.5 s: only its 3 remaining units come back, the hit's 3 stay.
  const Limit l = limit("10/second");
  bucket::State s;
  bucket::commit(s, l, kT0, 8);
  const Micros mark = bucket::mark(s, l);
  bucket::commit(s, l, kT0 + 500'000, 3);
  bucket::settle(s, l, kT0 + 500'000, kT0, mark, -8);
  EXPECT_EQ(bucket::evaluate(s, l, kT0 + 500'000, 0).remaining, 7);
}

TEST(ReservationExamples, BucketExtraChargeIsDebtBeyondTheCapacity) {
  // 5 reserved at 0, settled at 15 at 0.1 s: level 5 − 1 + 10 = 14 > 10: in debt; nothing is
  // admitted until it drains below 9 (at 0.5 s the level is 10: still none; at 0.6 s, 1).
  const Limit l = limit("10/second");
  bucket::State s;
  bucket::commit(s, l, kT0, 5);
  bucket::settle(s, l, kT0 + 100'000, kT0, bucket::mark(s, l), 10);
  EXPECT_EQ(bucket::evaluate(s, l, kT0 + 100'000, 0).remaining, 0);
  EXPECT_FALSE(bucket::evaluate(s, l, kT0 + 500'000, 1).allowed);
  EXPECT_EQ(bucket::evaluate(s, l, kT0 + 500'000, 1).retry_after, 100'000);
  EXPECT_EQ(bucket::evaluate(s, l, kT0 + 600'000, 0).remaining, 1);
}

TEST(ReservationExamples, BucketRefundIsAtMostTheReplays) {
  // 8 reserved at 0, 3 hit at 0.5 s, settled at 0 at 0.7 s. Had it cost 0, the hit would have
  // found an empty bucket and drained by 0.8 s: 1 unit left at 0.7 s. The bucket keeps no history:
  // it gives back what is left of the reservation itself at 0.7 s (0.1 s of drain, 1 unit), so 3
  // units are in use — never less than the replay's 1, so never more admitted than the replay.
  const Limit l = limit("10/second");
  bucket::State s;
  bucket::commit(s, l, kT0, 8);
  const Micros mark = bucket::mark(s, l);
  bucket::commit(s, l, kT0 + 500'000, 3);
  bucket::settle(s, l, kT0 + 700'000, kT0, mark, -8);
  EXPECT_EQ(bucket::evaluate(s, l, kT0 + 700'000, 0).remaining, 7);  // 10 − 3 (⌊10 − 3.0⌋)
  bucket::State replay;
  bucket::commit(replay, l, kT0 + 500'000, 3);
  EXPECT_EQ(bucket::evaluate(replay, l, kT0 + 700'000, 0).remaining, 9);
  EXPECT_LE(bucket::evaluate(s, l, kT0 + 700'000, 0).remaining, bucket::evaluate(replay, l, kT0 + 700'000, 0).remaining);
}

// ---- the memory store against the model -----------------------------------------------------------

TEST(Reservations, MemoryStoreMatchesTheModelForEveryAlgorithm) {
  for (const auto& v : testing::kVariants) {
    for (const char* limits : {"6 per 10 seconds", "5 per 10 seconds; 12 per 30 seconds"}) {
      for (std::uint32_t seed = 1; seed <= 4; ++seed) {
        auto clock = std::make_shared<ManualClock>(kT0);
        Limiter limiter(std::make_shared<MemoryStorage>(), clock);
        const Policy p = v.policy(limits);
        testing::check_against_model(limiter, *clock, p, "k", seed, 300);
        if (HasFailure()) return;
      }
    }
  }
}

// ---- the Limiter's contract ------------------------------------------------------------------------

struct Fixture {
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>(kT0);
  std::shared_ptr<MemoryStorage> storage;
  Limiter limiter;
  explicit Fixture(MemoryStorageOptions o = {})
      : storage(std::make_shared<MemoryStorage>(o)), limiter(storage, clock) {}
};

TEST(Reservations, AnIdIsOneRequestUntilItsTimeToLiveEnds) {
  Fixture f;
  const Policy p = Policy::make("tokens", Strategy::kFixedWindow, "100/minute").value();
  auto r = f.limiter.reserve(p, "user", 30, "req-1", 5 * kS);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->reserved());
  EXPECT_EQ(r->id, "req-1");
  EXPECT_EQ(r->decision.remaining, 70);
  const auto again = f.limiter.reserve(p, "user", 30, "req-1", 5 * kS);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists) << again.status();
  EXPECT_EQ(f.limiter.stats(p, "user")->remaining, 70);  // nothing charged by the refusal
  // The same id on another key is another reservation.
  EXPECT_TRUE(f.limiter.reserve(p, "other", 30, "req-1", 5 * kS).ok());
  auto s = f.limiter.settle(p, "user", "req-1", 45);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->allowed);
  EXPECT_EQ(s->remaining, 55);
  EXPECT_EQ(f.limiter.settle(p, "user", "req-1", 45)->remaining, 55);  // settled: no change
  EXPECT_EQ(f.storage->reservations(), 2u);
  f.clock->advance(6 * kS);  // past the time to live: forgotten
  f.storage->maintain(f.clock->now());
  EXPECT_EQ(f.storage->reservations(), 0u);
  // An expired id settles as an unknown one: its usage is charged now, once.
  EXPECT_EQ(f.limiter.settle(p, "other", "req-1", 10)->remaining, 60);
  EXPECT_EQ(f.limiter.settle(p, "other", "req-1", 10)->remaining, 60);
}

TEST(Reservations, ADeniedReservationReservesNothing) {
  Fixture f;
  const Policy p = Policy::make("tokens", Strategy::kGcra, "100/minute").value();
  auto r = f.limiter.reserve(p, "user", 150, "big");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->reserved());
  EXPECT_EQ(f.storage->reservations(), 0u);
  // The id is free: settling it charges the actual usage now.
  EXPECT_EQ(f.limiter.settle(p, "user", "big", 40)->remaining, 60);
}

TEST(Reservations, AnEmptyIdIsMadeUp) {
  Fixture f;
  const Policy p = Policy::make("tokens", Strategy::kSlidingWindowCounter, "100/minute").value();
  auto a = f.limiter.reserve(p, "user", 10);
  auto b = f.limiter.reserve(p, "user", 10);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->id.size(), 32u);
  EXPECT_NE(a->id, b->id);
  EXPECT_EQ(f.limiter.settle(p, "user", a->id, 0)->remaining, 90);
}

TEST(Reservations, BadInputIsRefusedNamingTheFieldAndChargesNothing) {
  Fixture f;
  const Policy p = Policy::make("tokens", Strategy::kFixedWindow, "100/minute").value();
  const auto zero_ttl = f.limiter.reserve(p, "user", 10, "a", 0);
  EXPECT_EQ(zero_ttl.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(zero_ttl.status().message().find("ttl"), std::string_view::npos) << zero_ttl.status();
  const auto long_ttl = f.limiter.reserve(p, "user", 10, "a", kMaxReservationTtl + 1);
  EXPECT_EQ(long_ttl.status().code(), absl::StatusCode::kInvalidArgument);
  const auto long_id = f.limiter.reserve(p, "user", 10, std::string(kMaxReservationId + 1, 'x'));
  EXPECT_EQ(long_id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(long_id.status().message().find("reservation id"), std::string_view::npos) << long_id.status();
  EXPECT_EQ(f.limiter.settle(p, "user", "", 5).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f.limiter.settle(p, "user", "a", -1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f.limiter.stats(p, "user")->remaining, 100);
  EXPECT_EQ(f.storage->reservations(), 0u);
}

TEST(Reservations, TheBoundRefusesAndCountsAndExpiredEntriesMakeRoom) {
  MemoryStorageOptions o;
  o.max_reservations = 3;
  Fixture f(o);
  const Policy p = Policy::make("tokens", Strategy::kFixedWindow, "1000/hour").value();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(f.limiter.reserve(p, "k" + std::to_string(i), 1, "id", 2 * kS).ok());
  const auto full = f.limiter.reserve(p, "k9", 1, "id", 2 * kS);
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted) << full.status();
  EXPECT_EQ(f.storage->reservation_refusals(), 1u);
  EXPECT_EQ(f.limiter.stats(p, "k9")->remaining, 1000);  // nothing charged
  bool counted = false;
  for (const StorageCounter& c : f.storage->counters()) {
    if (c.name == "floodgate_memory_reservation_refusals_total") counted = c.value == 1;
  }
  EXPECT_TRUE(counted);
  f.clock->advance(3 * kS);  // the three expire
  EXPECT_TRUE(f.limiter.reserve(p, "k9", 1, "id", 2 * kS).ok());
  EXPECT_LE(f.storage->reservations(), 3u);
}

// A settle of an unknown id is charged now and remembered so that it counts once: with the table
// full it can be neither, and is refused with nothing charged (sent three times: never charged).
TEST(Reservations, AFullTableNeverChargesAnUnknownSettleTwice) {
  MemoryStorageOptions o;
  o.max_reservations = 2;
  Fixture f(o);
  const Policy p = Policy::make("tokens", Strategy::kFixedWindow, "1000/hour").value();
  ASSERT_TRUE(f.limiter.reserve(p, "k0", 10, "a", 60 * kS).ok());
  ASSERT_TRUE(f.limiter.reserve(p, "k0", 10, "b", 60 * kS).ok());
  for (int i = 0; i < 3; ++i) {
    const auto s = f.limiter.settle(p, "k0", "unknown", 3);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted) << s.status();
    EXPECT_NE(s.status().message().find("max_reservations"), std::string_view::npos) << s.status();
  }
  EXPECT_EQ(f.limiter.stats(p, "k0")->remaining, 980);  // the two reservations, nothing more
  // A known id still settles (its entry is there: no room needed), and then makes none.
  EXPECT_EQ(f.limiter.settle(p, "k0", "a", 0)->remaining, 990);
  EXPECT_EQ(f.storage->reservations(), 2u);
  // Once room is made (the entries expire), the unknown id is charged, once.
  f.clock->advance(61 * kS);
  EXPECT_EQ(f.limiter.settle(p, "k0", "unknown", 3)->remaining, 987);
  EXPECT_EQ(f.limiter.settle(p, "k0", "unknown", 3)->remaining, 987);
}

TEST(Reservations, LiteLlmOvershootScenario) {
  // Five concurrent requests of 130 tokens each against 100 tokens per minute. Charged after the
  // response (a test at the start, the usage hit after): all five pass the test, 650 tokens used.
  // Reserved at an estimate of 100 and settled: one is admitted, 130 used (the overshoot is its
  // actual − estimate, 30).
  const Policy p = Policy::make("tpm", Strategy::kFixedWindow, "100/minute").value();
  Fixture after;
  int admitted_after = 0;
  for (int i = 0; i < 5; ++i) admitted_after += after.limiter.test(p, "user", 1)->allowed ? 1 : 0;
  std::int64_t used_after = 0;
  for (int i = 0; i < admitted_after; ++i) {
    ASSERT_TRUE(after.limiter.settle(p, "user", "after-" + std::to_string(i), 130).ok());
    used_after += 130;
  }
  EXPECT_EQ(admitted_after, 5);
  EXPECT_EQ(used_after, 650);
  Fixture reserved;
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    auto r = reserved.limiter.reserve(p, "user", 100, "req-" + std::to_string(i));
    ASSERT_TRUE(r.ok());
    if (r->reserved()) ids.push_back(r->id);
  }
  ASSERT_EQ(ids.size(), 1u);
  ASSERT_TRUE(reserved.limiter.settle(p, "user", ids[0], 130).ok());
  const Decision d = *reserved.limiter.stats(p, "user");
  EXPECT_EQ(d.remaining, 0);
  EXPECT_FALSE(reserved.limiter.test(p, "user", 1)->allowed);
}

}  // namespace
}  // namespace floodgate
