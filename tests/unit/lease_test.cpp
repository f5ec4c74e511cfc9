// Concurrency limits: the notation, the policy's rules, leases on the memory store (acquire,
// release, renew, expiry, the Lease object), and the memory store against the reference model.
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "floodgate/limiter.hpp"
#include "floodgate/memory_storage.hpp"
#include "support/lease_model.hpp"

namespace floodgate {
namespace {

constexpr Micros kStart = Micros{1'700'000'000} * kMicrosPerSecond;

Policy slots(const char* limits = "2 concurrent for 10 seconds") {
  return Policy::make("slots", Strategy::kConcurrency, limits).value();
}

TEST(ConcurrencyNotation, ParsesAndRendersBack) {
  const auto plain = parse_limits("20 concurrent");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE((*plain)[0].concurrent);
  EXPECT_EQ((*plain)[0].amount, 20);
  EXPECT_EQ((*plain)[0].period, kDefaultLeaseTtl);
  EXPECT_EQ(to_string((*plain)[0]), "20 concurrent for 1 minute");
  const auto five = parse_limits("4 Concurrent for 5 minutes");
  ASSERT_TRUE(five.ok()) << five.status();
  EXPECT_EQ((*five)[0].period, 5 * 60 * kMicrosPerSecond);
  EXPECT_EQ(to_string((*five)[0]), "4 concurrent for 5 minutes");
  EXPECT_EQ(parse_limits(to_string((*five)[0]))->front(), (*five)[0]);
  EXPECT_EQ(to_string(parse_limits("3 concurrent for 90 s")->front()), "3 concurrent for 90 seconds");
  // "20/minute" is a rate, not a concurrency limit.
  EXPECT_FALSE(parse_limits("20/minute")->front().concurrent);
}

TEST(ConcurrencyNotation, BadTextNamesWhatIsWrong) {
  const auto per = parse_limits("20 concurrent per minute");
  EXPECT_EQ(per.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(per.status().message().find("\"per\""), std::string_view::npos) << per.status();
  const auto unit = parse_limits("20 concurrent for 5 fortnights");
  EXPECT_NE(unit.status().message().find("fortnights"), std::string_view::npos) << unit.status();
  const auto short_ttl = parse_limits("20 concurrent for 500 us");
  EXPECT_NE(short_ttl.status().message().find("at least 1 ms"), std::string_view::npos) << short_ttl.status();
  EXPECT_FALSE(parse_limits("0 concurrent").ok());
  EXPECT_FALSE(parse_limits("20 concurrent for 1 minute extra").ok());
  // The units the message lists, and no more: at most a day.
  EXPECT_TRUE(parse_limits("2 concurrent for 1 day").ok());
  for (const char* text : {"2 concurrent for 100 years", "2 concurrent for 1 week", "2 concurrent for 1 month"}) {
    const auto long_unit = parse_limits(text);
    EXPECT_NE(long_unit.status().message().find("unknown unit of a lease's time to live"), std::string_view::npos)
        << long_unit.status();
  }
  const auto two_days = parse_limits("2 concurrent for 2 days");
  EXPECT_NE(two_days.status().message().find("at most one day"), std::string_view::npos) << two_days.status();
  EXPECT_FALSE(parse_limits("2 concurrent for 86401 seconds").ok());
  // budget_slice on a concurrency policy: refused with the concurrency strategy's own reason.
  PolicyOptions sliced;
  sliced.budget.max_slice = 10;
  const auto budget = Policy::make("p", Strategy::kConcurrency, "20 concurrent", sliced);
  EXPECT_NE(budget.status().message().find("held until its lease ends"), std::string_view::npos) << budget.status();
  EXPECT_EQ(budget.status().message().find("window opens"), std::string_view::npos) << budget.status();
}

TEST(ConcurrencyPolicy, TakesOneConcurrencyLimitAndNothingElseTakesIt) {
  EXPECT_TRUE(Policy::make("p", Strategy::kConcurrency, "20 concurrent").ok());
  const auto rate = Policy::make("p", Strategy::kConcurrency, "20/minute");
  EXPECT_NE(rate.status().message().find("one concurrency limit"), std::string_view::npos) << rate.status();
  EXPECT_FALSE(Policy::make("p", Strategy::kConcurrency, "20 concurrent; 5 concurrent for 1 second").ok());
  const auto gcra = Policy::make("p", Strategy::kGcra, "20 concurrent");
  EXPECT_NE(gcra.status().message().find("takes the concurrency strategy"), std::string_view::npos) << gcra.status();
  PolicyOptions cached;
  cached.blocked_cache = 10;
  EXPECT_FALSE(Policy::make("p", Strategy::kConcurrency, "20 concurrent", cached).ok());
  EXPECT_EQ(parse_strategy("concurrency").value(), Strategy::kConcurrency);
  EXPECT_EQ(std::string(to_string(Strategy::kConcurrency)), "concurrency");
}

struct Fixture {
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>(kStart);
  std::shared_ptr<MemoryStorage> storage = std::make_shared<MemoryStorage>();
  Limiter limiter{storage, clock};
};

TEST(Leases, AtMostTheLimitAndAReleaseFreesASlotAtOnce) {
  Fixture f;
  const Policy p = slots();
  auto a = f.limiter.acquire(p, "user", 1, "a");
  auto b = f.limiter.acquire(p, "user", 1, "b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(a->held());
  EXPECT_EQ(a->id(), "a");
  EXPECT_EQ(a->decision().remaining, 1);
  EXPECT_EQ(b->decision().remaining, 0);
  f.clock->advance(2 * kMicrosPerSecond);
  auto c = f.limiter.acquire(p, "user");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->held());
  EXPECT_FALSE(c->decision().allowed);
  // Without a release, the first slot frees when a's time to live ends (10 s after it, + 1 µs).
  EXPECT_EQ(c->decision().retry_after, 8 * kMicrosPerSecond + 1);
  ASSERT_TRUE(a->release().ok());
  EXPECT_FALSE(a->held());
  auto d = f.limiter.acquire(p, "user");
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->held());
  EXPECT_EQ(d->id().size(), 32U);  // a random id
  // A second release of "a" frees nothing: the key stays full.
  EXPECT_EQ(f.limiter.release(p, "user", "a").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(f.limiter.stats(p, "user")->remaining, 0);
  // Another key's lease, an unknown id: nothing freed either.
  EXPECT_EQ(f.limiter.release(p, "other", "b").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(f.limiter.release(p, "user", "nobody").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(f.limiter.stats(p, "user")->remaining, 0);
}

TEST(Leases, ALeaseFreesItselfAfterItsTimeToLiveAndRenewKeepsIt) {
  Fixture f;
  const Policy p = slots();
  auto a = f.limiter.acquire(p, "user", 1, "a");
  auto b = f.limiter.acquire(p, "user", 1, "b");
  ASSERT_TRUE(a->held() && b->held());
  f.clock->advance(9 * kMicrosPerSecond);
  const auto renewed = b->renew();
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  EXPECT_EQ(renewed->remaining, 0);
  EXPECT_EQ(renewed->reset_after, 10 * kMicrosPerSecond + 1);
  // a's last instant, then 1 µs later it has expired; b (renewed at 9 s) holds on.
  f.clock->advance(kMicrosPerSecond);
  EXPECT_EQ(f.limiter.stats(p, "user")->remaining, 0);
  f.clock->advance(1);
  EXPECT_EQ(f.limiter.stats(p, "user")->remaining, 1);
  EXPECT_EQ(a->renew().status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(a->release().status().code(), absl::StatusCode::kNotFound);
  // b expires 10 s after its renewal.
  f.clock->advance(9 * kMicrosPerSecond);
  EXPECT_EQ(f.limiter.stats(p, "user")->remaining, 2);
  EXPECT_EQ(b->renew().status().code(), absl::StatusCode::kNotFound);
}

TEST(Leases, TheLeaseObjectReleasesWhenDestroyedAndOnlyOnce) {
  Fixture f;
  const Policy p = slots("1 concurrent for 1 minute");
  {
    auto a = f.limiter.acquire(p, "user");
    ASSERT_TRUE(a->held());
    EXPECT_FALSE(f.limiter.acquire(p, "user")->held());
    Lease moved = std::move(*a);
    EXPECT_FALSE(a->held());
    EXPECT_TRUE(moved.held());
    EXPECT_EQ(a->release().status().code(), absl::StatusCode::kFailedPrecondition);
  }
  auto again = f.limiter.acquire(p, "user");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->held());
  // Assigning over a held lease releases it first.
  Lease other;
  EXPECT_FALSE(other.held());
  other = std::move(*again);
  other = Lease{};
  EXPECT_TRUE(f.limiter.acquire(p, "user")->held());
}

TEST(Leases, RefusedWhereTheyDoNotApply) {
  Fixture f;
  const Policy rate = Policy::make("rate", Strategy::kGcra, "10/second").value();
  EXPECT_EQ(f.limiter.acquire(rate, "k").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f.limiter.renew(rate, "k", "id").status().code(), absl::StatusCode::kInvalidArgument);
  const Policy p = slots();
  ASSERT_TRUE(f.limiter.acquire(p, "user", 1, "dup")->held());
  EXPECT_EQ(f.limiter.acquire(p, "user", 1, "dup").status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(f.limiter.acquire(p, "user", 1, std::string(kMaxReservationId + 1, 'x')).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Envoy's two calls of one request carry one id: the first takes the lease, the second releases
// it whatever its hits_addend says; the second sent again frees nothing more.
TEST(Leases, ReserveOrSettleTakesThenReleases) {
  Fixture f;
  const Policy p = slots("1 concurrent for 1 minute");
  const auto call = [&](const char* id, std::int64_t addend) {
    Limiter::Request r{&p, "user", addend, Effect::kReserveOrSettle};
    r.reservation = id;
    std::vector<absl::StatusOr<Decision>> out(1);
    f.limiter.decide_group(std::span<const Limiter::Request>(&r, 1), f.clock->now(), out);
    return out[0];
  };
  EXPECT_TRUE(call("req-1", 1)->allowed);
  EXPECT_FALSE(call("req-2", 1)->allowed);
  EXPECT_EQ(f.limiter.stats(p, "user")->remaining, 0);
  const auto done = call("req-1", 1);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->remaining, 1);
  const auto again = call("req-1", 1);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(f.limiter.stats(p, "user")->remaining, 1);
  EXPECT_TRUE(call("req-2", 1)->allowed);
}

TEST(Leases, MemoryMatchesTheModel) {
  for (const char* limits : {"3 concurrent for 10 seconds", "1 concurrent for 1 second", "5 concurrent for 2 ms"}) {
    for (std::uint32_t seed = 1; seed <= 4; ++seed) {
      Fixture f;
      testing::check_leases_against_model(f.limiter, *f.clock, slots(limits), "k", seed, 400);
      if (HasFailure()) return;
    }
  }
}

}  // namespace
}  // namespace floodgate
