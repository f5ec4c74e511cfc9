#include "floodgate/limiter.hpp"

#include <gtest/gtest.h>

#include "floodgate/memory_storage.hpp"

namespace floodgate {
namespace {

constexpr Micros kSec = kMicrosPerSecond;

class LimiterTest : public ::testing::Test {
 protected:
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>(1'700'000'000 * kSec);
  Limiter limiter{std::make_shared<MemoryStorage>(), clock};
  Policy api = Policy::make("api", Strategy::kSlidingWindowCounter, "5/minute").value();
};

TEST_F(LimiterTest, HitTestStatsClear) {
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(limiter.hit(api, "u")->allowed);
  EXPECT_FALSE(limiter.hit(api, "u")->allowed);
  EXPECT_FALSE(limiter.test(api, "u")->allowed);
  const Decision stats = limiter.stats(api, "u").value();
  EXPECT_TRUE(stats.allowed);
  EXPECT_EQ(stats.remaining, 0);
  EXPECT_GT(stats.reset_after, 0);
  ASSERT_TRUE(limiter.clear(api, "u").ok());
  EXPECT_EQ(limiter.stats(api, "u")->remaining, 5);
}

TEST_F(LimiterTest, UsesTheInjectedClock) {
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(limiter.hit(api, "u")->allowed);
  clock->advance(120 * kSec);  // two buckets later: the count is gone
  EXPECT_TRUE(limiter.hit(api, "u")->allowed);
}

TEST_F(LimiterTest, RejectsBadCost) {
  const auto negative = limiter.hit(api, "u", -1);
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(negative.status().message()).find("-1"), std::string::npos);
  EXPECT_FALSE(limiter.hit(api, "u", kMaxAmount + 1).ok());
  EXPECT_FALSE(limiter.test(api, "u", -5).ok());
  EXPECT_EQ(limiter.stats(api, "u")->remaining, 5);  // nothing was consumed by the bad calls
}

}  // namespace
}  // namespace floodgate

namespace floodgate {
namespace {

// A storage that fails every call with a given status.
class FailingStorage final : public Storage {
 public:
  explicit FailingStorage(absl::Status s) : status_(std::move(s)) {}
  absl::StatusOr<Decision> apply(const Policy&, std::string_view, std::int64_t, Effect,
                                 Micros) override {
    return status_;
  }
  absl::Status clear(const Policy&, std::string_view) override { return status_; }

 private:
  absl::Status status_;
};

TEST(LimiterFailure, StorageErrorsDecideByTheFailModeAndAreMarkedDegraded) {
  Limiter limiter(std::make_shared<FailingStorage>(absl::UnavailableError("redis down")));
  PolicyOptions closed;
  closed.fail = FailMode::kClosed;
  const Policy open_policy = Policy::make("open", Strategy::kGcra, "5/second").value();
  const Policy closed_policy = Policy::make("closed", Strategy::kGcra, "5/second", closed).value();

  const Decision o = limiter.hit(open_policy, "k").value();
  EXPECT_TRUE(o.allowed);
  EXPECT_TRUE(o.degraded);
  const Decision c = limiter.hit(closed_policy, "k").value();
  EXPECT_FALSE(c.allowed);
  EXPECT_TRUE(c.degraded);
  EXPECT_EQ(c.retry_after, kMicrosPerSecond);
  EXPECT_TRUE(limiter.test(closed_policy, "k")->degraded);
  EXPECT_EQ(limiter.degraded_count(), 3u);
  EXPECT_FALSE(limiter.clear(open_policy, "k").ok());  // clear reports the error itself
}

TEST(LimiterFailure, InvalidRequestsAreErrorsNotDegradedDecisions) {
  Limiter limiter(std::make_shared<FailingStorage>(absl::InvalidArgumentError("bad key")));
  const Policy p = Policy::make("p", Strategy::kGcra, "5/second").value();
  EXPECT_EQ(limiter.hit(p, "k").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(limiter.degraded_count(), 0u);
}

TEST(OpenStorage, UrlsAndOptions) {
  EXPECT_TRUE(open_storage("memory").ok());
  EXPECT_TRUE(open_storage("memory://?max_keys=100&shards=4").ok());
  const auto bad_option = open_storage("memory://?max_key=10");
  ASSERT_FALSE(bad_option.ok());
  EXPECT_NE(std::string(bad_option.status().message()).find("\"max_key\""), std::string::npos);
  EXPECT_FALSE(open_storage("memory://?max_keys=0").ok());
  EXPECT_FALSE(open_storage("memory://?max_keys").ok());
  const auto unknown = open_storage("carrier-pigeon://coop");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(std::string(unknown.status().message()).find("unknown storage"), std::string::npos);
  EXPECT_FALSE(open_storage("localhost:6379").ok());
}

}  // namespace
}  // namespace floodgate
