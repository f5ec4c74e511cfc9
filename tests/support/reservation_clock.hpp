// tests/support/reservation_clock.hpp — one check for every networked store: a reservation's (and
// a lease's) time to live runs on the decision's clock (the caller's), not the server's. A settle
// after it keeps the estimate, the id is unknown and free again, a lease is neither renewed nor
// known.
#pragma once

#include <memory>

#include <gtest/gtest.h>

#include "floodgate/limiter.hpp"
#include "floodgate/storage.hpp"

namespace floodgate::testing {

inline void expect_time_to_live_on_the_decisions_clock(const std::shared_ptr<Storage>& storage) {
  constexpr Micros kT = Micros{1'700'000'040} * kMicrosPerSecond;  // on a minute boundary
  auto clock = std::make_shared<ManualClock>(kT);
  Limiter limiter(storage, clock);
  const Policy p = Policy::make("tokens", Strategy::kFixedWindow, "100/minute").value();
  ASSERT_TRUE(limiter.reserve(p, "a", 10, "A", kMicrosPerSecond).ok());
  ASSERT_TRUE(limiter.reserve(p, "a", 5, "R", kMicrosPerSecond).ok());
  EXPECT_TRUE(*storage->known(p, "a", "A", kT + kMicrosPerSecond - 1));
  EXPECT_FALSE(*storage->known(p, "a", "A", kT + kMicrosPerSecond));
  clock->advance(2 * kMicrosPerSecond);
  EXPECT_EQ(limiter.settle(p, "a", "A", 0)->remaining, 85);  // expired: the estimate stays
  auto again = limiter.reserve(p, "a", 20, "R", 5 * kMicrosPerSecond);  // an expired id is free
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->decision.remaining, 65);
  clock->advance(kMicrosPerSecond);
  EXPECT_EQ(limiter.settle(p, "a", "R", 5)->remaining, 80);
  EXPECT_EQ(limiter.settle(p, "a", "R", 5)->remaining, 80);  // settled: no change
  // The settled record expires with the reservation (at kT + 7 s): then R is unknown again.
  clock->advance(4 * kMicrosPerSecond);
  EXPECT_FALSE(*storage->known(p, "a", "R", clock->now()));
  EXPECT_EQ(limiter.settle(p, "a", "R", 5)->remaining, 75);
  // A lease past its time to live is neither renewed nor known; its id is free.
  const Policy slots = Policy::make("slots", Strategy::kConcurrency, "1 concurrent for 10 seconds").value();
  auto lease = limiter.acquire(slots, "a", 1, "L");
  ASSERT_TRUE(lease.ok() && lease->held()) << lease.status();
  clock->advance(10 * kMicrosPerSecond + 1);
  EXPECT_FALSE(*storage->known(slots, "a", "L", clock->now()));
  EXPECT_EQ(limiter.renew(slots, "a", "L").status().code(), absl::StatusCode::kNotFound);
  auto retaken = limiter.acquire(slots, "a", 1, "L");
  EXPECT_TRUE(retaken.ok() && retaken->held()) << retaken.status();
}

}  // namespace floodgate::testing
