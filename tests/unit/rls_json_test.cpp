// envoyproxy/ratelimit's POST /json: the JSON form of a RateLimitRequest, decided by the same
// RlsService as gRPC, answered 200 / 429 with the JSON form of the response, 400 for bad input;
// and routed by the HTTP service. Before: /json was 404.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "floodgate/memory_storage.hpp"
#include "server/config/config.hpp"
#include "server/rls/service.hpp"
#include "server/rls/rules.hpp"
#include "server/rls/json.hpp"
#include "server/api/service.hpp"

namespace floodgate::server {
namespace {

constexpr Micros kStart = 1'700'000'040 * kMicrosPerSecond + 10 * kMicrosPerSecond;
constexpr const char* kRules =
    "domain: dummy\ndescriptors:\n  - key: perday\n    rate_limit: {unit: day, requests_per_unit: 2}\n";

class RlsJson : public ::testing::Test {
 protected:
  RlsJson() {
    auto c = std::make_shared<RlsConfig>();
    EXPECT_TRUE(parse_rls_file(kRules, "test.yaml", *c).ok());
    rls_.reload(c);
  }
  Response post(std::string_view body) {
    Response res;
    answer_rls_json(rls_, body, res);
    return res;
  }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(kStart);
  std::shared_ptr<MemoryStorage> storage_ = std::make_shared<MemoryStorage>();
  RlsService rls_{storage_, clock_, RlsSettings{}};
};

constexpr const char* kPerDay = R"({"domain": "dummy", "descriptors": [{"entries": [{"key": "perday"}]}]})";

TEST_F(RlsJson, AnswersTheResponseInJsonWith200ThenOverLimitWith429) {
  Response first = post(kPerDay);
  EXPECT_EQ(first.result_int(), 200);
  EXPECT_EQ(first[http::field::content_type], "application/json");
  const auto ok = boost::json::parse(first.body()).as_object();
  EXPECT_EQ(ok.at("overallCode"), "OK");
  const auto& status = ok.at("statuses").as_array().at(0).as_object();
  EXPECT_EQ(status.at("code"), "OK");
  EXPECT_EQ(status.at("currentLimit").at("requestsPerUnit"), 2);
  EXPECT_EQ(status.at("currentLimit").at("unit"), "DAY");
  EXPECT_EQ(status.at("limitRemaining"), 1);
  EXPECT_EQ(post(kPerDay).result_int(), 200);
  const Response over = post(kPerDay);
  EXPECT_EQ(over.result_int(), 429);
  EXPECT_EQ(boost::json::parse(over.body()).at("overallCode"), "OVER_LIMIT");
  // The same counter as the gRPC call: it is over limit too.
  rlsv3::RateLimitRequest r;
  r.set_domain("dummy");
  r.add_descriptors()->add_entries()->set_key("perday");
  rlsv3::RateLimitResponse via_grpc;
  ASSERT_TRUE(rls_.should_rate_limit(r, via_grpc).ok());
  EXPECT_EQ(via_grpc.overall_code(), rlsv3::RateLimitResponse::OVER_LIMIT);
}

TEST_F(RlsJson, ProtoFieldNamesAndHitsAddendAreAccepted) {
  const Response res = post(R"({"domain": "dummy", "hits_addend": 2,
                                "descriptors": [{"entries": [{"key": "perday", "value": ""}]}]})");
  EXPECT_EQ(res.result_int(), 200);
  EXPECT_EQ(boost::json::parse(res.body()).at("statuses").at(0).as_object().count("limitRemaining"), 0u);  // 0: left out
  EXPECT_EQ(post(kPerDay).result_int(), 429);
}

TEST_F(RlsJson, BadInputIsAnswered400WithTheReason) {
  for (const char* body : {"", "not json", "{\"domain\": 5}", "{\"domain\": \"dummy\", \"nope\": 1}", "[]"}) {
    const Response res = post(body);
    EXPECT_EQ(res.result_int(), 400) << body;
    EXPECT_NE(res.body().find("not a RateLimitRequest in JSON"), std::string::npos) << res.body();
  }
  const Response empty = post(R"({"domain": "dummy"})");  // no descriptors: refused as by gRPC
  EXPECT_EQ(empty.result_int(), 400);
  EXPECT_NE(empty.body().find("descriptor"), std::string::npos) << empty.body();
}

TEST_F(RlsJson, TheHttpServiceRoutesPostJsonToIt) {
  auto parsed = parse_config("storage: memory\npolicies:\n  - {name: api, limit: 1/hour}\n", "t.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  Service service(std::make_shared<const Config>(*parsed), storage_, clock_);
  const auto call = [&](http::verb verb) {
    Request req{verb, "/json", 11};
    req.body() = kPerDay;
    req.prepare_payload();
    Response res;
    service.handle(req, res);
    return res;
  };
  EXPECT_EQ(call(http::verb::post).result_int(), 404);  // no rules: nothing answers /json
  service.set_json_rls([this](std::string_view body, Response& res) { answer_rls_json(rls_, body, res); });
  EXPECT_EQ(call(http::verb::post).result_int(), 200);
  EXPECT_EQ(call(http::verb::get).result_int(), 405);
}

}  // namespace
}  // namespace floodgate::server
