// Envoy's rate-limit service without sockets: the envoyproxy/ratelimit YAML loader and the
// request → decision mapping, on a manual clock and the memory store.
#include <filesystem>
#include <fstream>
#include <limits>
#include <array>
#include <atomic>
#include <future>
#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "floodgate/memory_storage.hpp"
#include "server/config/config.hpp"
#include "server/rls/service.hpp"
#include "server/rls/rules.hpp"
#include "support/rls_request.hpp"

namespace floodgate::server {
namespace {

using Response = rlsv3::RateLimitResponse;

// ---- the loader ---------------------------------------------------------------------------------

absl::Status parse(const std::string& yaml) {
  RlsConfig c;
  return parse_rls_file(yaml, "rules.yaml", c);
}

TEST(RlsConfig, LoadsEveryDocumentedExample) {
  auto c = load_rls_config(FLOODGATE_RLS_EXAMPLES_DIR);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->domains.size(), 5u);
  const RlsDomain* messaging = (*c)->find("messaging");
  ASSERT_NE(messaging, nullptr);
  const auto& marketing = messaging->root.children.at(rls_child_key("message_type", "marketing"));
  const auto& to_number = marketing->children.at(rls_default_key("to_number"));
  ASSERT_NE(to_number->rule, nullptr);
  EXPECT_EQ(to_number->rule->requests_per_unit, 5u);
  EXPECT_EQ(to_number->rule->unit, RlsUnit::kDay);
  EXPECT_EQ(to_number->rule->path, "message_type_marketing.to_number");
  EXPECT_EQ(to_number->rule->policy->strategy(), Strategy::kFixedWindow);
  EXPECT_EQ(to_number->rule->policy->anchor(), Anchor::kClock);
  const RlsDomain* replaces = (*c)->find("example_replaces");
  ASSERT_NE(replaces, nullptr);
  const auto& vip = replaces->root.children.at(rls_child_key("key2", "value2"));
  EXPECT_EQ(vip->rule->name, "vip");
  EXPECT_EQ(vip->rule->replaces, std::vector<std::string>{"global"});
  EXPECT_TRUE(vip->rule->detailed_metric);
}

TEST(RlsConfig, OurAdditions) {
  RlsConfig c;
  ASSERT_TRUE(parse_rls_file(R"(
domain: d
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: token-bucket, burst: 50, fail: closed}
)", "x.yaml", c).ok());
  const auto& rule = c.find("d")->root.children.at(rls_default_key("k"))->rule;
  EXPECT_EQ(rule->policy->strategy(), Strategy::kTokenBucket);
  EXPECT_EQ(rule->policy->limits().front().capacity(), 50);
  EXPECT_EQ(rule->policy->fail_mode(), FailMode::kClosed);
}

TEST(RlsConfig, CalendarBesideTheUnit) {
  RlsConfig c;
  ASSERT_TRUE(parse_rls_file(R"(
domain: d
descriptors:
  - key: billing
    rate_limit:
      unit: month
      requests_per_unit: 1000000
      calendar: {time_zone: Europe/Berlin, anchor_day: 31}
  - key: daily
    rate_limit: {unit: DAY, requests_per_unit: 5, calendar: {time_zone: America/New_York}}
  - key: plain
    rate_limit: {unit: month, requests_per_unit: 5}
)", "x.yaml", c).ok());
  const auto& root = c.find("d")->root;
  const Limit billing = root.children.at(rls_default_key("billing"))->rule->policy->limits().front();
  EXPECT_EQ(to_string(billing), "1000000/calendar month in Europe/Berlin anchored 31");
  EXPECT_EQ(root.children.at(rls_default_key("billing"))->rule->unit, RlsUnit::kMonth);  // current_limit's unit
  const Limit daily = root.children.at(rls_default_key("daily"))->rule->policy->limits().front();
  EXPECT_EQ(to_string(daily), "5/calendar day in America/New_York");
  // Without `calendar`, envoyproxy's meaning: 30 days from the epoch.
  const Limit plain = root.children.at(rls_default_key("plain"))->rule->policy->limits().front();
  EXPECT_FALSE(plain.calendar);
  EXPECT_EQ(plain.period, 30 * 86'400 * kMicrosPerSecond);
}

TEST(RlsConfig, CalendarRefusals) {
  const auto error = [](const std::string& rate_limit) {
    const absl::Status s = parse("domain: d\ndescriptors:\n  - key: k\n    rate_limit: " + rate_limit + "\n");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << rate_limit;
    return std::string(s.message());
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{unit: hour, requests_per_unit: 1, calendar: {time_zone: UTC}}",
       "calendar applies to unit day, week, month or year only"},
      {"{unit: day, requests_per_unit: 1, calendar: {}}", "calendar needs a time_zone"},
      {"{unit: day, requests_per_unit: 1, calendar: UTC}", "calendar must be a map"},
      {"{unit: day, requests_per_unit: 1, calendar: {time_zone: Mars/Olympus}}",
       "calendar.time_zone: unknown time zone \"Mars/Olympus\""},
      {"{unit: day, requests_per_unit: 1, calendar: {time_zone: ../../etc/passwd}}", "unknown time zone"},
      {"{unit: day, requests_per_unit: 1, calendar: {time_zone: UTC, anchor_day: 3}}",
       "calendar.anchor_day applies to unit month only, not day"},
      {"{unit: month, requests_per_unit: 1, calendar: {time_zone: UTC, anchor_day: 32}}", "anchor_day"},
      {"{unit: month, requests_per_unit: 1, calendar: {time_zone: UTC, zone: UTC}}", "zone"},
      {"{unlimited: true, calendar: {time_zone: UTC}}", "unlimited takes no calendar"},
      {"{unit: month, calendar: {time_zone: UTC}}", "algorithm, burst and calendar do not apply"},
      {"{unit: month, requests_per_unit: 1, algorithm: gcra, calendar: {time_zone: UTC}}",
       "calendar periods apply to the fixed window aligned to the clock only"},
  };
  for (const auto& [rate_limit, want] : cases) {
    const std::string m = error(rate_limit);
    EXPECT_NE(m.find(want), std::string::npos) << rate_limit << "\n" << m;
    EXPECT_NE(m.find("rules.yaml:4:"), std::string::npos) << m;  // the file and line
  }
}

TEST(RlsConfig, UnitsAsEnvoyproxyDividesTime) {
  EXPECT_EQ(rls_unit_period(parse_rls_unit("SECOND")), kMicrosPerSecond);
  EXPECT_EQ(rls_unit_period(parse_rls_unit("week")), 7 * 86'400 * kMicrosPerSecond);
  EXPECT_EQ(rls_unit_period(parse_rls_unit("month")), 30 * 86'400 * kMicrosPerSecond);
  EXPECT_EQ(rls_unit_period(parse_rls_unit("year")), 365 * 86'400 * kMicrosPerSecond);
  EXPECT_EQ(parse_rls_unit("fortnight"), RlsUnit::kUnknown);
}

struct BadFile {
  const char* yaml;
  const char* message;  // the whole error
};

class RlsConfigErrors : public ::testing::TestWithParam<BadFile> {};

TEST_P(RlsConfigErrors, NameFileLineAndReason) {
  const absl::Status s = parse(GetParam().yaml);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(s.message()), GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Bad, RlsConfigErrors,
    ::testing::Values(
        BadFile{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n",
                "rules.yaml:4:24: the rate_limit of \"k\": invalid unit \"fortnight\" (second, minute, hour, day, "
                "week, month, year)"},
        BadFile{"domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      requests_per_unit: 1\n",
                "rules.yaml:5:7: the rate_limit of \"k\" needs a unit (second, minute, hour, day, week, month, "
                "year)"},
        BadFile{"domain: d\ndescriptors:\n  - key: k\n    vaule: v\n",
                "rules.yaml:4:5: unknown key \"vaule\" in a descriptor (known: key, value, rate_limit, "
                "descriptors, shadow_mode, quota_mode, detailed_metric, value_to_metric, share_threshold, "
                "metadata, reservation)"},
        BadFile{"domain: d\ndescriptors:\n  - key: k\n    reservation: {id_key: rid}\n",
                "rules.yaml:4:18: the reservation of \"k\" needs a rate_limit beside it"},
        BadFile{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n"
                "    reservation: {ttl_ms: 100}\n",
                "rules.yaml:5:18: the reservation of \"k\" needs an id_key: the descriptor key that carries the "
                "request's id"},
        BadFile{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n"
                "    reservation: {id_key: rid, ttl_ms: 0}\n",
                "rules.yaml:5:40: the reservation of \"k\": ttl_ms must be a whole number from 1 to 86400000, not 0"},
        BadFile{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true}\n"
                "    reservation: {id_key: rid}\n",
                "rules.yaml:5:18: the reservation of \"k\": a reservation needs a limit (requests_per_unit above 0, "
                "not unlimited)"},
        BadFile{"domain: d\ndescriptors:\n  - key: k\n    value: v\n  - key: k\n    value: v\n",
                "rules.yaml:5:5: duplicate descriptor \"k_v\" in domain \"d\""},
        BadFile{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: second}\n",
                "rules.yaml:4:41: the rate_limit of \"k\": unlimited takes no unit"},
        BadFile{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: -1}\n",
                "rules.yaml:4:51: the rate_limit of \"k\": requests_per_unit must be a whole number from 0 to "
                "4294967295"},
        BadFile{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, "
                "algorithm: fastest}\n",
                "rules.yaml:4:65: the rate_limit of \"k\": unknown strategy \"fastest\": expected fixed-window, "
                "moving-window, sliding-window-counter, token-bucket, leaky-bucket, gcra or concurrency"},
        BadFile{"descriptors: []\n", "rules.yaml:1:1: the file needs a domain"},
        BadFile{"domain: \"\"\n", "rules.yaml:1:9: the domain is empty"},
        BadFile{"domain: d\ndescriptors:\n  - value: v\n", "rules.yaml:3:5: a descriptor needs a key"},
        BadFile{"domain: d\ndescriptors:\n  - key: [k\n", "rules.yaml:4:1: end of sequence flow not found"}));

TEST(RlsConfig, DuplicateDomainAcrossFilesNamesBoth) {
  const auto dir = std::filesystem::temp_directory_path() / ("rls-dup-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "a.yaml") << "domain: same\n";
  std::ofstream(dir / "b.yaml") << "# another file\ndomain: same\n";
  auto c = load_rls_config(dir.string());
  std::filesystem::remove_all(dir);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), (dir / "b.yaml").string() + ":2:9: domain \"same\" is already defined in " +
                                      (dir / "a.yaml").string());
}

TEST(RlsConfig, TheEnvoyExampleLoads) {
  auto main = load_config(FLOODGATE_SOURCE_DIR "/examples/envoy/floodgate.yaml");
  ASSERT_TRUE(main.ok()) << main.status();
  EXPECT_EQ(main->rls.config_dir, FLOODGATE_SOURCE_DIR "/examples/envoy/rules");  // relative to the file
  EXPECT_EQ(main->rls.listen_port, 8081);
  EXPECT_TRUE(main->rls.response_headers);
  auto rules = load_rls_config(main->rls.config_dir);
  ASSERT_TRUE(rules.ok()) << rules.status();
  const auto& by_ip = (*rules)->find("edge")->root.children.at(rls_default_key("remote_address"));
  EXPECT_EQ(by_ip->rule->policy->strategy(), Strategy::kGcra);
  EXPECT_EQ(by_ip->rule->policy->limits().front().capacity(), 40);
}

TEST(RlsConfig, MissingDirectory) {
  auto c = load_rls_config("/nonexistent/rls");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "/nonexistent/rls: not a directory of rate-limit files");
}

