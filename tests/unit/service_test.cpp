// The HTTP service in process, without sockets: routes, request parsing, responses, and that every
// decision (and every degraded one) is counted by the one pipeline.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <fmt/format.h>

#include "floodgate/memory_storage.hpp"
#include "server/api/requests.hpp"
#include "server/api/service.hpp"
#include "support/switchable_storage.hpp"

namespace floodgate::server {
namespace {

constexpr Micros kSec = kMicrosPerSecond;
constexpr const char* kAdminToken = "service-test-admin-token";

using floodgate::testing::SwitchableStorage;

std::shared_ptr<const Config> config(const std::string& policies) {
  auto c = parse_config("storage: memory\ninline_limits: true\npolicies:\n" + policies, "test.yaml");
  EXPECT_TRUE(c.ok()) << c.status();
  c->admin.token = kAdminToken;
  return std::make_shared<const Config>(*c);
}

// `service`'s answer to one request; `admin`: with the admin token.
Response answer(Service& service, http::verb verb, std::string target, std::string body = "", bool admin = false) {
  Request req{verb, target, 11};
  if (admin) req.set(http::field::authorization, std::string("Bearer ") + kAdminToken);
  req.body() = std::move(body);
  req.prepare_payload();
  Response res;
  service.handle(req, res);
  return res;
}

class ServiceTest : public ::testing::Test {
 protected:
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>(1'700'000'000 * kSec);
  std::shared_ptr<SwitchableStorage> storage = std::make_shared<SwitchableStorage>();
  Service service{config("  - {name: api, strategy: fixed-window, limit: 2/hour}\n"
                         "  - {name: login, strategy: gcra, limit: 1/hour, fail: closed}\n"
                         "  - {name: web, strategy: fixed-window, limit: 1/hour, key: {query: user}}\n"),
                  storage, clock};

  Response call(http::verb verb, std::string target, std::string body = "") {
    return answer(service, verb, std::move(target), std::move(body), true);  // admin endpoints need the token
  }
  Response hit(std::string_view policy, std::string_view key) {
    return call(http::verb::post, "/v1/hit",
                boost::json::serialize(boost::json::object{{"policy", policy}, {"key", key}}));
  }
  std::string metrics() { return call(http::verb::get, "/metrics").body(); }
  static std::uint64_t metric(const std::string& text, std::string_view line_start) {
    const std::size_t at = text.find("\n" + std::string(line_start) + " ");
    EXPECT_NE(at, std::string::npos) << line_start;
    return at == std::string::npos ? 0 : std::stoull(text.substr(at + line_start.size() + 2));
  }
};

TEST_F(ServiceTest, RoutesAnswerUnknownPathsWrongMethodsAndHead) {
  EXPECT_EQ(call(http::verb::get, "/nope").result_int(), 404);
  const Response wrong = call(http::verb::get, "/v1/hit");
  EXPECT_EQ(wrong.result_int(), 405);
  EXPECT_EQ(wrong[http::field::allow], "POST");
  const Response head = call(http::verb::head, "/healthz");
  EXPECT_EQ(head.result_int(), 200);
  EXPECT_TRUE(head.body().empty());
  EXPECT_EQ(head[http::field::content_length], "3");  // that of "ok\n"
  EXPECT_EQ(call(http::verb::post, "/healthz").result_int(), 405);
  EXPECT_EQ(call(http::verb::get, "/healthcheck").result_int(), 200);  // envoyproxy/ratelimit's health path
}

// Found by http_fuzz: HEAD on an unknown path or a POST route answered its error with a body, which
// a client reading a HEAD answer leaves in the stream as the start of the next response. Every
// HEAD answer has no body; its Content-Length is that of the GET's.
TEST_F(ServiceTest, HeadAnswersNeverHaveABody) {
  const Response get = call(http::verb::get, "/nope");
  for (const char* target : {"/nope", "/v1/hit", "/v1/stats?policy=nope&key=k", "/v1/auth?policy=web"}) {
    const Response head = call(http::verb::head, target);
    EXPECT_GE(head.result_int(), 200) << target;
    EXPECT_TRUE(head.body().empty()) << target << ": " << head.body();
  }
  const Response head = call(http::verb::head, "/nope");
  EXPECT_EQ(head.result_int(), 404);
  EXPECT_EQ(head[http::field::content_length], std::to_string(get.body().size()));
  const Response denied = call(http::verb::head, "/v1/auth?policy=web&user=u");  // 1/hour: 204 then 429
  EXPECT_EQ(denied.result_int(), 204);
  const Response again = call(http::verb::head, "/v1/auth?policy=web&user=u");
  EXPECT_EQ(again.result_int(), 429);
  EXPECT_TRUE(again.body().empty());
}

// IMF-fixdate (RFC 9110 §5.6.7), whose example is this instant; and across a leap day and a new year.
TEST(HttpDate, IsImfFixdate) {
  EXPECT_EQ(format_http_date(784111777), "Sun, 06 Nov 1994 08:49:37 GMT");
  EXPECT_EQ(format_http_date(951782400), "Tue, 29 Feb 2000 00:00:00 GMT");
  EXPECT_EQ(format_http_date(1798761599), "Thu, 31 Dec 2026 23:59:59 GMT");
  EXPECT_EQ(http_date_now().size(), 29u);
}

// RFC 9110 §8.6: a server must not send Content-Length in a 204 (Beast's prepare_payload adds
// "Content-Length: 0" there). A 429 without a body says Content-Length: 0.
TEST_F(ServiceTest, NoContentAnswersCarryNoContentLength) {
  const auto no_length = [](const Response& r) {
    return r.find(http::field::content_length) == r.end() && r.find(http::field::transfer_encoding) == r.end();
  };
  const Response allowed = call(http::verb::get, "/v1/auth?policy=web&user=v");
  EXPECT_EQ(allowed.result_int(), 204);
  EXPECT_TRUE(no_length(allowed));
  EXPECT_TRUE(std::string(allowed["RateLimit"]).starts_with("\"web\";r=0;t=")) << allowed["RateLimit"];
  const Response denied = call(http::verb::get, "/v1/auth?policy=web&user=v");
  EXPECT_EQ(denied.result_int(), 429);
  EXPECT_EQ(denied[http::field::content_length], "0");
  const Response head = call(http::verb::head, "/v1/auth?policy=web&user=w");
  EXPECT_EQ(head.result_int(), 204);
  EXPECT_TRUE(no_length(head));
  const Response cleared = call(http::verb::delete_, "/v1/keys?policy=web&key=v");
  EXPECT_EQ(cleared.result_int(), 204);
  EXPECT_TRUE(no_length(cleared));
  EXPECT_EQ(call(http::verb::get, "/v1/auth?policy=web&user=v").result_int(), 204);  // cleared
}

TEST_F(ServiceTest, HitAnswersJsonAndHeadersThenTooManyRequests) {
  for (int i = 0; i < 2; ++i) EXPECT_EQ(hit("api", "u").result_int(), 200);
  const Response denied = hit("api", "u");
  EXPECT_EQ(denied.result_int(), 429);
  const auto body = boost::json::parse(denied.body()).as_object();
  EXPECT_FALSE(body.at("allowed").as_bool());
  EXPECT_EQ(body.at("limit").as_int64(), 2);
  EXPECT_EQ(body.at("policy").as_string(), "api");
  EXPECT_FALSE(denied[http::field::retry_after].empty());
}

TEST_F(ServiceTest, RequestParsingGivesTheClientsMessage) {
  EXPECT_EQ(parse_decision_body("[]").status().message(), "the body must be a JSON object");
  // Where the key comes from: the body, not the policy's key header (GET /v1/auth's).
  for (const char* body : {R"({"key": ""})", R"({"policy": "api"})", R"({"key": 7})"}) {
    EXPECT_EQ(parse_decision_body(body).status().message(),
              "\"key\" must be a non-empty string: the JSON endpoints take the key from the body's \"key\" "
              "(a policy's key: {header|query: …} is read by GET /v1/auth only)") << body;
  }
  EXPECT_EQ(parse_decision_body(R"({"key": "k", "cost": -1, "policy": "a"})").status().message(),
            "\"cost\" must be a whole number from 0 to 2^53");
  EXPECT_NE(parse_decision_body(R"({"key": "k"})").status().message().find("inline \"limit\""),
            absl::string_view::npos);
  const auto inl = parse_decision_body(R"({"key": "k", "limit": "5/minute", "strategy": "token-bucket", "burst": 9})");
  ASSERT_TRUE(inl.ok());
  EXPECT_EQ(inl->limit, "5/minute");
  EXPECT_EQ(inl->burst, 9);
  EXPECT_EQ(query_param("/v1/auth?policy=a&key=a%20b+c", "key"), "a b c");
  EXPECT_EQ(query_param("/v1/auth?policy=a", "key"), std::nullopt);
}

TEST_F(ServiceTest, EveryEndpointTakesKeysOfTheSameLength) {
  const std::string longest(kMaxKeyBytes, 'k');
  const std::string longer(kMaxKeyBytes + 1, 'k');
  EXPECT_EQ(hit("api", longest).result_int(), 200);
  EXPECT_EQ(hit("api", longer).result_int(), 400);
  EXPECT_EQ(call(http::verb::get, "/v1/stats?policy=api&key=" + longest).result_int(), 200);
  EXPECT_EQ(call(http::verb::get, "/v1/stats?policy=api&key=" + longer).result_int(), 400);
  EXPECT_EQ(call(http::verb::delete_, "/v1/keys?policy=api&key=" + longer).result_int(), 400);
}

// A bucket's quota is its burst: the body's limit is 50, not the rate's 10, so remaining (49) never
// exceeds it (the headers said the same already; the body said limit 10, remaining 49).
TEST(ServiceBodies, RemainingNeverExceedsTheLimitWithABurst) {
  Service service(config("  - {name: b, strategy: token-bucket, limit: 10/minute, burst: 50}\n"),
                  std::make_shared<MemoryStorage>(), std::make_shared<ManualClock>(1'700'000'000 * kSec));
  const Response res = answer(service, http::verb::post, "/v1/hit", R"({"policy": "b", "key": "k"})");
  ASSERT_EQ(res.result_int(), 200) << res.body();
  const boost::json::value v = boost::json::parse(res.body());
  EXPECT_EQ(v.at("limit").as_int64(), 50);
  EXPECT_EQ(v.at("remaining").as_int64(), 49);
  EXPECT_EQ(res["X-RateLimit-Limit"], "50");
}

// A billing month in Europe/Berlin from the configuration and one given inline: the headers name
// the nominal 30-day window and reset at the real period start, an hour away (Mar 31 00:00 +02).
TEST(ServiceBodies, CalendarLimitsResetAtTheRealPeriodStart) {
  Service service(config("  - {name: bill, strategy: fixed-window, limit: 2 per calendar month in Europe/Berlin anchored 31}\n"),
                  std::make_shared<MemoryStorage>(),
                  std::make_shared<ManualClock>(1'806'440'400 * kSec));  // 2027-03-30T21:00:00Z
  const auto post = [&](const std::string& body) { return answer(service, http::verb::post, "/v1/hit", body); };
  for (const std::string body : {R"({"policy": "bill", "key": "k"})",
                                 R"({"limit": "2 per calendar month in Europe/Berlin anchored 31", "strategy": "fixed-window", "key": "k"})"}) {
    const Response first = post(body);
    ASSERT_EQ(first.result_int(), 200) << first.body();
    EXPECT_EQ(first["X-RateLimit-Reset"], "3600") << body;
    EXPECT_NE(std::string(first["RateLimit-Policy"]).find(";q=2;w=2592000"), std::string::npos) << first["RateLimit-Policy"];
    EXPECT_EQ(boost::json::parse(first.body()).at("reset_after").as_double(), 3600.0);
    EXPECT_EQ(post(body).result_int(), 200);
    const Response denied = post(body);
    EXPECT_EQ(denied.result_int(), 429) << body;
    EXPECT_EQ(denied[http::field::retry_after], "3600");
  }
  const Response bad = post(R"({"limit": "2 per calendar month in Europe/Nowhere", "strategy": "fixed-window", "key": "k"})");
  EXPECT_EQ(bad.result_int(), 400);
  EXPECT_NE(bad.body().find("unknown time zone"), std::string::npos) << bad.body();
}

// Keys reach the live view from query strings (any bytes, percent-encoded) and are cut to
// TopKeys::kMaxKeyBytes, possibly inside a character: the JSON stays valid UTF-8 either way.
TEST_F(ServiceTest, TheLiveViewIsValidUtf8JsonWhateverBytesAKeyHas) {
  for (int i = 0; i < 2; ++i) (void)call(http::verb::get, "/v1/auth?policy=web&user=caf%C3%FF%E2%82");
  const std::string cut = std::string(TopKeys::kMaxKeyBytes - 1, 'a') + "\xC3\xA9";  // é across the cut
  for (int i = 0; i < 3; ++i) (void)hit("api", cut);
  const Response live = call(http::verb::get, "/v1/live");
  ASSERT_EQ(live.result_int(), 200);
  boost::system::error_code ec;
  const boost::json::value v = boost::json::parse(live.body(), ec);  // validates UTF-8
  ASSERT_FALSE(ec) << ec.message() << "\n" << live.body();
  const auto& policies = v.at("policies").as_array();
  const auto& api_top = policies.at(0).at("top_denied").as_array();
  ASSERT_EQ(api_top.size(), 1u);
  EXPECT_EQ(api_top[0].at("key").as_string(), std::string(TopKeys::kMaxKeyBytes - 1, 'a') + "\xEF\xBF\xBD");
  const auto& web_top = policies.at(2).at("top_denied").as_array();
  ASSERT_EQ(web_top.size(), 1u);
  EXPECT_EQ(web_top[0].at("key").as_string(), "caf\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a byte each
}

// Issue: the live view's degraded total counted only Limiter::hit calls, while the HTTP path
// decided around it. Now every degraded decision is counted by the one pipeline.
TEST_F(ServiceTest, DegradedTotalsAgreeBetweenTheLiveViewThePoliciesAndMetrics) {
  (void)hit("api", "a");
  storage->failure = absl::UnavailableError("storage down");
  int denied = 0;
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(hit("api", "k" + std::to_string(i)).result_int(), 200);  // fail open
    denied += hit("login", "k").result_int() == 503 ? 1 : 0;          // fail closed: an outage
  }
  EXPECT_EQ(denied, 7);
  const auto live = boost::json::parse(call(http::verb::get, "/v1/live").body());
  const std::uint64_t total = live.at("storage").at("degraded_total").to_number<std::uint64_t>();
  std::uint64_t per_policy = 0;
  for (const auto& p : live.at("policies").as_array()) per_policy += p.at("totals").at("degraded").to_number<std::uint64_t>();
  const std::string text = metrics();
  EXPECT_EQ(total, 14u);
  EXPECT_EQ(per_policy, total);
  EXPECT_EQ(metric(text, "floodgate_storage_degraded_total"), total);
  EXPECT_EQ(metric(text, "floodgate_decisions_total{policy=\"api\",result=\"degraded\"}") +
                metric(text, "floodgate_decisions_total{policy=\"login\",result=\"degraded\"}"),
            total);
  EXPECT_EQ(call(http::verb::get, "/readyz").result_int(), 503);  // a fail-closed policy's store is down
}

// A fail-closed policy whose store is down does not blame the tenant: 503 with Retry-After and a
// body saying the storage is unavailable, where a real denial is 429 (and counted among the 5xx
// answers); `outage_status: 429` answers outages as denials.
TEST_F(ServiceTest, AnOutageOfAFailClosedPolicyIs503NotATenantDenial) {
  ASSERT_EQ(hit("login", "k").result_int(), 200);
  const Response denied = hit("login", "k");  // 1/hour: a real denial
  EXPECT_EQ(denied.result_int(), 429);
  EXPECT_EQ(denied.body().find("\"error\""), std::string::npos) << denied.body();
  storage->failure = absl::UnavailableError("storage down");
  const Response outage = hit("login", "other");
  EXPECT_EQ(outage.result_int(), 503);
  EXPECT_EQ(outage["Retry-After"], "1");
  EXPECT_EQ(outage["X-Floodgate-Outage"], "storage-unavailable");
  EXPECT_EQ(denied.count("X-Floodgate-Outage"), 0u);
  const auto body = boost::json::parse(outage.body());
  EXPECT_EQ(body.at("allowed").as_bool(), false);
  EXPECT_EQ(body.at("degraded").as_bool(), true);
  EXPECT_NE(std::string(body.at("error").as_string().c_str()).find("storage is unavailable"), std::string::npos) << outage.body();
  EXPECT_EQ(hit("api", "k").result_int(), 200) << "a fail-open policy still lets requests through";
  EXPECT_EQ(metric(metrics(), "floodgate_http_responses_total{code=\"5xx\"}"), 1u);

  auto c = parse_config("outage_status: 429\npolicies:\n  - {name: login, strategy: gcra, limit: 1/hour, fail: closed}\n",
                        "test.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  Service as_denial{std::make_shared<const Config>(*c), storage, clock};
  EXPECT_EQ(answer(as_denial, http::verb::post, "/v1/hit", R"({"policy": "login", "key": "k"})").result_int(), 429);
}

// A minute's limit beside a calendar month's: the body lists every limit with its own balance,
// and RateLimit carries one item per limit (the tightest first, as X-RateLimit-* describe it), so
// a tenant sees the month's remaining, not only the minute's.
TEST(ServiceBalances, EveryLimitOfAPolicyShowsItsOwnRemainingAndReset) {
  auto clock = std::make_shared<ManualClock>(1'700'000'000 * kSec);  // 2023-11-14 22:13:20 UTC
  Service service{config("  - {name: plan, strategy: fixed-window, limit: \"100/minute; 5000 per calendar month\"}\n"),
                  std::make_shared<MemoryStorage>(), clock};
  const Response r = answer(service, http::verb::post, "/v1/hit", R"({"policy": "plan", "key": "t", "cost": 10})");
  ASSERT_EQ(r.result_int(), 200) << r.body();
  const auto body = boost::json::parse(r.body()).as_object();
  EXPECT_EQ(body.at("remaining").as_int64(), 90);
  const auto& limits = body.at("limits").as_array();
  ASSERT_EQ(limits.size(), 2u) << r.body();
  EXPECT_EQ(limits[0].at("name").as_string(), "plan-0");
  EXPECT_EQ(limits[0].at("limit").as_string(), "100/minute");
  EXPECT_EQ(limits[1].at("limit").as_string(), "5000/calendar month in UTC");
  EXPECT_EQ(limits[0].at("remaining").as_int64(), 90);
  EXPECT_EQ(limits[0].at("reset_after").to_number<double>(), 40.0);
  EXPECT_EQ(limits[1].at("name").as_string(), "plan-1");
  EXPECT_EQ(limits[1].at("quota").as_int64(), 5000);
  EXPECT_EQ(limits[1].at("remaining").as_int64(), 4990);
  EXPECT_EQ(limits[1].at("reset_after").to_number<double>(), 1388800.0);  // 2023-12-01 00:00 UTC
  EXPECT_EQ(r["RateLimit-Policy"], "\"plan-0\";q=100;w=60, \"plan-1\";q=5000;w=2592000");
  EXPECT_EQ(r["RateLimit"], "\"plan-0\";r=90;t=40, \"plan-1\";r=4990;t=1388800");
  EXPECT_EQ(r["X-RateLimit-Remaining"], "90");
  // After 4,950 more over 50 minutes, in a fresh minute the month is the tighter one: it comes first.
  for (int i = 0; i < 50; ++i) {
    clock->advance(60 * kSec);
    ASSERT_EQ(answer(service, http::verb::post, "/v1/hit", R"({"policy": "plan", "key": "t", "cost": 99})").result_int(), 200);
  }
  clock->advance(60 * kSec);
  const Response late = answer(service, http::verb::post, "/v1/test", R"({"policy": "plan", "key": "t", "cost": 0})");
  EXPECT_EQ(late["RateLimit"], "\"plan-1\";r=40;t=1385740, \"plan-0\";r=100;t=0") << late.body();
  EXPECT_EQ(boost::json::parse(late.body()).at("limits").at(1).at("remaining").as_int64(), 40);
}

// POST /v1/hits: a GCRA minute and a calendar month, two policies, decided as one: charged together
// or not at all; a group the minute refuses leaves the month's count untouched.
TEST(ServiceGroups, SeveralPoliciesAreDecidedAllOrNothing) {
  auto clock = std::make_shared<ManualClock>(1'700'000'000 * kSec);
  Service service{config("  - {name: minute, strategy: gcra, limit: 2/minute}\n"
                         "  - {name: month, strategy: fixed-window, limit: 5 per calendar month}\n"),
                  std::make_shared<MemoryStorage>(), clock};
  const auto group = [&](int cost) {
    return answer(service, http::verb::post, "/v1/hits",
                  fmt::format(R"({{"hits": [{{"policy": "minute", "key": "t"}}, {{"policy": "month", "key": "t", "cost": {}}}]}})",
                              cost));
  };
  const auto month_remaining = [&] {
    const Response r = answer(service, http::verb::get, "/v1/stats?policy=month&key=t");
    return boost::json::parse(r.body()).at("remaining").as_int64();
  };
  const Response first = group(2);
  ASSERT_EQ(first.result_int(), 200) << first.body();
  const auto body = boost::json::parse(first.body());
  EXPECT_TRUE(body.at("allowed").as_bool());
  EXPECT_EQ(body.at("hits").at(1).at("remaining").as_int64(), 3);
  EXPECT_EQ(first["RateLimit-Policy"], "\"minute\";q=2;w=60, \"month\";q=5;w=2592000");
  EXPECT_EQ(month_remaining(), 3);
  ASSERT_EQ(group(1).result_int(), 200);  // the minute's second unit
  const Response refused = group(1);      // the minute refuses: the month is not charged
  EXPECT_EQ(refused.result_int(), 429) << refused.body();
  EXPECT_FALSE(boost::json::parse(refused.body()).at("allowed").as_bool());
  EXPECT_NE(refused.count("Retry-After"), 0u);
  EXPECT_EQ(month_remaining(), 2);
  clock->advance(60 * kSec);
  EXPECT_EQ(group(3).result_int(), 429) << "the month has 2 left: the minute is not charged either";
  EXPECT_EQ(month_remaining(), 2);
  EXPECT_EQ(group(2).result_int(), 200);
  EXPECT_EQ(month_remaining(), 0);
  // Bad input names the item and field; nothing is charged.
  for (const char* bad : {R"({"hits": []})", R"({"hits": [{"policy": "nope", "key": "t"}]})",
                          R"({"hits": [{"policy": "minute"}]})", R"({"hits": [{"policy": "minute", "key": "t", "cost": -1}]})",
                          R"({"hits": [{"policy": "minute", "key": "t", "ttl_ms": 5}]})", R"({"policy": "minute"})"}) {
    const Response r = answer(service, http::verb::post, "/v1/hits", bad);
    EXPECT_EQ(r.result_int(), 400) << bad;
    EXPECT_NE(r.body().find("hits"), std::string::npos) << r.body();
  }
}

// A reload drops the metric series of the policies it removed (they would otherwise stay in
// /metrics until restart, and take one of the bounded slots each); kept ones keep their counts.
TEST_F(ServiceTest, AReloadDropsTheSeriesOfRemovedPoliciesAndKeepsTheOthers) {
  ASSERT_EQ(hit("api", "a").result_int(), 200);
  ASSERT_EQ(hit("login", "a").result_int(), 200);
  service.reload(config("  - {name: api, strategy: fixed-window, limit: 2/hour}\n"
                        "  - {name: fresh, strategy: gcra, limit: 1/hour}\n"));
  std::string text = metrics();
  EXPECT_EQ(text.find("policy=\"login\""), std::string::npos) << text;
  EXPECT_EQ(text.find("policy=\"web\""), std::string::npos);
  EXPECT_EQ(metric(text, "floodgate_decisions_total{policy=\"api\",result=\"allowed\"}"), 1u);
  EXPECT_EQ(metric(text, "floodgate_decisions_total{policy=\"fresh\",result=\"allowed\"}"), 0u);
  // Back again after more reloads: its series starts from 0, in a slot reused from a dropped one.
  for (int i = 0; i < 300; ++i) {
    service.reload(config("  - {name: p" + std::to_string(i) + ", strategy: gcra, limit: 1/hour}\n"));
  }
  service.reload(config("  - {name: login, strategy: gcra, limit: 1/hour}\n"));
  text = metrics();
  EXPECT_EQ(metric(text, "floodgate_decisions_total{policy=\"login\",result=\"allowed\"}"), 0u);
  EXPECT_EQ(text.find("policy=\"p298\""), std::string::npos);
  ASSERT_EQ(hit("login", "b").result_int(), 200);
  EXPECT_EQ(metric(metrics(), "floodgate_decisions_total{policy=\"login\",result=\"allowed\"}"), 1u);
}

// The service may start before its store. While the store does not answer its probe,
// a fail-closed policy makes /readyz 503; once it answers, failures from before no longer count.
TEST_F(ServiceTest, ReadinessFollowsTheStorageProbe) {
  EXPECT_EQ(call(http::verb::get, "/readyz").result_int(), 200);
  service.set_storage_reachable(false);
  const Response down = call(http::verb::get, "/readyz");
  EXPECT_EQ(down.result_int(), 503);
  EXPECT_NE(down.body().find("does not answer"), std::string::npos) << down.body();
  storage->failure = absl::UnavailableError("storage down");
  EXPECT_EQ(hit("login", "k").result_int(), 503);  // fail closed, degraded
  clock->advance(kSec);
  storage->failure = absl::OkStatus();
  service.set_storage_reachable(true);
  EXPECT_EQ(call(http::verb::get, "/readyz").result_int(), 200) << "the failure was before the store answered";
  storage->failure = absl::UnavailableError("storage down again");
  EXPECT_EQ(hit("login", "k").result_int(), 503);
  EXPECT_EQ(call(http::verb::get, "/readyz").result_int(), 503) << "a failure since it answered still counts";
}


// An inline moving window picks its own amount: a client's flood on it stays within the memory
// store's bound on request-made logs, and past it gets a 503 saying so, not a decision made up by
// a fail mode; /readyz stays ready and the refusals are counted.
TEST(ServiceInlineLimits, AMovingWindowFloodStaysWithinTheLogBound) {
  MemoryStorageOptions o;
  o.max_request_log_bytes = 1024;
  auto storage = std::make_shared<MemoryStorage>(o);
  auto clock = std::make_shared<ManualClock>(1'700'000'000 * kSec);
  Service service{config("  - {name: api, strategy: fixed-window, limit: 2/hour, fail: closed}\n"), storage, clock};
  const auto call = [&](http::verb verb, std::string target, std::string body = "") {
    return answer(service, verb, std::move(target), std::move(body));
  };
  const std::string flood = R"({"limit": "1000000000/hour", "strategy": "moving-window", "key": "k"})";
  int allowed = 0;
  Response last;
  for (int i = 0; i < 1000; ++i, clock->advance(1)) {
    last = call(http::verb::post, "/v1/hit", flood);
    if (last.result_int() != 200) break;
    ++allowed;
  }
  EXPECT_EQ(allowed, 64) << "a log of 64 entries is 1024 bytes";
  EXPECT_EQ(last.result_int(), 503) << last.body();
  EXPECT_NE(last.body().find("max_request_log_bytes"), std::string::npos) << last.body();
  EXPECT_LE(storage->request_log_bytes(), 1024u);
  EXPECT_EQ(call(http::verb::get, "/readyz").result_int(), 200);
  const std::string metrics = call(http::verb::get, "/metrics").body();
  EXPECT_NE(metrics.find("\nfloodgate_memory_log_refusals_total 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("# TYPE floodgate_memory_request_log_bytes gauge\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("\nfloodgate_memory_request_log_bytes 1024\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("\nfloodgate_storage_degraded_total 0\n"), std::string::npos) << metrics;
}

}  // namespace
}  // namespace floodgate::server

namespace floodgate::server {
namespace {

// POST /v1/hit with a reservation, POST /v1/settle with the actual usage: the contract's names,
// the answers (200 with the state, 409 for an id in use, 400 naming the field), nothing charged
// by bad input.
TEST(ServiceReservations, ReserveThenSettleOverHttp) {
  auto clock = std::make_shared<ManualClock>(1'700'000'000 * kSec);
  Service service{config("  - {name: tokens, strategy: fixed-window, limit: 1000/hour}\n"),
                  std::make_shared<MemoryStorage>(), clock};
  const auto post = [&](std::string target, std::string body) {
    return answer(service, http::verb::post, std::move(target), std::move(body));
  };
  const auto field = [](const Response& r, const char* name) {
    return boost::json::parse(r.body()).as_object().at(name).as_int64();
  };
  Response r = post("/v1/hit", R"({"policy":"tokens","key":"u","cost":300,"reservation":"req-1","ttl_ms":60000})");
  EXPECT_EQ(r.result(), http::status::ok) << r.body();
  EXPECT_EQ(field(r, "remaining"), 700);
  r = post("/v1/hit", R"({"policy":"tokens","key":"u","cost":300,"reservation":"req-1"})");
  EXPECT_EQ(r.result(), http::status::conflict) << r.body();
  r = post("/v1/settle", R"({"policy":"tokens","key":"u","reservation":"req-1","actual":120})");
  EXPECT_EQ(r.result(), http::status::ok) << r.body();
  EXPECT_EQ(field(r, "remaining"), 880);
  EXPECT_NE(std::string(r["RateLimit"]).find("r=880"), std::string::npos) << r["RateLimit"];
  // Settling again changes nothing; an unknown id charges its usage now.
  EXPECT_EQ(field(post("/v1/settle", R"({"policy":"tokens","key":"u","reservation":"req-1","actual":120})"), "remaining"), 880);
  EXPECT_EQ(field(post("/v1/settle", R"({"policy":"tokens","key":"u","reservation":"other","actual":80})"), "remaining"), 800);
  // Bad input: 400 naming the field, nothing charged.
  for (const char* body : {R"({"policy":"tokens","key":"u","actual":5})",
                           R"({"policy":"tokens","key":"u","reservation":"a"})",
                           R"({"policy":"tokens","key":"u","reservation":"a","actual":-1})",
                           R"({"policy":"tokens","key":"u","reservation":"a","actual":1.5})",
                           R"({"policy":"tokens","key":"u","reservation":"","actual":1})",
                           R"({"policy":"tokens","key":"u","reservation":"a","actual":1,"cost":2})",
                           R"({"policy":"tokens","key":"u","reservation":"req-2","actual":null})",
                           R"({"policy":"tokens","key":"u","reservation":null,"actual":1})"}) {
    r = post("/v1/settle", body);
    EXPECT_EQ(r.result(), http::status::bad_request) << body;
    EXPECT_TRUE(r.body().find("reservation") != std::string::npos || r.body().find("actual") != std::string::npos ||
                r.body().find("cost") != std::string::npos)
        << r.body();
  }
  const std::string long_id(300, 'x');
  r = post("/v1/hit", R"({"policy":"tokens","key":"u","reservation":")" + long_id + R"("})");
  EXPECT_EQ(r.result(), http::status::bad_request);
  EXPECT_NE(r.body().find("reservation"), std::string::npos) << r.body();
  for (const char* body : {R"({"policy":"tokens","key":"u","reservation":"b","ttl_ms":0})",
                           R"({"policy":"tokens","key":"u","reservation":"b","ttl_ms":86400001})",
                           R"({"policy":"tokens","key":"u","ttl_ms":5000})"}) {
    r = post("/v1/hit", body);
    EXPECT_EQ(r.result(), http::status::bad_request) << body;
    EXPECT_NE(r.body().find("ttl_ms"), std::string::npos) << r.body();
  }
  r = post("/v1/test", R"({"policy":"tokens","key":"u","reservation":"c"})");
  EXPECT_EQ(r.result(), http::status::bad_request);
  // null is no value: refused naming the field, never taken as the default.
  for (const char* name : {"policy", "key", "cost", "reservation", "ttl_ms"}) {
    std::string body = R"({"policy":"tokens","key":"u","cost":1,"reservation":"n","ttl_ms":1000})";
    const std::string quoted = std::string("\"") + name + "\":";
    const auto at = body.find(quoted) + quoted.size();
    body.replace(at, body.find_first_of(",}", at) - at, "null");
    r = post("/v1/hit", body);
    EXPECT_EQ(r.result(), http::status::bad_request) << body << " " << r.body();
    EXPECT_NE(r.body().find(name), std::string::npos) << body << " " << r.body();
  }
  EXPECT_EQ(field(post("/v1/test", R"({"policy":"tokens","key":"u","cost":0})"), "remaining"), 800);
  // A settle of a reservation with "actual": null leaves its estimate charged.
  ASSERT_EQ(post("/v1/hit", R"({"policy":"tokens","key":"u","cost":100,"reservation":"req-3"})").result(),
            http::status::ok);
  EXPECT_EQ(post("/v1/settle", R"({"policy":"tokens","key":"u","reservation":"req-3","actual":null})").result(),
            http::status::bad_request);
  EXPECT_EQ(field(post("/v1/test", R"({"policy":"tokens","key":"u","cost":0})"), "remaining"), 700);
}

}  // namespace
}  // namespace floodgate::server

namespace floodgate::server {
namespace {

// A concurrency policy over HTTP: a lease taken with /v1/hit and a reservation id, ended with
// /v1/release, its time to live started again with /v1/renew; 429 with the draft's quota unit
// when every slot is held; 404 for a lease not outstanding; 400 naming the field for bad input.
TEST(ServiceLeases, AcquireRenewReleaseOverHttp) {
  auto clock = std::make_shared<ManualClock>(1'700'000'000 * kSec);
  Service service{config("  - {name: slots, strategy: concurrency, limit: 2 concurrent for 30 seconds}\n"
                         "  - {name: tokens, strategy: fixed-window, limit: 1000/hour}\n"),
                  std::make_shared<MemoryStorage>(), clock};
  const auto post = [&](std::string target, std::string body) {
    return answer(service, http::verb::post, std::move(target), std::move(body));
  };
  const auto remaining = [](const Response& r) { return boost::json::parse(r.body()).as_object().at("remaining").as_int64(); };
  Response r = post("/v1/hit", R"({"policy":"slots","key":"u","reservation":"a"})");
  EXPECT_EQ(r.result(), http::status::ok) << r.body();
  EXPECT_EQ(remaining(r), 1);
  EXPECT_NE(std::string(r["RateLimit-Policy"]).find(R"(q=2;qu="concurrent-requests")"), std::string::npos)
      << r["RateLimit-Policy"];
  EXPECT_EQ(post("/v1/hit", R"({"policy":"slots","key":"u","reservation":"b"})").result(), http::status::ok);
  clock->advance(10 * kSec);
  r = post("/v1/hit", R"({"policy":"slots","key":"u","reservation":"c"})");
  EXPECT_EQ(r.result(), http::status::too_many_requests) << r.body();
  EXPECT_EQ(std::string(r["Retry-After"]), "21");  // a's time to live ends 20 s + 1 µs from now
  r = post("/v1/renew", R"({"policy":"slots","key":"u","reservation":"b"})");
  EXPECT_EQ(r.result(), http::status::ok) << r.body();
  r = post("/v1/release", R"({"policy":"slots","key":"u","reservation":"a"})");
  EXPECT_EQ(r.result(), http::status::ok) << r.body();
  EXPECT_EQ(remaining(r), 1);
  r = post("/v1/release", R"({"policy":"slots","key":"u","reservation":"a"})");
  EXPECT_EQ(r.result(), http::status::not_found) << r.body();
  EXPECT_NE(r.body().find("not outstanding"), std::string::npos) << r.body();
  EXPECT_EQ(post("/v1/renew", R"({"policy":"slots","key":"u","reservation":"zzz"})").result(), http::status::not_found);
  EXPECT_EQ(post("/v1/hit", R"({"policy":"slots","key":"u","reservation":"c"})").result(), http::status::ok);
  // b was renewed at 10 s: held until 40 s; c until 40 s too. At 41 s both have gone.
  clock->advance(31 * kSec);
  EXPECT_EQ(remaining(post("/v1/test", R"({"policy":"slots","key":"u","cost":0})")), 2);
  // Bad input, each naming the field; nothing taken or freed.
  const std::pair<const char*, const char*> bad[] = {
      {"/v1/hit", R"({"policy":"slots","key":"u"})"},
      {"/v1/hit", R"({"policy":"slots","key":"u","reservation":"d","ttl_ms":1000})"},
      {"/v1/release", R"({"policy":"slots","key":"u"})"},
      {"/v1/release", R"({"policy":"slots","key":"u","reservation":"c","actual":0})"},
      {"/v1/renew", R"({"policy":"slots","key":"u","reservation":"c","cost":1})"},
      {"/v1/release", R"({"policy":"tokens","key":"u","reservation":"c"})"},
  };
  for (const auto& [target, body] : bad) {
    r = post(target, body);
    EXPECT_EQ(r.result(), http::status::bad_request) << target << " " << body;
    EXPECT_TRUE(r.body().find("reservation") != std::string::npos || r.body().find("ttl_ms") != std::string::npos ||
                r.body().find("actual") != std::string::npos || r.body().find("cost") != std::string::npos ||
                r.body().find("concurrency") != std::string::npos)
        << r.body();
  }
  EXPECT_EQ(remaining(post("/v1/test", R"({"policy":"slots","key":"u","cost":0})")), 2);
  Request auth{http::verb::get, "/v1/auth?policy=slots&key=u", 11};
  Response res;
  service.handle(auth, res);
  EXPECT_EQ(res.result(), http::status::bad_request);
  EXPECT_NE(res.body().find("/v1/release"), std::string::npos) << res.body();
}

// The playground's concurrency lane, worked by hand: N = 2, leases live 5 s, requests last 3 s
// unless they say otherwise. At 0 and 1 s two leases are taken; at 2 s the third request is
// denied; at 3 s the first ends before the request at 3 s (10 s long) takes its place, which frees
// itself at its time to live, 8 s; at 4 s the second ends; at 5 s one more (until 8 s); at 6 s a
// denial; at 8 s the expired lease and the one ending go (in the order they were taken), and at
// 8.5 s a request is admitted, ending at 11.5 s.
TEST_F(ServiceTest, SimulateRunsTheConcurrencyLaneWorkedByHand) {
  const std::string trace = R"("trace": [{"t": 0, "key": "a"}, {"t": 1, "key": "a"}, {"t": 2, "key": "a"},
      {"t": 3, "key": "a", "duration_ms": 10000}, {"t": 5, "key": "a"}, {"t": 6, "key": "a"},
      {"t": 8.5, "key": "a"}])";
  const Response res = call(http::verb::post, "/v1/simulate",
                            R"({"concurrency": {"limit": 2, "lease_ttl_ms": 5000, "duration_ms": 3000}, )" + trace + "}");
  ASSERT_EQ(res.result_int(), 200) << res.body();
  const auto out = boost::json::parse(res.body()).as_object();
  EXPECT_FALSE(out.contains("limit"));  // no "limit": the concurrency lane alone
  EXPECT_TRUE(out.at("strategies").as_array().empty());
  const auto& c = out.at("concurrency").as_object();
  EXPECT_EQ(c.at("policy").as_string(), "concurrency 2 concurrent for 5 seconds");
  EXPECT_EQ(c.at("limit").as_int64(), 2);
  EXPECT_EQ(c.at("lease_ttl").to_number<double>(), 5.0);
  EXPECT_EQ(c.at("admitted").as_int64(), 5);
  EXPECT_EQ(c.at("denied").as_int64(), 2);
  EXPECT_EQ(c.at("max_held").as_int64(), 2);
  EXPECT_EQ(c.at("expired").as_int64(), 1);
  EXPECT_EQ(c.at("key").as_string(), "a");
  EXPECT_EQ(c.at("last").to_number<double>(), 11.5);
  struct Expected {
    bool admitted;
    double start, end;
    bool expired;
    std::int64_t held;
  };
  const std::vector<Expected> want{{true, 0, 3, false, 1},    {true, 1, 4, false, 2},  {false, 2, 2, false, 2},
                                   {true, 3, 8, true, 2},     {true, 5, 8, false, 2},  {false, 6, 6, false, 2},
                                   {true, 8.5, 11.5, false, 1}};
  const auto& decisions = c.at("decisions").as_array();
  ASSERT_EQ(decisions.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const auto& d = decisions[i].as_object();
    EXPECT_EQ(d.at("admitted").as_bool(), want[i].admitted) << i;
    EXPECT_EQ(d.at("start").to_number<double>(), want[i].start) << i;
    EXPECT_EQ(d.at("end").to_number<double>(), want[i].end) << i;
    EXPECT_EQ(d.at("expired").as_bool(), want[i].expired) << i;
    EXPECT_EQ(d.at("held").as_int64(), want[i].held) << i;
  }
  const std::vector<std::pair<double, std::int64_t>> line{{0, 1}, {1, 2}, {3, 1}, {3, 2}, {4, 1},
                                                          {5, 2}, {8, 1}, {8, 0}, {8.5, 1}, {11.5, 0}};
  const auto& held = c.at("held").as_array();
  ASSERT_EQ(held.size(), line.size());
  for (std::size_t i = 0; i < line.size(); ++i) {
    EXPECT_EQ(held[i].as_object().at("t").to_number<double>(), line[i].first) << i;
    EXPECT_EQ(held[i].as_object().at("held").as_int64(), line[i].second) << i;
  }

  // Beside the algorithm lanes, and from index 5 on: the same totals, the last two decisions.
  const Response both = call(http::verb::post, "/v1/simulate",
                             R"({"limit": "2/minute", "strategies": ["moving-window"], "from": 5,
                                 "concurrency": {"limit": 2, "lease_ttl_ms": 5000, "duration_ms": 3000}, )" +
                                 trace + "}");
  ASSERT_EQ(both.result_int(), 200) << both.body();
  const auto b = boost::json::parse(both.body()).as_object();
  ASSERT_EQ(b.at("strategies").as_array().size(), 1u);
  EXPECT_EQ(b.at("strategies").as_array()[0].as_object().at("allowed").as_int64(), 2);
  const auto& bc = b.at("concurrency").as_object();
  EXPECT_EQ(bc.at("admitted").as_int64(), 5);
  EXPECT_EQ(bc.at("expired").as_int64(), 1);
  ASSERT_EQ(bc.at("decisions").as_array().size(), 2u);
  EXPECT_FALSE(bc.at("decisions").as_array()[0].as_object().at("admitted").as_bool());
  EXPECT_EQ(bc.at("held").as_array().size(), line.size());

  // No lease time to live given: 60 s, as "2 concurrent"; the 10 s request then ends on its own.
  const Response dflt = call(http::verb::post, "/v1/simulate",
                             R"({"concurrency": {"limit": 2, "duration_ms": 3000}, )" + trace + "}");
  ASSERT_EQ(dflt.result_int(), 200) << dflt.body();
  const boost::json::value dv = boost::json::parse(dflt.body());
  const auto& dc = dv.as_object().at("concurrency").as_object();
  EXPECT_EQ(dc.at("policy").as_string(), "concurrency 2 concurrent for 1 minute");
  EXPECT_EQ(dc.at("expired").as_int64(), 0);
  EXPECT_EQ(dc.at("last").to_number<double>(), 13.0);
}

TEST_F(ServiceTest, SimulateRejectsABadConcurrencyLaneNamingTheField) {
  std::string many = R"({"concurrency": {"limit": 1, "duration_ms": 1}, "trace": [)";
  for (int i = 0; i < 10001; ++i) many += (i ? "," : "") + std::string(R"({"t": 0, "key": "a"})");
  many += "]}";
  const std::pair<std::string, std::string> cases[] = {
      {R"({"concurrency": {"limit": 0, "duration_ms": 1}, "trace": []})", "\"concurrency.limit\" must be a whole number from 1"},
      {R"({"concurrency": {"limit": 1.5, "duration_ms": 1}, "trace": []})", "\"concurrency.limit\" must be"},
      {R"({"concurrency": {"duration_ms": 1}, "trace": []})", "\"concurrency.limit\" is required"},
      {R"({"concurrency": {"limit": 2, "lease_ttl_ms": 0}, "trace": []})", "\"concurrency.lease_ttl_ms\" must be"},
      {R"({"concurrency": {"limit": 2, "lease_ttl_ms": 86400001}, "trace": []})", "\"concurrency.lease_ttl_ms\" must be"},
      {R"({"concurrency": {"limit": 2, "duration_ms": -1}, "trace": []})", "\"concurrency.duration_ms\" must be"},
      {R"({"concurrency": {"limit": 2, "ttl": 5}, "trace": []})", "\"concurrency.ttl\" is not a field"},
      {R"({"concurrency": 2, "trace": []})", "\"concurrency\" must be an object"},
      {R"({"concurrency": {"limit": 2}, "trace": [{"t": 0, "key": "a", "duration_ms": 5}, {"t": 1, "key": "a"}]})",
       "trace[1]: no \"duration_ms\""},
      {R"({"concurrency": {"limit": 2, "duration_ms": 5}, "trace": [{"t": 0, "key": "a", "duration_ms": -5}]})",
       "trace[0]: \"duration_ms\" must be a whole number of milliseconds"},
      {R"({"concurrency": {"limit": 2, "duration_ms": 5}, "trace": [{"t": 0, "key": "a", "duration_ms": 82800001}]})",
       "trace[0]: \"duration_ms\" must be"},
      {R"({"limit": 3, "concurrency": {"limit": 2, "duration_ms": 5}, "trace": []})", "\"limit\" must be a string"},
      {R"({"trace": []})", "\"limit\" must be a string"},
      {R"({"strategies": ["gcra"], "concurrency": {"limit": 2, "duration_ms": 5}, "trace": []})",
       "\"strategies\" is for the strategy lanes: give their \"limit\" too"},
      {many, "the trace has 10001 requests: at most 10000"},
  };
  for (const auto& [body, message] : cases) {
    const Response res = call(http::verb::post, "/v1/simulate", body);
    EXPECT_EQ(res.result_int(), 400) << body.substr(0, 100) << " → " << res.body();
    const auto err = boost::json::parse(res.body()).as_object();
    EXPECT_NE(std::string(err.at("error").as_string()).find(message), std::string::npos)
        << body.substr(0, 100) << " → " << res.body();
    EXPECT_FALSE(err.contains("concurrency"));
  }
}

}  // namespace
}  // namespace floodgate::server

namespace floodgate::server {
namespace {

// A reload changes nothing counted, on every store alike: leases taken under a concurrency policy
// still hold their slots after reloads that turned it into a moving window and back (the state
// and the leases stay with their state id until they expire), and a release frees one of them.
TEST(ServiceReload, LeasesOutliveReloadsAwayAndBack) {
  auto clock = std::make_shared<ManualClock>(1'700'000'000 * kSec);
  const std::string slots = "  - {name: slots, strategy: concurrency, limit: 2 concurrent for 1 minute}\n";
  Service service{config(slots), std::make_shared<MemoryStorage>(), clock};
  const auto post = [&](std::string target, std::string body) {
    return answer(service, http::verb::post, std::move(target), std::move(body));
  };
  ASSERT_EQ(post("/v1/hit", R"({"policy":"slots","key":"u","reservation":"a"})").result(), http::status::ok);
  ASSERT_EQ(post("/v1/hit", R"({"policy":"slots","key":"u","reservation":"b"})").result(), http::status::ok);
  service.reload(config("  - {name: slots, strategy: moving-window, limit: 2/minute}\n"));
  clock->advance(kSec);
  // Under the moving window the lease is not a lease: its release is refused, nothing freed.
  EXPECT_EQ(post("/v1/release", R"({"policy":"slots","key":"u","reservation":"a"})").result(),
            http::status::bad_request);
  service.reload(config(slots));
  clock->advance(kSec);
  Response r = post("/v1/hit", R"({"policy":"slots","key":"u","reservation":"c"})");
  EXPECT_EQ(r.result(), http::status::too_many_requests) << "the two leases still hold both slots: " << r.body();
  r = post("/v1/release", R"({"policy":"slots","key":"u","reservation":"a"})");
  EXPECT_EQ(r.result(), http::status::ok) << r.body();
  EXPECT_EQ(boost::json::parse(r.body()).at("remaining").as_int64(), 1);
  EXPECT_EQ(post("/v1/hit", R"({"policy":"slots","key":"u","reservation":"c"})").result(), http::status::ok);
  // Past their time to live, the leases are gone as they would have been without the reloads.
  clock->advance(61 * kSec);
  EXPECT_EQ(post("/v1/release", R"({"policy":"slots","key":"u","reservation":"b"})").result(),
            http::status::not_found);
}

// A reload ends this instance's budget slices, giving back what they did not use: the store then
// holds only what was admitted, and a removed budget_slice no longer reserves anything.
TEST(ServiceReload, AReloadEndsBudgetSlicesAndGivesBackTheRest) {
  auto clock = std::make_shared<ManualClock>(1'700'000'000 * kSec);
  Service service{config("  - {name: hot, strategy: fixed-window, limit: 1000/hour, "
                         "budget_slice: {max_slice: 100, interval_ms: 3600000}}\n"),
                  std::make_shared<MemoryStorage>(), clock};
  const auto remaining_in_store = [&] {
    const Response s = answer(service, http::verb::get, "/v1/stats?policy=hot&key=k");
    return boost::json::parse(s.body()).at("remaining").as_int64();
  };
  // Hits until the key is hot enough for a slice with units left over.
  int admitted = 0;
  while (service.limiter().budget_stats().held == 0 && admitted < 50) {
    ASSERT_EQ(answer(service, http::verb::post, "/v1/hit", R"({"policy":"hot","key":"k"})").result(),
              http::status::ok);
    ++admitted;
  }
  const std::int64_t held = service.limiter().budget_stats().held;
  ASSERT_GT(held, 0) << "no slice after " << admitted << " hits";
  EXPECT_EQ(remaining_in_store(), 1000 - admitted - held);
  service.reload(config("  - {name: hot, strategy: fixed-window, limit: 1000/hour}\n"));
  EXPECT_EQ(service.limiter().budget_stats().held, 0);
  EXPECT_EQ(remaining_in_store(), 1000 - admitted) << "the slice's unused units are given back at the reload";
  ASSERT_EQ(answer(service, http::verb::post, "/v1/hit", R"({"policy":"hot","key":"k"})").result(), http::status::ok);
  EXPECT_EQ(remaining_in_store(), 999 - admitted) << "without budget_slice, a hit charges its own unit";
}

}  // namespace
}  // namespace floodgate::server
