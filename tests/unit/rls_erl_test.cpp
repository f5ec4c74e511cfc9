// Every rule-file key of current envoyproxy/ratelimit with its meaning: share_threshold,
// value_to_metric, detailed_metric, metadata, quota_mode, unlimited beside a limit, a unit without
// requests_per_unit, wildcards anywhere in a value, domain merging and the files it refuses.
#include <map>

#include <gtest/gtest.h>

#include "floodgate/memory_storage.hpp"
#include "server/rls/service.hpp"
#include "server/common/prometheus.hpp"
#include "server/rls/rules.hpp"
#include "support/rls_request.hpp"

namespace floodgate::server {
namespace {

using Response = rlsv3::RateLimitResponse;
using Entries = testing::RlsEntries;

absl::Status parse(const std::string& yaml) {
  RlsConfig c;
  return parse_rls_file(yaml, "rules.yaml", c);
}

// ---- wildcards ----------------------------------------------------------------------------------

bool fits(const std::string& pattern, std::string_view value) {
  std::vector<std::string> parts;
  std::size_t from = 0;
  for (std::size_t star; (star = pattern.find('*', from)) != std::string::npos; from = star + 1) {
    parts.push_back(pattern.substr(from, star - from));
  }
  parts.push_back(pattern.substr(from));
  return rls_wildcard_match(parts, value);
}

TEST(RlsWildcard, AStarAnywhereStandsForAnyRunOfBytes) {
  EXPECT_TRUE(fits("img*", "img"));
  EXPECT_TRUE(fits("img*", "img/cat.png"));
  EXPECT_FALSE(fits("img*", "im"));
  EXPECT_TRUE(fits("/v2*users", "/v2/users"));
  EXPECT_TRUE(fits("/v2*users", "/v2users"));
  EXPECT_FALSE(fits("/v2*users", "/v2/users/7"));
  EXPECT_TRUE(fits("*.png", "a.png"));
  EXPECT_FALSE(fits("*.png", "a.jpg"));
  EXPECT_TRUE(fits("grp*op*call", "grp-a-op-b-call"));
  EXPECT_TRUE(fits("grp*op*call", "grpopcall"));
  EXPECT_FALSE(fits("grp*op*call", "grp-call-op"));
  EXPECT_FALSE(fits("xy*yx", "xyx"));  // the ends may not overlap
  EXPECT_TRUE(fits("a*b*b", "abb"));
  EXPECT_FALSE(fits("a*b*b", "ab"));
  EXPECT_TRUE(fits("**", ""));
}

// ---- the loader ---------------------------------------------------------------------------------

TEST(RlsErlConfig, AcceptsEveryKeyOfCurrentEnvoyproxy) {
  RlsConfig c;
  const absl::Status s = parse_rls_file(R"(
domain: all_keys
descriptors:
  - key: path
    value: "/img*"
    share_threshold: true
    value_to_metric: true
    quota_mode: true
    shadow_mode: false
    detailed_metric: false
    metadata: {team: media, tier: 2, paid: true, tags: [a, b], owner: {name: x}}
    rate_limit: {name: images, replaces: [{name: other}], unit: minute, requests_per_unit: 9}
  - key: free
    rate_limit: {unlimited: true, requests_per_unit: 50}
  - key: blocked
    rate_limit: {unit: hour}
  - key: empty_value
    value: ""
    rate_limit: {unit: second, requests_per_unit: 1}
)", "all.yaml", c);
  ASSERT_TRUE(s.ok()) << s;
  const RlsDomain& d = *c.find("all_keys");
  const RlsNode& img = *d.root.children.at(rls_child_key("path", "/img*"));
  EXPECT_TRUE(img.share_threshold);
  EXPECT_TRUE(img.value_to_metric);
  EXPECT_TRUE(img.rule->quota_mode);
  EXPECT_TRUE(img.rule->walk);
  ASSERT_NE(img.rule->metadata, nullptr);
  ASSERT_EQ(img.rule->metadata->names.size(), 5u);
  EXPECT_EQ(img.rule->metadata->items[1].kind, RlsMeta::Kind::kNumber);
  EXPECT_EQ(img.rule->metadata->items[2].kind, RlsMeta::Kind::kBool);
  EXPECT_EQ(img.rule->metadata->items[3].items.size(), 2u);
  EXPECT_TRUE(d.root.children.at(rls_default_key("free"))->rule->unlimited);
  const RlsRule& blocked = *d.root.children.at(rls_default_key("blocked"))->rule;
  EXPECT_EQ(blocked.requests_per_unit, 0u);  // a unit alone: every request is over
  EXPECT_EQ(blocked.unit, RlsUnit::kHour);
  EXPECT_EQ(blocked.policy, nullptr);
  // An empty value is no value: the key-only default.
  EXPECT_TRUE(d.root.children.contains(rls_default_key("empty_value")));
}

struct Refused {
  const char* yaml;
  const char* message;
};
class RlsErlRefusals : public ::testing::TestWithParam<Refused> {};

TEST_P(RlsErlRefusals, AsEnvoyproxyRefusesTheFile) {
  const absl::Status s = parse(GetParam().yaml);
  ASSERT_FALSE(s.ok()) << GetParam().yaml;
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(s.message()), GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Erl, RlsErlRefusals,
    ::testing::Values(
        Refused{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {name: me, unit: second, requests_per_unit: 1, "
                "replaces: [{name: me}]}\n",
                "rules.yaml:4:74: the rate_limit of \"k\": replaces names the rule itself (\"me\")"},
        Refused{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, "
                "replaces: [{name: \"\"}]}\n",
                "rules.yaml:4:65: the rate_limit of \"k\": a replaces name is empty"},
        // `- name:` with nothing after it (envoyproxy's test/config/replaces_empty.yaml does this).
        Refused{"domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n"
                "      replaces:\n        - name:\n",
                "rules.yaml:8:11: the rate_limit of \"k\": a replaces name is empty"},
        Refused{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: minute, "
                "requests_per_unit: 5}\n",
                "rules.yaml:4:41: the rate_limit of \"k\": unlimited takes no unit"},
        Refused{"domain: d\ndescriptors:\n  - key: k\n    value: v\n    share_threshold: true\n",
                "rules.yaml:5:22: share_threshold needs a wildcard value (with '*'), and \"k_v\" has none"},
        Refused{"domain: d\ndescriptors:\n  - key: \"\"\n", "rules.yaml:3:10: a descriptor key is empty"},
        Refused{"domain: d\ndescriptors:\n  - key: k\n    value: \"v*\"\n  - key: k\n    value: \"v*\"\n",
                "rules.yaml:5:5: duplicate descriptor \"k_v*\" in domain \"d\""},
        Refused{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: sec, requests_per_unit: 1}\n",
                "rules.yaml:4:24: the rate_limit of \"k\": invalid unit \"sec\" (second, minute, hour, day, week, "
                "month, year)"},
        Refused{"domain: d\ndescriptors:\n  - key: k\n    share_treshold: true\n",
                "rules.yaml:4:5: unknown key \"share_treshold\" in a descriptor (known: key, value, rate_limit, "
                "descriptors, shadow_mode, quota_mode, detailed_metric, value_to_metric, share_threshold, "
                "metadata, reservation)"},
        Refused{"domain: d\ndescriptors:\n  - key: k\n    metadata: [a]\n", "rules.yaml:4:15: metadata must be a map"},
        Refused{"domain: d\ndescriptors:\n  - key: [k]\n",
                "rules.yaml:3:10: key must be a single value"},
        Refused{"domain: d\ndescriptors:\n  - k\n", "rules.yaml:3:5: a descriptor must be a map with a key"}));

TEST(RlsErlConfig, MergesADomainAcrossFilesOnlyWhenAsked) {
  auto separate = load_rls_config(FLOODGATE_RLS_MERGE_DIR);
  ASSERT_FALSE(separate.ok());
  EXPECT_NE(separate.status().message().find("domain \"shop\" is already defined in"), std::string_view::npos);
  auto merged = load_rls_config(FLOODGATE_RLS_MERGE_DIR, /*merge=*/true);
  ASSERT_TRUE(merged.ok()) << merged.status();
  const RlsDomain& shop = *(*merged)->find("shop");
  EXPECT_EQ(shop.root.children.at(rls_child_key("tenant", "alpha"))->rule->requests_per_unit, 2u);
  EXPECT_EQ(shop.root.children.at(rls_child_key("tenant", "beta"))->rule->requests_per_unit, 3u);
  // A descriptor defined by both files is still a duplicate.
  RlsConfig c;
  ASSERT_TRUE(parse_rls_file("domain: d\ndescriptors: [{key: k}]\n", "1.yaml", c, true).ok());
  const absl::Status dup = parse_rls_file("domain: d\ndescriptors: [{key: k}]\n", "2.yaml", c, true);
  EXPECT_EQ(dup.message(), "2.yaml:2:15: duplicate descriptor \"k\" in domain \"d\"");
}

// ---- the decisions ------------------------------------------------------------------------------

class RlsErl : public ::testing::Test {
 protected:
  static constexpr Micros kStart = 1'700'000'040 * kMicrosPerSecond + 10 * kMicrosPerSecond;