// ---- the decisions ------------------------------------------------------------------------------

// A storage that always fails (Redis down).
class FailingStorage final : public Storage {
 public:
  explicit FailingStorage(absl::Status s = absl::UnavailableError("down")) : status_(std::move(s)) {}
  absl::StatusOr<Decision> apply(const Policy&, std::string_view, std::int64_t, Effect, Micros) override {
    return status_;
  }
  absl::Status status_;
  absl::Status clear(const Policy&, std::string_view) override { return absl::UnavailableError("down"); }
};

class Rls : public ::testing::Test {
 protected:
  // 10 s after a minute boundary, so fixed windows have 50 s left.
  static constexpr Micros kStart = 1'700'000'040 * kMicrosPerSecond + 10 * kMicrosPerSecond;

  void load(const std::string& yaml, RlsSettings limits = {}, std::shared_ptr<Storage> storage = nullptr) {
    auto c = std::make_shared<RlsConfig>();
    ASSERT_TRUE(parse_rls_file(yaml, "test.yaml", *c).ok());
    service_ = std::make_unique<RlsService>(storage ? storage : std::make_shared<MemoryStorage>(), clock_, limits);
    service_->reload(c);
  }
  void load_examples(RlsSettings limits = {}) {
    auto c = load_rls_config(FLOODGATE_RLS_EXAMPLES_DIR);
    ASSERT_TRUE(c.ok()) << c.status();
    service_ = std::make_unique<RlsService>(std::make_shared<MemoryStorage>(), clock_, limits);
    service_->reload(*c);
  }

