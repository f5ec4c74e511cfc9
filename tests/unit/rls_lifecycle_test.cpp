// The rate-limit service over time: what accumulates over time stays bounded (policies of
// limit overrides, rule versions of reloads, counters), and a call whose caller has gone is not
// charged.
#include <atomic>
#include <future>
#include <limits>
#include <map>

#include <gtest/gtest.h>

#include "floodgate/memory_storage.hpp"
#include <spdlog/spdlog.h>

#include "server/api/inline_policies.hpp"
#include "server/common/library_log.hpp"
#include "server/rls/service.hpp"
#include "server/rls/rules.hpp"

namespace floodgate::server {
namespace {

using Response = rlsv3::RateLimitResponse;
constexpr Micros kStart = 1'700'000'040 * kMicrosPerSecond + 10 * kMicrosPerSecond;

std::shared_ptr<const RlsConfig> rules(const std::string& yaml) {
  auto c = std::make_shared<RlsConfig>();
  EXPECT_TRUE(parse_rls_file(yaml, "test.yaml", *c).ok());
  return c;
}

rlsv3::RateLimitRequest request(const std::string& key, const std::string& value) {
  rlsv3::RateLimitRequest r;
  r.set_domain("d");
  auto* e = r.add_descriptors()->add_entries();
  e->set_key(key);
  e->set_value(value);
  return r;
}

class RlsLifecycle : public ::testing::Test {
 protected:
  void start(const std::string& yaml, RlsSettings limits = {}) {
    MemoryStorageOptions o;
    o.max_request_policies = 64;
    storage_ = std::make_shared<MemoryStorage>(o);
    service_ = std::make_unique<RlsService>(storage_, clock_, limits);
    service_->reload(rules(yaml));
  }
  Response call(const rlsv3::RateLimitRequest& r) {
    Response out;
    const grpc::Status s = service_->should_rate_limit(r, out);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return out;
  }
  std::uint32_t remaining(const rlsv3::RateLimitRequest& r) { return call(r).statuses(0).limit_remaining(); }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(kStart);
  std::shared_ptr<MemoryStorage> storage_;
  std::unique_ptr<RlsService> service_;
};

constexpr const char* kTwoRules =
    "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 10}\n"
    "  - key: b\n    rate_limit: {unit: minute, requests_per_unit: 20}\n";

TEST_F(RlsLifecycle, DistinctOverridesKeepThePolicyTablesUnderTheBound) {
  start(kTwoRules);
  const auto steady = request("a", "user");
  std::size_t most = 0;
  for (std::uint32_t i = 0; i < 20'000; ++i) {
    auto r = request("b", "user");
    r.mutable_descriptors(0)->mutable_limit()->set_requests_per_unit(1000 + i);
    r.mutable_descriptors(0)->mutable_limit()->set_unit(::envoy::type::v3::HOUR);
    ASSERT_EQ(call(r).overall_code(), Response::OK);
    if (i % 2000 == 0) {
      ASSERT_EQ(call(steady).overall_code(), Response::OK);  // 10 hits in all
    }
    clock_->advance(kMicrosPerSecond / 1000);
    most = std::max(most, storage_->policies());
  }
  // Overrides of one rule that differ only in their amount share one state (Policy::state_id):
  // one table for them all, and one for the steady rule.
  EXPECT_LE(most, 2u);
  EXPECT_EQ(storage_->policies_evicted(), 0u);
  EXPECT_EQ(call(steady).overall_code(), Response::OVER_LIMIT);  // the steady rule kept its count
}

TEST_F(RlsLifecycle, AReloadKeepsUnchangedRulesAndFreesWhatChangedRulesHeld) {
  start(kTwoRules);
  const auto a = request("a", "user");
  const auto b = request("b", "user");
  for (int i = 0; i < 3; ++i) call(a), call(b);
  service_->reload(rules(std::string(kTwoRules).replace(std::string(kTwoRules).find("20"), 2, "30")));
  EXPECT_EQ(remaining(a), 6u);   // unchanged: 10 − 4, its count kept
  EXPECT_EQ(remaining(b), 26u);  // raised to 30: its usage kept, 30 − 4 (docs/envoy.md)
  EXPECT_EQ(storage_->policies(), 2u);  // b's amount changed, not its state: one table each
  EXPECT_EQ(storage_->policies_freed(), 0u);
  // 80 more reloads, each changing b's limit, a call per rule after each: the old versions go.
  for (int n = 0; n < 80; ++n) {
    clock_->advance(10 * kMicrosPerSecond);
    service_->reload(rules(std::string(kTwoRules).replace(std::string(kTwoRules).find("20"), 2, std::to_string(40 + n))));
    call(a), call(b);
  }
  clock_->advance(10 * 60 * kMicrosPerSecond);
  call(a), call(b);
  storage_->collect(clock_->now());
  EXPECT_EQ(storage_->policies(), 2u);
}

TEST_F(RlsLifecycle, RuleCountersSaturateInsteadOfWrapping) {
  start("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n");
  auto r = request("k", "v");
  r.mutable_descriptors(0)->mutable_hits_addend()->set_value(std::uint64_t{1} << 53);
  for (int i = 0; i < 2048; ++i) ASSERT_EQ(call(r).overall_code(), Response::OVER_LIMIT);
  const std::size_t slot = service_->metrics().slot("d", "k").value();
  constexpr auto kMax = std::numeric_limits<std::uint64_t>::max();
  EXPECT_EQ(service_->metrics().get(slot, RlsMetrics::kTotalHits), kMax);  // 2048 · 2^53 = 2^64
  EXPECT_EQ(service_->metrics().get(slot, RlsMetrics::kOverLimit), kMax);
}

void call_after_the_caller_has_gone(RlsService& service, const rlsv3::RateLimitRequest& r) {
  Response out;
  std::promise<grpc::Status> answered;
  service.should_rate_limit_async(r, out, [&](grpc::Status s) { answered.set_value(std::move(s)); },
                                  [] { return true; });
  const grpc::Status s = answered.get_future().get();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_NE(s.error_message().find("not charged"), std::string::npos);
}

TEST_F(RlsLifecycle, ACallWhoseCallerHasGoneIsNotDecidedNorCharged) {
  for (const bool batching : {false, true}) {
    RlsSettings limits;
    limits.batching = batching;
    start(kTwoRules, limits);
    const auto a = request("a", "user");
    for (int i = 0; i < 3; ++i) call_after_the_caller_has_gone(*service_, a);
    EXPECT_EQ(service_->metrics().abandoned_calls(), 3u);
    EXPECT_EQ(remaining(a), 9u) << "batching " << batching;  // only this call was charged
  }
}

std::map<std::string, std::string> headers_of(const Response& r) {
  std::map<std::string, std::string> h;
  for (const auto& kv : r.response_headers_to_add()) h[kv.key()] = kv.value();
  return h;
}

TEST_F(RlsLifecycle, ABlockListRuleAnswersWithHeaders) {
  RlsSettings limits;
  limits.response_headers = true;
  start("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 0}\n", limits);
  const Response over = call(request("k", "v"));
  ASSERT_EQ(over.overall_code(), Response::OVER_LIMIT);
  auto h = headers_of(over);  // before: none at all
  EXPECT_EQ(h["X-RateLimit-Limit"], "0");
  EXPECT_EQ(h["X-RateLimit-Remaining"], "0");
  EXPECT_EQ(h["X-RateLimit-Reset"], "50");  // the minute's window ends in 50 s
  EXPECT_EQ(h["Retry-After"], "50");
  EXPECT_EQ(h["RateLimit"], "\"d/k\";r=0;t=50");
  EXPECT_EQ(h["RateLimit-Policy"], "\"d/k\";q=0;w=60");
}

TEST_F(RlsLifecycle, HitsAboveTheLimitAnswerWithAResetAndRetryAfter) {
  RlsSettings limits;
  limits.response_headers = true;
  start("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 2}\n", limits);
  auto r = request("k", "v");
  r.set_hits_addend(5);
  const Response over = call(r);
  ASSERT_EQ(over.overall_code(), Response::OVER_LIMIT);
  auto h = headers_of(over);  // before: Reset 0 and no Retry-After
  EXPECT_EQ(h["X-RateLimit-Reset"], "50");
  EXPECT_EQ(h["Retry-After"], "50");
  EXPECT_EQ(h["X-RateLimit-Limit"], "2");
}

TEST_F(RlsLifecycle, AReloadDropsTheSeriesOfRemovedRules) {
  start(kTwoRules);
  call(request("a", "user")), call(request("b", "user"));
  service_->reload(rules("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 10}\n"));
  PromText out;
  service_->metrics().render(out);
  const std::string text = out.take();
  EXPECT_NE(text.find("rule=\"a\""), std::string::npos);
  EXPECT_EQ(text.find("rule=\"b\""), std::string::npos) << text;
}

TEST_F(RlsLifecycle, DetailedValuesNeverTakeTheSeriesOfRules) {
  const std::string detailed = "domain: d\ndescriptors:\n  - key: k\n    detailed_metric: true\n"
                               "    rate_limit: {unit: minute, requests_per_unit: 10}\n";
  start(detailed);
  for (int i = 0; i < 3000; ++i) call(request("k", std::to_string(i)));
  EXPECT_GT(service_->metrics().detailed_overflow(), 0u);  // the detailed bound was hit, and counted
  // A rule file for a new domain still gets its series (before: none, the shared cap was spent).
  auto c = std::make_shared<RlsConfig>();
  ASSERT_TRUE(parse_rls_file(detailed, "a.yaml", *c).ok());
  ASSERT_TRUE(parse_rls_file("domain: e\ndescriptors:\n  - key: x\n    rate_limit: {unit: minute, requests_per_unit: 1}\n",
                             "b.yaml", *c).ok());
  service_->reload(c);
  auto r = request("x", "1");
  r.set_domain("e");
  call(r);
  const std::size_t slot = service_->metrics().slot("e", "x").value();
  EXPECT_EQ(service_->metrics().get(slot, RlsMetrics::kTotalHits), 1u);
}

TEST(LibraryLog, LinesPastTheRateAreSuppressedAndCounted) {
  route_library_logs(10);
  const std::uint64_t before = library_log_suppressed();
  int written = 0;
  for (int i = 0; i < 200; ++i) written += library_log(spdlog::level::err, "libprotobuf", "String field contains invalid UTF-8") ? 1 : 0;
  EXPECT_LE(written, 20);  // 10 a second (the loop may straddle a second)
  EXPECT_GE(library_log_suppressed() - before, 180u);
  // protobuf's own messages go the same way.
  rlsv3::RateLimitRequest r;
  const std::uint64_t mid = library_log_suppressed();
  for (int i = 0; i < 50; ++i) EXPECT_FALSE(r.ParseFromString(std::string("\x0a\x03\xed\xa0\x80", 5)));
  EXPECT_GE(library_log_suppressed() - mid, 30u);
}

TEST(InlinePolicies, DistinctInlineLimitsAreNeverRefusedAndStayBounded) {
  InlinePolicies policies;
  for (int i = 1; i <= 5000; ++i) {
    auto p = policies.get(std::to_string(i) + "/minute", "fixed-window", 0, 16);
    ASSERT_TRUE(p.ok()) << p.status();  // before: ResourceExhausted past the bound, until restart
    EXPECT_EQ((*p)->limits().front().amount, i);
  }
  EXPECT_LE(policies.size(), 16u);
  auto again = policies.get("5000/minute", "fixed-window", 0, 16);
  EXPECT_EQ(again->get(), policies.get("5000/minute", "fixed-window", 0, 16)->get());  // cached
}

}  // namespace
}  // namespace floodgate::server