  void load(const std::string& yaml, RlsSettings limits = {}) {
    auto c = std::make_shared<RlsConfig>();
    const absl::Status s = parse_rls_file(yaml, "test.yaml", *c);
    ASSERT_TRUE(s.ok()) << s;
    service_ = std::make_unique<RlsService>(std::make_shared<MemoryStorage>(), clock_, limits);
    service_->reload(c);
  }
  static rlsv3::RateLimitRequest request(const std::vector<Entries>& descriptors) {
    return testing::rls_request("d", descriptors);
  }
  Response call(const std::vector<Entries>& descriptors) {
    Response out;
    const grpc::Status s = service_->should_rate_limit(request(descriptors), out);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return out;
  }
  int admitted(const Entries& entries, int max = 100) {
    for (int i = 0; i < max; ++i) {
      if (call({entries}).overall_code() != Response::OK) return i;
    }
    return max;
  }
  // The series as Prometheus scrapes it (a rule's own series or a detailed one alike).
  std::uint64_t hits(const std::string& label) {
    PromText out;
    service_->metrics().render(out);
    const std::string text = out.take();
    const std::string sample = "floodgate_rls_total_hits_total{domain=\"d\",rule=\"" + label + "\"} ";
    const std::size_t at = text.find(sample);
    return at == std::string::npos ? 0 : std::stoull(text.substr(at + sample.size()));
  }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(kStart);
  std::unique_ptr<RlsService> service_;
};

TEST_F(RlsErl, ExactBeatsTheFirstFittingWildcardWhichBeatsTheDefault) {
  load(R"(
domain: d
descriptors:
  - {key: route, value: "/v2*users", rate_limit: {unit: minute, requests_per_unit: 1}}
  - {key: route, value: "/v2*", rate_limit: {unit: minute, requests_per_unit: 2}}
  - {key: route, value: "/v2/users", rate_limit: {unit: minute, requests_per_unit: 3}}
  - {key: route, rate_limit: {unit: minute, requests_per_unit: 4}}
)");
  EXPECT_EQ(admitted({{"route", "/v2/users"}}), 3);
  EXPECT_EQ(admitted({{"route", "/v2/x/users"}}), 1);
  EXPECT_EQ(admitted({{"route", "/v2/x/orders"}}), 2);
  EXPECT_EQ(admitted({{"route", "/v1"}}), 4);
}

TEST_F(RlsErl, ShareThresholdCountsEveryMatchInOneState) {
  load(R"(
domain: d
descriptors:
  - {key: doc, value: "docs/*", share_threshold: true, rate_limit: {unit: minute, requests_per_unit: 3}}
  - {key: img, value: "img/*", rate_limit: {unit: minute, requests_per_unit: 3}}
  - key: svc
    value: "s*prod"
    share_threshold: true
    descriptors:
      - key: op
        value: "get*"
        share_threshold: true
        descriptors:
          - {key: user, rate_limit: {unit: minute, requests_per_unit: 2}}
)");
  EXPECT_EQ(admitted({{"doc", "docs/a.pdf"}}, 2), 2);
  EXPECT_EQ(admitted({{"doc", "docs/b.csv"}}), 1);  // one counter for the pattern
  EXPECT_EQ(admitted({{"img", "img/a.png"}}), 3);   // without it: one each
  EXPECT_EQ(admitted({{"img", "img/b.png"}}), 3);
  // Nested wildcards, both shared: one counter per user across services and operations.
  EXPECT_EQ(admitted({{"svc", "s1prod"}, {"op", "getA"}, {"user", "u"}}, 1), 1);
  EXPECT_EQ(admitted({{"svc", "s2prod"}, {"op", "getB"}, {"user", "u"}}), 1);
  EXPECT_EQ(admitted({{"svc", "s3prod"}, {"op", "get"}, {"user", "v"}}), 2);
  // Metrics name the pattern, once.
  EXPECT_EQ(hits("doc_docs/*"), 4u);
  EXPECT_EQ(hits("svc_s*prod.op_get*.user"), 6u);
}

TEST_F(RlsErl, ValueToMetricAndDetailedMetricNameTheSeries) {
  load(R"(
domain: d
descriptors:
  - key: method
    value_to_metric: true
    descriptors:
      - {key: path, value: "/api*", value_to_metric: true, rate_limit: {unit: minute, requests_per_unit: 9}}
      - {key: user, rate_limit: {unit: minute, requests_per_unit: 9}}
  - {key: client, detailed_metric: true, rate_limit: {unit: minute, requests_per_unit: 9}}
  - {key: plain, rate_limit: {unit: minute, requests_per_unit: 9}}
)");
  call({{{"method", "GET"}, {"path", "/api/x"}}});
  call({{{"method", "GET"}, {"user", "bob"}}});
  call({{{"client", "c1"}}});
  call({{{"plain", "p1"}}});
  EXPECT_EQ(hits("method_GET.path_/api/x"), 1u);
  EXPECT_EQ(hits("method_GET.user"), 1u);
  EXPECT_EQ(hits("client_c1"), 1u);
  EXPECT_EQ(hits("plain"), 1u);
  EXPECT_EQ(hits("method.user"), 0u);
}

TEST_F(RlsErl, QuotaModeRefusesOnlyWhenEveryQuotaIsOver) {
  load(R"(
domain: d
descriptors:
  - {key: q1, quota_mode: true, rate_limit: {unit: minute, requests_per_unit: 1}}
  - {key: q2, quota_mode: true, rate_limit: {unit: minute, requests_per_unit: 2}}
  - {key: r, rate_limit: {unit: minute, requests_per_unit: 1}}
)");
  EXPECT_EQ(call({{{"q1", "a"}}, {{"q2", "a"}}}).overall_code(), Response::OK);
  const Response one_over = call({{{"q1", "a"}}, {{"q2", "a"}}});
  EXPECT_EQ(one_over.overall_code(), Response::OK);
  EXPECT_EQ(one_over.statuses(0).code(), Response::OVER_LIMIT);
  EXPECT_EQ(one_over.statuses(1).code(), Response::OK);
  EXPECT_EQ(call({{{"q1", "a"}}, {{"q2", "a"}}}).overall_code(), Response::OVER_LIMIT);
  // An ordinary descriptor over its limit refuses whatever the quotas say.
  EXPECT_EQ(call({{{"r", "a"}}}).overall_code(), Response::OK);
  EXPECT_EQ(call({{{"r", "a"}}, {{"q2", "b"}}}).overall_code(), Response::OVER_LIMIT);
}

// envoyproxy's quota pattern: a check of hits_addend 0 at the request, the usage at the stream's
// end (apply_on_stream_done, its answer unread). A quota on a fixed window counts that usage even
// past its limit, as envoyproxy's counters do, so the next check is refused.
TEST_F(RlsErl, AQuotaOnAFixedWindowCountsEveryHitAsEnvoyproxy) {
  load(R"(
domain: d
descriptors:
  - {key: q, quota_mode: true, rate_limit: {unit: minute, requests_per_unit: 2}}
  - {key: tb, quota_mode: true, rate_limit: {unit: minute, requests_per_unit: 2, algorithm: token-bucket}}
  - {key: plain, rate_limit: {unit: minute, requests_per_unit: 2}}
)");
  const auto with_hits = [&](const char* key, std::uint64_t hits) {
    auto r = request({{{key, "x"}}});
    r.mutable_descriptors(0)->mutable_hits_addend()->set_value(hits);
    Response out;
    EXPECT_TRUE(service_->should_rate_limit(r, out).ok());
    return out;
  };
  std::vector<std::string> answers;
  for (int i = 0; i < 4; ++i) {
    const Response check = with_hits("q", 0);
    answers.push_back(Response::Code_Name(check.overall_code()) + " " +
                      std::to_string(check.statuses(0).limit_remaining()));
    if (check.overall_code() == Response::OK) with_hits("q", 1);
  }
  EXPECT_EQ(answers, (std::vector<std::string>{"OK 2", "OK 1", "OK 0", "OVER_LIMIT 0"}));
  // The stream-end call past the limit was counted: 3 of 2, and a check still charges nothing.
  const Response over = with_hits("q", 0);
  EXPECT_EQ(over.statuses(0).code(), Response::OVER_LIMIT);
  EXPECT_EQ(over.statuses(0).current_limit().requests_per_unit(), 2u);
  EXPECT_EQ(over.statuses(0).duration_until_reset().seconds(), 50);  // the window's end, as before
  clock_->advance(60 * kMicrosPerSecond);  // the next window
  EXPECT_EQ(with_hits("q", 0).overall_code(), Response::OK);

  // Another algorithm, and an ordinary rule: a denied hit consumes nothing, and a check of 0
  // (which could then never be refused) counts 1.
  EXPECT_EQ(with_hits("tb", 0).statuses(0).limit_remaining(), 1u);
  EXPECT_EQ(with_hits("tb", 5).statuses(0).code(), Response::OVER_LIMIT);
  EXPECT_EQ(with_hits("tb", 1).statuses(0).limit_remaining(), 0u);
  EXPECT_EQ(with_hits("plain", 0).statuses(0).limit_remaining(), 1u);
  EXPECT_EQ(with_hits("plain", 5).overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(with_hits("plain", 1).statuses(0).limit_remaining(), 0u);
}

// multiservice-tokenquota: two services as quotas, each naming itself in its metadata; Envoy
// routes to the first that passes and charges it 1 at the stream's end.
TEST_F(RlsErl, QuotasPickTheFirstServiceWithQuotaLeft) {
  RlsSettings settings;
  settings.dynamic_metadata = true;
  settings.response_headers = true;
  load(R"(
domain: d
descriptors:
  - {key: service, value: s1, quota_mode: true, metadata: {with_quota: {name: s1}}, rate_limit: {unit: minute, requests_per_unit: 1}}
  - {key: service, value: s2, quota_mode: true, metadata: {with_quota: {name: s2}}, rate_limit: {unit: minute, requests_per_unit: 2}}
)", settings);
  std::vector<std::string> served;
  for (int i = 0; i < 6; ++i) {
    auto check = request({{{"service", "s1"}}, {{"service", "s2"}}});
    check.mutable_descriptors(0)->mutable_hits_addend()->set_value(0);
    check.mutable_descriptors(1)->mutable_hits_addend()->set_value(0);
    Response out;
    ASSERT_TRUE(service_->should_rate_limit(check, out).ok());
    std::map<std::string, std::string> headers;
    for (const auto& h : out.response_headers_to_add()) headers[h.key()] = h.value();
    if (out.overall_code() != Response::OK) {
      served.emplace_back("refused");
      EXPECT_FALSE(out.dynamic_metadata().fields().contains("metadata"));
      EXPECT_EQ(headers["Retry-After"], "50");
      continue;
    }
    // A quota over its limit beside one that passes: nothing left, but no Retry-After.
    EXPECT_FALSE(headers.contains("Retry-After")) << i;
    if (i == 2) {
      EXPECT_EQ(headers["X-RateLimit-Remaining"], "0");
    }
    const std::string name = out.dynamic_metadata().fields().at("metadata").struct_value().fields().at("with_quota")
                                 .struct_value().fields().at("name").string_value();
    served.push_back(name);
    auto done = request({{{"service", name}}});
    done.mutable_descriptors(0)->mutable_hits_addend()->set_value(1);
    Response ignored;
    ASSERT_TRUE(service_->should_rate_limit(done, ignored).ok());
  }
  EXPECT_EQ(served, (std::vector<std::string>{"s1", "s1", "s2", "s2", "s2", "refused"}));
}

TEST_F(RlsErl, UnlimitedBesideALimitAndAUnitWithoutOne) {
  load(R"(
domain: d
descriptors:
  - {key: free, rate_limit: {unlimited: true, requests_per_unit: 1}}
  - {key: blocked, rate_limit: {unit: minute}}
)");
  EXPECT_EQ(admitted({{"free", "x"}}, 20), 20);
  const Response r = call({{{"blocked", "x"}}});
  EXPECT_EQ(r.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(r.statuses(0).current_limit().requests_per_unit(), 0u);
}

TEST_F(RlsErl, MetadataOfPassingDescriptorsWhenAsked) {
  const std::string rules = R"(
domain: d
descriptors:
  - {key: a, metadata: {team: {name: one, size: 3}, on: true}, rate_limit: {unit: minute, requests_per_unit: 1}}
  - {key: b, metadata: {team: {lead: z, name: two}, tags: [x], on: false}, rate_limit: {unit: minute, requests_per_unit: 5}}
)";
  load(rules);
  EXPECT_FALSE(call({{{"a", "1"}}}).has_dynamic_metadata());
  RlsSettings limits;
  limits.dynamic_metadata = true;
  load(rules, limits);
  const Response both = call({{{"a", "1"}}, {{"b", "1"}}});
  const auto& f = both.dynamic_metadata().fields();
  EXPECT_EQ(f.at("domain").string_value(), "d");
  EXPECT_EQ(f.at("descriptors").list_value().values(1).struct_value().fields().at("entries").list_value().values(0).string_value(), "b=1");
  const auto& team = f.at("metadata").struct_value().fields().at("team").struct_value().fields();
  EXPECT_EQ(team.at("name").string_value(), "one");  // a key already set keeps the first value
  EXPECT_EQ(team.at("size").number_value(), 3);
  EXPECT_EQ(team.at("lead").string_value(), "z");  // maps merge
  EXPECT_TRUE(f.at("metadata").struct_value().fields().at("on").bool_value());
  // The other order: b's values come first.
  const Response ba = call({{{"b", "3"}}, {{"a", "3"}}});
  const auto& mba = ba.dynamic_metadata().fields().at("metadata").struct_value().fields();
  EXPECT_EQ(mba.at("team").struct_value().fields().at("name").string_value(), "two");
  EXPECT_FALSE(mba.at("on").bool_value());
  // "a" is over now: only "b"'s metadata.
  const Response one = call({{{"a", "1"}}, {{"b", "2"}}});
  const auto& m = one.dynamic_metadata().fields().at("metadata").struct_value().fields();
  EXPECT_FALSE(m.at("on").bool_value());
  EXPECT_EQ(m.at("team").struct_value().fields().at("name").string_value(), "two");
  EXPECT_EQ(m.at("tags").list_value().values(0).string_value(), "x");
}

TEST_F(RlsErl, GlobalShadowAndQuotaModes) {
  const std::string rules = R"(
domain: d
descriptors:
  - {key: a, rate_limit: {unit: minute, requests_per_unit: 1}}
  - {key: b, rate_limit: {unit: minute, requests_per_unit: 1}}
)";
  RlsSettings shadow;
  shadow.shadow_mode = true;  // SHADOW_MODE: decided and reported, never refused
  load(rules, shadow);
  call({{{"a", "1"}}});
  const Response r = call({{{"a", "1"}}});
  EXPECT_EQ(r.overall_code(), Response::OK);
  EXPECT_EQ(r.statuses(0).code(), Response::OVER_LIMIT);
  RlsSettings quota;
  quota.quota_mode = true;  // QUOTA_MODE: every rule a quota
  load(rules, quota);
  call({{{"a", "1"}}});
  EXPECT_EQ(call({{{"a", "1"}}, {{"b", "1"}}}).overall_code(), Response::OK);
  EXPECT_EQ(call({{{"a", "1"}}, {{"b", "1"}}}).overall_code(), Response::OVER_LIMIT);
  // A descriptor that matches no rule is a quota that passed, as envoyproxy counts it.
  const Response unmatched = call({{{"a", "1"}}, {{"nothing", "1"}}});
  EXPECT_EQ(unmatched.overall_code(), Response::OK);
  EXPECT_EQ(unmatched.statuses(0).code(), Response::OVER_LIMIT);
  // A request's own limit is a quota too under QUOTA_MODE: over, beside a quota that passes, it
  // does not refuse the request.
  auto with_limit = request({{{"d", "1"}}, {{"nothing", "2"}}});
  with_limit.mutable_descriptors(0)->mutable_limit()->set_requests_per_unit(1);
  with_limit.mutable_descriptors(0)->mutable_limit()->set_unit(::envoy::type::v3::MINUTE);
  Response first;
  ASSERT_TRUE(service_->should_rate_limit(with_limit, first).ok());
  EXPECT_EQ(first.statuses(0).code(), Response::OK);
  Response second;
  ASSERT_TRUE(service_->should_rate_limit(with_limit, second).ok());
  EXPECT_EQ(second.statuses(0).code(), Response::OVER_LIMIT);
  EXPECT_EQ(second.overall_code(), Response::OK);
  // Without QUOTA_MODE the same request is refused: the override is an ordinary limit.
  load(rules);
  Response again;
  ASSERT_TRUE(service_->should_rate_limit(with_limit, again).ok());
  EXPECT_EQ(again.overall_code(), Response::OK);
  Response refused;
  ASSERT_TRUE(service_->should_rate_limit(with_limit, refused).ok());
  EXPECT_EQ(refused.overall_code(), Response::OVER_LIMIT);
}

TEST_F(RlsErl, DurationUntilResetIsWholeSecondsRoundedUpAndNeverMoreThanTheUnit) {
  load(R"(
domain: d
descriptors:
  - {key: fixed, rate_limit: {unit: minute, requests_per_unit: 1}}
  - {key: sliding, rate_limit: {unit: minute, requests_per_unit: 1, algorithm: sliding-window-counter}}
  - {key: moving, rate_limit: {unit: minute, requests_per_unit: 1, algorithm: moving-window}}
  - {key: blocked, rate_limit: {unit: second}}
)");
  clock_->advance(500'000);  // 10.5 s into the minute: 49.5 s left → 50
  const auto reset = [&](const char* key) {
    const Response r = call({{{key, "x"}}});
    EXPECT_EQ(r.statuses(0).duration_until_reset().nanos(), 0) << key;
    return r.statuses(0).duration_until_reset().seconds();
  };
  EXPECT_EQ(reset("fixed"), 50);
  EXPECT_EQ(reset("blocked"), 1);  // 0.5 s → 1
  reset("sliding");
  clock_->advance(60 * kMicrosPerSecond);  // the next minute, the previous one still weighs
  EXPECT_EQ(reset("sliding"), 60);          // full capacity only in 109.5 s: bounded to the unit
  reset("moving");
  EXPECT_EQ(reset("moving"), 60);           // 60 s + 1 µs: bounded to the unit
}

}  // namespace
}  // namespace floodgate::server