  using Entries = testing::RlsEntries;
  static rlsv3::RateLimitRequest request(const std::string& domain, const std::vector<Entries>& descriptors,
                                         std::uint32_t hits = 0) {
    return testing::rls_request(domain, descriptors, hits);
  }
  Response call(const rlsv3::RateLimitRequest& r) {
    Response out;
    const grpc::Status s = service_->should_rate_limit(r, out);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return out;
  }
  grpc::Status status_of(const rlsv3::RateLimitRequest& r) {
    Response out;
    return service_->should_rate_limit(r, out);
  }
  // How many calls of `r` are answered OK before the first OVER_LIMIT (at most `max`).
  int admitted(const rlsv3::RateLimitRequest& r, int max = 1000) {
    for (int i = 0; i < max; ++i) {
      if (call(r).overall_code() != Response::OK) return i;
    }
    return max;
  }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(kStart);
  std::unique_ptr<RlsService> service_;
};

TEST_F(Rls, Example1ExactValuesOnly) {
  load_examples();
  const auto users = request("mongo_cps", {{{"database", "users"}}});
  EXPECT_EQ(admitted(users), 500);
  const Response r = call(users);
  EXPECT_EQ(r.overall_code(), Response::OVER_LIMIT);
  ASSERT_EQ(r.statuses_size(), 1);
  EXPECT_EQ(r.statuses(0).current_limit().requests_per_unit(), 500u);
  EXPECT_EQ(r.statuses(0).current_limit().unit(), Response::RateLimit::SECOND);
  EXPECT_EQ(r.statuses(0).limit_remaining(), 0u);
  // A database with no rule is not limited and has no current_limit.
  const Response other = call(request("mongo_cps", {{{"database", "orders"}}}));
  EXPECT_EQ(other.overall_code(), Response::OK);
  EXPECT_FALSE(other.statuses(0).has_current_limit());
  // The next second is a new window (fixed windows aligned to the clock, as envoyproxy).
  clock_->advance(kMicrosPerSecond);
  EXPECT_EQ(call(users).overall_code(), Response::OK);
}

TEST_F(Rls, Example2MostSpecificMatchAndEveryDescriptor) {
  load_examples();
  // Marketing to one number: 5 a day (the nested rule), while the number's own 100/day also counts.
  const auto marketing = request("messaging", {{{"message_type", "marketing"}, {"to_number", "2061234567"}},
                                               {{"to_number", "2061234567"}}});
  EXPECT_EQ(admitted(marketing), 5);
  const Response r = call(marketing);
  EXPECT_EQ(r.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(r.statuses(0).code(), Response::OVER_LIMIT);
  EXPECT_EQ(r.statuses(1).code(), Response::OK);
  // The denied requests charged nothing: the number has 95 left of its 100.
  EXPECT_EQ(r.statuses(1).limit_remaining(), 95u);
  const auto plain = request("messaging", {{{"to_number", "2061234567"}}});
  EXPECT_EQ(admitted(plain), 95);
  // Another number has its own counters (a key-only rule counts per value).
  EXPECT_EQ(call(request("messaging", {{{"to_number", "2069999999"}}})).statuses(0).limit_remaining(), 99u);
}

// envoyproxy's wildcard values: an exact value first, then the first wildcard in the file whose
// prefix fits, then the key-only default; each value keeps its own counter.
TEST_F(Rls, WildcardValuesMatchByPrefixAfterExactValues) {
  load("domain: w\ndescriptors:\n"
       "  - key: path\n    value: /api/exact\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"
       "  - key: path\n    value: /api/*\n    rate_limit: {unit: hour, requests_per_unit: 2}\n"
       "  - key: path\n    value: /api/v2*\n    rate_limit: {unit: hour, requests_per_unit: 5}\n"
       "  - key: path\n    rate_limit: {unit: hour, requests_per_unit: 3}\n"
       "  - key: user\n    value: \"*\"\n    descriptors:\n"
       "      - key: plan\n        value: free*\n        rate_limit: {unit: hour, requests_per_unit: 4}\n");
  auto path = [](const std::string& v) { return request("w", {{{"path", v}}}); };
  EXPECT_EQ(admitted(path("/api/exact")), 1);
  EXPECT_EQ(admitted(path("/api/users")), 2);
  EXPECT_EQ(admitted(path("/api/orders")), 2) << "a value matched by a wildcard has its own counter";
  EXPECT_EQ(admitted(path("/api/v2/items")), 2) << "the first wildcard in the file that fits wins";
  EXPECT_EQ(call(path("/api/v2/items")).statuses(0).current_limit().requests_per_unit(), 2u);
  EXPECT_EQ(admitted(path("/static/logo.png")), 3) << "no wildcard fits: the key-only default";
  EXPECT_EQ(admitted(path("/api")), 3) << "the prefix is '/api/', with its slash";
  // A lone "*" matches any value; wildcards work at every level.
  EXPECT_EQ(admitted(request("w", {{{"user", "alice"}, {"plan", "free-trial"}}})), 4);
  const Response paid = call(request("w", {{{"user", "alice"}, {"plan", "paid"}}}));
  EXPECT_EQ(paid.overall_code(), Response::OK);
  EXPECT_FALSE(paid.statuses(0).has_current_limit()) << "no rule for a paid plan";
}

TEST_F(Rls, Example3ValueBeatsDefaultBlockListAndUnlimited) {
  load_examples();
  EXPECT_EQ(admitted(request("edge_proxy_per_ip", {{{"remote_address", "10.0.0.1"}}})), 10);
  const Response blocked = call(request("edge_proxy_per_ip", {{{"remote_address", "50.0.0.5"}}}));
  EXPECT_EQ(blocked.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(blocked.statuses(0).current_limit().requests_per_unit(), 0u);
  const auto unlimited = request("edge_proxy_per_ip", {{{"remote_address", "50.0.0.6"}}});
  EXPECT_EQ(admitted(unlimited, 50), 50);
  EXPECT_EQ(call(unlimited).statuses(0).limit_remaining(), std::numeric_limits<std::uint32_t>::max());
}

TEST_F(Rls, Example4ShadowModeAnswersOkAndCounts) {
  load_examples();
  const auto r = request("example_shadow", {{{"key1", "value1"}, {"subkey1", "x"}}});
  EXPECT_EQ(admitted(r, 8), 8);
  const auto slot = service_->metrics().slot("example_shadow", "key1_value1.subkey1");
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(service_->metrics().get(*slot, RlsMetrics::kTotalHits), 8u);
  EXPECT_EQ(service_->metrics().get(*slot, RlsMetrics::kWithinLimit), 5u);
  EXPECT_EQ(service_->metrics().get(*slot, RlsMetrics::kOverLimit), 3u);
  EXPECT_EQ(service_->metrics().get(*slot, RlsMetrics::kShadowMode), 3u);
  EXPECT_EQ(service_->metrics().get(*slot, RlsMetrics::kNearLimit), 1u);  // remaining 0 of 5 (< 20 %)
  PromText text;
  service_->metrics().render(text);
  EXPECT_NE(text.take().find(
                "floodgate_rls_shadow_mode_total{domain=\"example_shadow\",rule=\"key1_value1.subkey1\"} 3"),
            std::string::npos);
}

TEST_F(Rls, Example5ReplacesAndDetailedMetric) {
  load_examples();
  const auto both = request("example_replaces", {{{"key1", "value1"}}, {{"key2", "value2"}}});
  EXPECT_EQ(admitted(both), 10);  // "global" (3/minute) is replaced by "vip" (10/minute)
  const Response r = call(both);
  EXPECT_FALSE(r.statuses(0).has_current_limit());
  EXPECT_EQ(r.statuses(1).current_limit().name(), "vip");
  // Alone, the global rule applies: it was never charged.
  EXPECT_EQ(admitted(request("example_replaces", {{{"key1", "value1"}}})), 3);
}

TEST_F(Rls, HitsAddend) {
  load("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 10}\n");
  auto r = request("d", {{{"k", "a"}}}, 0);  // 0 means 1
  EXPECT_EQ(call(r).statuses(0).limit_remaining(), 9u);
  r.set_hits_addend(4);
  EXPECT_EQ(call(r).statuses(0).limit_remaining(), 5u);
  r.mutable_descriptors(0)->mutable_hits_addend()->set_value(2);  // the descriptor's own wins
  EXPECT_EQ(call(r).statuses(0).limit_remaining(), 3u);
  r.mutable_descriptors(0)->mutable_hits_addend()->set_value(4);  // 4 > 3 left: denied, nothing charged
  const Response denied = call(r);
  EXPECT_EQ(denied.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(denied.statuses(0).limit_remaining(), 3u);
  EXPECT_EQ(denied.statuses(0).duration_until_reset().seconds(), 50);
}

// floodgate's reservation rule with stock Envoy: the request-time call with the request's id
// reserves its hits_addend (an estimate), the call at the end of the stream with the same id settles
// with its hits_addend (the usage); the id entry is never part of the counter's key.
TEST_F(Rls, AReservationRuleReservesThenSettlesByRequestId) {
  load("domain: ai\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 1000}\n"
       "    reservation: {id_key: request_id, ttl_ms: 600000}\n");
  auto start = request("ai", {{{"user", "alice"}, {"request_id", "r-1"}}});
  start.mutable_descriptors(0)->mutable_hits_addend()->set_value(300);  // the estimate
  EXPECT_EQ(call(start).statuses(0).limit_remaining(), 700u);
  auto done = request("ai", {{{"user", "alice"}, {"request_id", "r-1"}}});
  done.mutable_descriptors(0)->mutable_hits_addend()->set_value(120);  // the usage at stream end
  const Response settled = call(done);
  EXPECT_EQ(settled.overall_code(), Response::OK);
  EXPECT_EQ(settled.statuses(0).limit_remaining(), 880u);
  // Another request of the same user counts on the same counter: the id is not in the key.
  auto other = request("ai", {{{"user", "alice"}, {"request_id", "r-2"}}});
  other.mutable_descriptors(0)->mutable_hits_addend()->set_value(880);
  EXPECT_EQ(call(other).statuses(0).limit_remaining(), 0u);
  auto third = request("ai", {{{"user", "alice"}, {"request_id", "r-3"}}});
  third.mutable_descriptors(0)->mutable_hits_addend()->set_value(1);
  EXPECT_EQ(call(third).overall_code(), Response::OVER_LIMIT);
  // A usage of 0 at stream end gives the whole estimate back.
  auto nothing = request("ai", {{{"user", "alice"}, {"request_id", "r-2"}}});
  nothing.mutable_descriptors(0)->mutable_hits_addend()->set_value(0);
  EXPECT_EQ(call(nothing).statuses(0).limit_remaining(), 880u);
  // Without the id entry the rule is a plain rate limit.
  EXPECT_EQ(call(request("ai", {{{"user", "bob"}}}, 5)).statuses(0).limit_remaining(), 995u);
}

// examples/envoy/token-budget as its Envoy calls it: each request reserves its estimate and takes a
// slot (two descriptors of one call), the stream-done call settles the usage and frees the slot;
// a fifth request in progress is refused and reserves nothing.
TEST_F(Rls, TheTokenBudgetExampleReservesSettlesAndBoundsRequestsInProgress) {
  std::ifstream in(FLOODGATE_SOURCE_DIR "/examples/envoy/token-budget/rules/ai.yaml");
  ASSERT_TRUE(in) << "examples/envoy/token-budget/rules/ai.yaml";
  load(std::string(std::istreambuf_iterator<char>(in), {}));
  auto main = load_config(FLOODGATE_SOURCE_DIR "/examples/envoy/token-budget/floodgate.yaml");
  ASSERT_TRUE(main.ok()) << main.status();
  EXPECT_EQ(main->rls.config_dir, FLOODGATE_SOURCE_DIR "/examples/envoy/token-budget/rules");
  const auto call_of = [](const std::string& id, std::uint32_t tokens) {
    auto r = request("ai", {{{"user", "alice"}, {"request_id", id}}, {{"user_inflight", "alice"}, {"request_id", id}}});
    r.mutable_descriptors(0)->mutable_hits_addend()->set_value(tokens);
    return r;
  };
  for (int i = 0; i < 4; ++i) {
    const Response start = call(call_of("r" + std::to_string(i), 2000));  // the default estimate
    ASSERT_EQ(start.overall_code(), Response::OK);
    EXPECT_EQ(start.statuses(0).limit_remaining(), 100000u - 2000u * (i + 1));
  }
  const Response fifth = call(call_of("r4", 2000));
  EXPECT_EQ(fifth.overall_code(), Response::OVER_LIMIT) << "4 in progress at once";
  EXPECT_EQ(fifth.statuses(1).code(), Response::OVER_LIMIT);
  // The stream ends: 130 tokens used; the slot is free again, and the budget shows the usage.
  const Response done = call(call_of("r0", 130));
  EXPECT_EQ(done.overall_code(), Response::OK);
  EXPECT_EQ(done.statuses(0).limit_remaining(), 100000u - 3 * 2000u - 130u);
  const Response again = call(call_of("r5", 2000));
  EXPECT_EQ(again.overall_code(), Response::OK);
  EXPECT_EQ(again.statuses(0).limit_remaining(), 100000u - 4 * 2000u - 130u) << "the fifth reserved nothing";
}

// Five concurrent requests of 130 tokens against 100 tokens per minute: charged at the end of the
// stream (the usual configuration: hits_addend 0 at the start, the usage at the end) all five start
// and 650 tokens are used; reserved at an estimate of 100, one starts and 130 are used.
TEST_F(Rls, TokenAllowanceHoldsWithReservations) {
  load("domain: ai\ndescriptors:\n  - key: post\n    rate_limit: {unit: minute, requests_per_unit: 100}\n"
       "  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 100}\n"
       "    reservation: {id_key: request_id}\n");
  int started = 0;
  for (int i = 0; i < 5; ++i) {
    auto check = request("ai", {{{"post", "alice"}}});
    check.mutable_descriptors(0)->mutable_hits_addend()->set_value(0);  // 0 means 1 as envoyproxy: a check
    started += call(check).overall_code() == Response::OK ? 1 : 0;
  }
  EXPECT_EQ(started, 5);
  std::int64_t used_after = 0;
  for (int i = 0; i < started; ++i) {
    auto charge = request("ai", {{{"post", "alice"}}});
    charge.mutable_descriptors(0)->mutable_hits_addend()->set_value(130);
    call(charge);
    used_after += 130;
  }
  EXPECT_EQ(used_after, 650);
  std::vector<std::string> admitted_ids;
  for (int i = 0; i < 5; ++i) {
    auto start = request("ai", {{{"user", "alice"}, {"request_id", "req-" + std::to_string(i)}}});
    start.mutable_descriptors(0)->mutable_hits_addend()->set_value(100);
    if (call(start).overall_code() == Response::OK) admitted_ids.push_back("req-" + std::to_string(i));
  }
  ASSERT_EQ(admitted_ids.size(), 1u);
  auto done = request("ai", {{{"user", "alice"}, {"request_id", admitted_ids[0]}}});
  done.mutable_descriptors(0)->mutable_hits_addend()->set_value(130);
  EXPECT_EQ(call(done).statuses(0).limit_remaining(), 0u);
  auto next = request("ai", {{{"user", "alice"}, {"request_id", "late"}}});
  next.mutable_descriptors(0)->mutable_hits_addend()->set_value(1);
  EXPECT_EQ(call(next).overall_code(), Response::OVER_LIMIT);  // the 30 over are paid before more starts
}

// A concurrency rule with stock Envoy: the request-time call with the request's id takes a lease,
// the stream-done call with the same id releases it whatever its hits_addend; sent again it frees
// nothing more. Beside a rate limit of the same request, all or nothing.
TEST_F(Rls, AConcurrencyRuleTakesAndReleasesLeases) {
  load("domain: ai\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: concurrency}\n"
       "    reservation: {id_key: request_id}\n"
       "  - key: tenant\n    rate_limit: {unit: minute, requests_per_unit: 3}\n");
  const auto start = [&](const std::string& id) {
    return call(request("ai", {{{"user", "alice"}, {"request_id", id}}, {{"tenant", "acme"}}}));
  };
  EXPECT_EQ(start("r-1").overall_code(), Response::OK);
  EXPECT_EQ(start("r-2").overall_code(), Response::OK);
  const Response full = start("r-3");
  EXPECT_EQ(full.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(full.statuses(0).code(), Response::OVER_LIMIT);
  EXPECT_EQ(full.statuses(1).limit_remaining(), 1u) << "a request denied by the lease charges no rate";
  const auto done = [&](const std::string& id) {
    auto r = request("ai", {{{"user", "alice"}, {"request_id", id}}});
    r.mutable_descriptors(0)->mutable_hits_addend()->set_value(7);
    return call(r);
  };
  EXPECT_EQ(done("r-1").statuses(0).limit_remaining(), 1u);
  EXPECT_EQ(done("r-1").statuses(0).limit_remaining(), 1u) << "sent again: nothing more freed";
  EXPECT_EQ(start("r-4").overall_code(), Response::OK);
  EXPECT_EQ(done("r-2").statuses(0).limit_remaining(), 1u);
  const Response rate = start("r-5");
  EXPECT_EQ(rate.overall_code(), Response::OVER_LIMIT) << "the tenant's 3 per minute";
  EXPECT_EQ(rate.statuses(1).code(), Response::OVER_LIMIT);
  EXPECT_EQ(rate.statuses(0).limit_remaining(), 1u) << "a request denied by the rate takes no lease";
}

TEST_F(Rls, AConcurrencyRuleNeedsAReservation) {
  const absl::Status s = parse("domain: ai\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: concurrency}\n");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("reservation"), std::string_view::npos) << s;
}

// A billing month in Europe/Berlin anchored on the 31st: the rule resets at Mar 31 00:00 +02
// (22:00 UTC), and duration_until_reset is the time to the real period start, 30 days for the
// period to Apr 30 (more than an hour past the unit's nominal 30 days would be clamped).
TEST_F(Rls, CalendarMonthResetsOnTheBillingDay) {
  load("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: month, requests_per_unit: 2, "
       "calendar: {time_zone: Europe/Berlin, anchor_day: 31}}\n");
  clock_->set(1'806'440'400 * kMicrosPerSecond);  // 2027-03-30T21:00:00Z, 23:00 local
  const auto r = request("d", {{{"k", "tenant"}}});
  EXPECT_EQ(admitted(r), 2);
  const Response denied = call(r);
  EXPECT_EQ(denied.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(denied.statuses(0).duration_until_reset().seconds(), 3600);
  EXPECT_EQ(denied.statuses(0).current_limit().unit(), Response::RateLimit::MONTH);
  clock_->advance(3600 * kMicrosPerSecond);
  const Response next = call(r);
  EXPECT_EQ(next.overall_code(), Response::OK);
  EXPECT_EQ(next.statuses(0).duration_until_reset().seconds(), 30 * 86'400);
  // Apr 30 → May 31 is 31 days: reported in full, not clamped to the unit's 30.
  clock_->set(1'809'036'000 * kMicrosPerSecond);  // 2027-04-29T22:00:00Z, Apr 30 00:00 local
  const Response may = call(r);
  EXPECT_EQ(may.statuses(0).duration_until_reset().seconds(), 31 * 86'400) << may.DebugString();
}

TEST_F(Rls, LimitOverrideIsHonouredWithItsOwnState) {
  load("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 100}\n");
  auto r = request("d", {{{"k", "a"}}});
  auto* limit = r.mutable_descriptors(0)->mutable_limit();
  limit->set_requests_per_unit(2);
  limit->set_unit(::envoy::type::v3::SECOND);
  EXPECT_EQ(admitted(r), 2);
  const Response over = call(r);
  EXPECT_EQ(over.statuses(0).current_limit().requests_per_unit(), 2u);
  EXPECT_EQ(over.statuses(0).current_limit().unit(), Response::RateLimit::SECOND);
  // The configured limit's state is untouched.
  EXPECT_EQ(call(request("d", {{{"k", "a"}}})).statuses(0).limit_remaining(), 99u);
  // An override applies in a known domain even where no rule matches (as envoyproxy).
  auto unmatched = request("d", {{{"other", "x"}}});
  unmatched.mutable_descriptors(0)->mutable_limit()->set_requests_per_unit(1);
  unmatched.mutable_descriptors(0)->mutable_limit()->set_unit(::envoy::type::v3::MINUTE);
  EXPECT_EQ(admitted(unmatched), 1);
}

TEST_F(Rls, AnOverrideIsEnforcedEvenOnAShadowModeRule) {
  load("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n"
       "    shadow_mode: true\n");
  const auto shadowed = request("d", {{{"k", "a"}}});
  EXPECT_EQ(admitted(shadowed, 3), 3);
  auto r = request("d", {{{"k", "b"}}});
  r.mutable_descriptors(0)->mutable_limit()->set_requests_per_unit(2);
  r.mutable_descriptors(0)->mutable_limit()->set_unit(::envoy::type::v3::MINUTE);
  EXPECT_EQ(admitted(r), 2);
}

TEST_F(Rls, RemainingSaturatesAtUint32Max) {
  load("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 4294967295, "
       "algorithm: token-bucket, burst: 100000000000}\n");
  EXPECT_EQ(call(request("d", {{{"k", "a"}}})).statuses(0).limit_remaining(),
            std::numeric_limits<std::uint32_t>::max());
}

// Envoy reads requests_per_unit as X-RateLimit-Limit and limit_remaining as -Remaining: a bucket
// whose burst is above its rate still reports remaining ≤ the limit (49 before the clamp).
TEST_F(Rls, RemainingNeverExceedsRequestsPerUnitWithABurst) {
  load("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 10, "
       "algorithm: token-bucket, burst: 50}\n");
  const auto r = request("d", {{{"k", "a"}}});
  EXPECT_EQ(call(r).statuses(0).limit_remaining(), 10u);
  for (int i = 0; i < 44; ++i) ASSERT_EQ(call(r).statuses(0).code(), Response::OK);
  EXPECT_EQ(call(r).statuses(0).limit_remaining(), 4u);  // 46 taken of 50
}

TEST_F(Rls, AnyAlgorithm) {
  // GCRA 2/second: two at once, then one more every 500 ms (a fixed window would wait 1 s).
  load("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 2, algorithm: gcra}\n");
  const auto r = request("d", {{{"k", "a"}}});
  EXPECT_EQ(admitted(r), 2);
  clock_->advance(500'000);
  EXPECT_EQ(admitted(r), 1);
}

TEST_F(Rls, UnknownDomainIsOk) {
  load("domain: d\n");
  const Response r = call(request("elsewhere", {{{"k", "a"}}}));
  EXPECT_EQ(r.overall_code(), Response::OK);
  ASSERT_EQ(r.statuses_size(), 1);
  EXPECT_FALSE(r.statuses(0).has_current_limit());
}

TEST_F(Rls, InvalidRequests) {
  RlsSettings caps;
  caps.max_descriptors = 2;
  caps.max_entries = 2;
  caps.max_string_bytes = 8;
  caps.max_message_bytes = 200;
  load("domain: d\n", caps);
  auto expect_invalid = [&](const rlsv3::RateLimitRequest& r, const std::string& message) {
    const grpc::Status s = status_of(r);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(s.error_message(), message);
  };
  expect_invalid(request("", {{{"k", "a"}}}), "the domain is empty");
  expect_invalid(request("d", {}), "the request has no descriptors");
  expect_invalid(request("d", {{{"k", "a"}}, {{"k", "b"}}, {{"k", "c"}}}), "the request has more than 2 descriptors");
  expect_invalid(request("d", {{{"a", "1"}, {"b", "2"}, {"c", "3"}}}), "descriptor 0 has more than 2 entries");
  expect_invalid(request("d", {{{"k", "123456789"}}}), "descriptor 0 has a key or value longer than 8 bytes");
  expect_invalid(request("d", {{{"", "a"}}}), "descriptor 0 has an entry with an empty key");
  expect_invalid(request("d", {{}}), "descriptor 0 has no entries");
  expect_invalid(request("domain-too-long", {{{"k", "a"}}}), "the domain is longer than 8 bytes");
  // NUL is refused wherever it could reach a lookup key or a metric name (the rule files refuse it).
  expect_invalid(request(std::string("d\0x", 3), {{{"k", "a"}}}), "the domain has a NUL byte");
  expect_invalid(request("d", {{{std::string("k\0", 2), "a"}}}), "descriptor 0 has a NUL byte in a key or value");
  expect_invalid(request("d", {{{"k", "a"}}, {{"k", std::string("\0a", 2)}}}),
                 "descriptor 1 has a NUL byte in a key or value");
  const auto big = request("d", {{{"k", std::string(8, 'v')}}});  // 18 bytes serialized
  caps.max_message_bytes = 10;
  load("domain: d\n", caps);
  expect_invalid(big, "the request is larger than 10 bytes");
}

TEST_F(Rls, ResponseHeadersOnlyWhenAsked) {
  const char* yaml = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 2}\n";
  load(yaml);
  EXPECT_EQ(call(request("d", {{{"k", "a"}}})).response_headers_to_add_size(), 0);
  RlsSettings with;
  with.response_headers = true;
  load(yaml, with);
  const auto r = request("d", {{{"k", "a"}}});
  call(r);
  call(r);
  const Response over = call(r);
  std::map<std::string, std::string> h;
  for (const auto& kv : over.response_headers_to_add()) h[kv.key()] = kv.value();
  EXPECT_EQ(h["X-RateLimit-Limit"], "2");
  EXPECT_EQ(h["X-RateLimit-Remaining"], "0");
  EXPECT_EQ(h["X-RateLimit-Reset"], "50");
  EXPECT_EQ(h["RateLimit"], "\"d/k\";r=0;t=50");
  EXPECT_EQ(h["Retry-After"], "50");
}

TEST_F(Rls, MultiDescriptorRequestsAreAllOrNothingUnderContention) {
  // The memory store, no batching: 4 threads race two-descriptor requests (a shared "k" and a
  // per-thread "g") against single-descriptor ones on "k". A request denied on either descriptor
  // must charge neither, so "k" admits exactly its 50, counted as OK answers.
  load("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 50}\n"
       "  - key: g\n    rate_limit: {unit: hour, requests_per_unit: 1000}\n");
  std::atomic<int> ok{0};
  std::array<int, 4> pairs_ok{};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const auto single = request("d", {{{"k", "a"}}});
      const auto pair = request("d", {{{"k", "a"}}, {{"g", std::to_string(t)}}});
      for (int i = 0; i < 200; ++i) {
        Response out;
        ASSERT_TRUE(service_->should_rate_limit(i % 2 == 0 ? pair : single, out).ok());
        if (out.overall_code() == Response::OK) {
          ok++;
          if (i % 2 == 0) pairs_ok[static_cast<std::size_t>(t)]++;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 50);
  // Each thread's "g" was charged by its admitted pairs only (one more call charges it once more).
  for (int t = 0; t < 4; ++t) {
    const Response r = call(request("d", {{{"g", std::to_string(t)}}}));
    EXPECT_EQ(r.statuses(0).limit_remaining(),
              static_cast<std::uint32_t>(1000 - pairs_ok[static_cast<std::size_t>(t)] - 1))
        << "thread " << t;
  }
}

TEST_F(Rls, BatchedOnStorageThreadsWithExactTotals) {
  RlsSettings batched;
  batched.batching = true;
  load("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 50}\n"
       "  - key: g\n    rate_limit: {unit: minute, requests_per_unit: 30}\n",
       batched);
  // 4 threads × 40 calls: single-descriptor calls (batched together) and two-descriptor calls
  // (one group call each) on the same keys.
  std::atomic<int> ok{0}, over{0}, answered{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i) {
        auto r = std::make_shared<rlsv3::RateLimitRequest>(
            t % 2 == 0 ? request("d", {{{"k", "a"}}}) : request("d", {{{"k", "a"}}, {{"g", "b"}}}));
        auto out = std::make_shared<Response>();
        std::promise<void> finished;
        service_->should_rate_limit_async(*r, *out, [&, out, &finished = finished](grpc::Status s) {
          EXPECT_TRUE(s.ok());
          (out->overall_code() == Response::OK ? ok : over)++;
          answered++;
          finished.set_value();
        });
        finished.get_future().wait();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(answered.load(), 160);
  EXPECT_EQ(ok.load(), 50);  // the "k" limit admits exactly 50, whoever asks
  EXPECT_EQ(over.load(), 110);
  // An invalid request is answered at once, on the caller's thread.
  Response out;
  bool called = false;
  service_->should_rate_limit_async(request("", {{{"k", "a"}}}), out, [&](grpc::Status s) {
    called = true;
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  });
  EXPECT_TRUE(called);
}

TEST_F(Rls, StorageFailureFollowsTheFailMode) {
  load("domain: d\ndescriptors:\n"
       "  - key: open\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"
       "  - key: closed\n    rate_limit: {unit: minute, requests_per_unit: 2, fail: closed}\n",
       {}, std::make_shared<FailingStorage>());
  const Response open = call(request("d", {{{"open", "a"}}}));
  EXPECT_EQ(open.overall_code(), Response::OK);
  const Response closed = call(request("d", {{{"closed", "a"}}}));
  EXPECT_EQ(closed.overall_code(), Response::OVER_LIMIT);
  // Envoy answers OVER_LIMIT with its filter's status: a header tells the client it was an outage.
  std::map<std::string, std::string> h;
  for (const auto& kv : closed.response_headers_to_add()) h[kv.key()] = kv.value();
  EXPECT_EQ(h["X-Floodgate-Outage"], "storage-unavailable");
  for (const auto& kv : open.response_headers_to_add()) EXPECT_NE(kv.key(), "X-Floodgate-Outage");
  const auto slot = service_->metrics().slot("d", "closed");
  EXPECT_EQ(service_->metrics().get(*slot, RlsMetrics::kDegraded), 1u);
}

// A request the storage refuses as invalid (e.g. a period the Redis scripts cannot keep exactly) is
// INVALID_ARGUMENT for the caller, never a fail-mode decision: the pipeline's rule, as for HTTP.
TEST_F(Rls, AnInvalidArgumentFromTheStorageIsInvalidArgumentNotTheFailMode) {
  load("domain: d\ndescriptors:\n"
       "  - key: open\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"
       "  - key: other\n    rate_limit: {unit: minute, requests_per_unit: 2}\n",
       {}, std::make_shared<FailingStorage>(absl::InvalidArgumentError("period too long for this storage")));
  for (const auto& r : {request("d", {{{"open", "a"}}}), request("d", {{{"open", "a"}}, {{"other", "b"}}})}) {
    const grpc::Status s = status_of(r);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(s.error_message(), "period too long for this storage");
  }
  const auto slot = service_->metrics().slot("d", "open");
  EXPECT_EQ(service_->metrics().get(*slot, RlsMetrics::kDegraded), 0u);
}


// A limit override picks a moving-window rule's amount, and so how long its logs may grow: past
// the memory store's bound on request-made logs the call is RESOURCE_EXHAUSTED naming the bound,
// not a fail-mode decision; the configured rule's own logs keep their room.
TEST_F(Rls, AnOverrideFloodingAMovingWindowIsResourceExhausted) {
  MemoryStorageOptions o;
  o.max_request_log_bytes = 1024;  // 64 entries
  load("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 10, algorithm: moving-window}\n",
       {}, std::make_shared<MemoryStorage>(o));
  auto r = request("d", {{{"k", "a"}}});
  r.mutable_descriptors(0)->mutable_limit()->set_requests_per_unit(1'000'000'000);
  r.mutable_descriptors(0)->mutable_limit()->set_unit(::envoy::type::v3::HOUR);
  int ok = 0;
  grpc::Status s;
  for (; ok < 1000; ++ok, clock_->advance(1)) {
    s = status_of(r);
    if (!s.ok()) break;
  }
  EXPECT_EQ(ok, 64);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_NE(s.error_message().find("max_request_log_bytes"), std::string::npos) << s.error_message();
  EXPECT_EQ(admitted(request("d", {{{"k", "a"}}})), 10) << "the rule's own log";
  const auto slot = service_->metrics().slot("d", "k");
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(service_->metrics().get(*slot, RlsMetrics::kDegraded), 0u);
}

}  // namespace
}  // namespace floodgate::server
