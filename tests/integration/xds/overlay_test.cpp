// rls.overlays: floodgate's algorithm, burst and fail mode for the rules Envoy Gateway pushes,
// chosen by the BackendTrafficPolicy's namespace/name and rule index. Read from the configuration
// (every error names the field) and applied to resources shaped as Envoy Gateway's testdata.
#include <gtest/gtest.h>

#include <yaml-cpp/yaml.h>

#include "envoy_gateway_shapes.hpp"
#include "server/config/config.hpp"
#include "server/xds/rules_resource.hpp"

namespace floodgate::testing {
namespace {

namespace eg = envoy_gateway;

std::vector<server::RlsOverlay> overlays(const std::string& yaml) {
  auto c = server::parse_config("rls:\n  xds: {server: \"127.0.0.1:1\"}\n  overlays:\n" + yaml, "fg.yaml");
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? c->rls.overlays : std::vector<server::RlsOverlay>{};
}

std::string refused(const std::string& yaml) {
  auto c = server::parse_config("rls:\n  xds: {server: \"127.0.0.1:1\"}\n  overlays:\n" + yaml, "fg.yaml");
  return c.ok() ? "accepted" : std::string(c.status().message());
}

const server::RlsRule& leaf(const server::RlsConfig& rules, const std::string& policy_rule, const std::string& match,
                            const std::string& value) {
  const server::RlsNode& route = *rules.find("first-listener")->root.children.at(server::rls_child_key("first-route", "first-route"));
  const server::RlsNode& rule = *route.children.at(server::rls_child_key(policy_rule, policy_rule));
  const auto key = value.empty() ? server::rls_default_key(match) : server::rls_child_key(match, value);
  return *rule.children.at(key)->rule;
}

TEST(XdsOverlays, APolicysRuleBecomesGcraWithABurstAndItsRateStaysEnvoyGateways) {
  google::protobuf::RepeatedPtrField<google::protobuf::Any> resources;
  resources.Add()->PackFrom(eg::multiple_rules());
  const auto o = overlays(
      "    - match: {policy: test-namespace/test-policy-1, rule: 0}\n"
      "      algorithm: gcra\n      burst: 2\n      fail: closed\n"
      "    - match: {policy: test-namespace/test-polcy-1}\n      algorithm: token-bucket\n");
  std::vector<std::uint64_t> hits;
  auto rules = server::rules_from_resources(resources, false, o, &hits);
  ASSERT_TRUE(rules.ok()) << rules.status();
  const server::RlsRule& r0 = leaf(**rules, "test-namespace/test-policy-1/rule/0", "rule-0-match-0", "rule-0-match-0");
  EXPECT_EQ(r0.strategy, Strategy::kGcra);
  EXPECT_EQ(r0.options.burst, 2);
  EXPECT_EQ(r0.options.fail, FailMode::kClosed);
  EXPECT_EQ(r0.requests_per_unit, 5u);
  EXPECT_EQ(r0.unit, server::RlsUnit::kSecond);
  // Rule 1 of the same policy is not named: a fixed window failing open, as envoyproxy decides.
  const server::RlsRule& r1 = leaf(**rules, "test-namespace/test-policy-1/rule/1", "rule-1-match-0", "rule-1-match-0");
  EXPECT_EQ(r1.strategy, Strategy::kFixedWindow);
  EXPECT_EQ(r1.options.fail, FailMode::kOpen);
  EXPECT_EQ(hits, (std::vector<std::uint64_t>{1, 0}));  // the misspelt policy matches nothing

  // Without a rule index, every rule of the policy; a domain narrows it to one listener.
  rules = server::rules_from_resources(
      resources, false, overlays("    - match: {policy: test-namespace/test-policy-1, domain: first-listener}\n"
                                 "      algorithm: sliding-window-counter\n"), &hits);
  ASSERT_TRUE(rules.ok()) << rules.status();
  EXPECT_EQ(leaf(**rules, "test-namespace/test-policy-1/rule/1", "rule-1-match-0", "rule-1-match-0").strategy,
            Strategy::kSlidingWindowCounter);
  EXPECT_EQ(hits, (std::vector<std::uint64_t>{2}));
  rules = server::rules_from_resources(
      resources, false, overlays("    - match: {policy: test-namespace/test-policy-1, domain: other-listener}\n"
                                 "      algorithm: gcra\n"), &hits);
  ASSERT_TRUE(rules.ok()) << rules.status();
  EXPECT_EQ(leaf(**rules, "test-namespace/test-policy-1/rule/0", "rule-0-match-0", "rule-0-match-0").strategy,
            Strategy::kFixedWindow);
  EXPECT_EQ(hits, (std::vector<std::uint64_t>{0}));
}

// A shared policy's own resource (global-shared-multiple-shared-policies.yaml: domain and name
// "NAMESPACE/NAME", the rule's key at the top) and a named rule (global-shared-named-rule.yaml:
// "rule/by-user", selector "rule-match-0").
TEST(XdsOverlays, ASharedPolicyAndANamedRuleAreMatchedToo) {
  auto shared = [](const std::string& rule, const std::string& match) {
    eg::rlconf::RateLimitConfig c;
    c.set_name("test-namespace/test-policy-1");
    c.set_domain("test-namespace/test-policy-1");
    *c.add_descriptors() = eg::route_rule("test-namespace/test-policy-1/rule/" + rule, match, "", 5, eg::rlconf::SECOND);
    return c;
  };
  for (const auto& [rule, match] : {std::pair{"0", "rule-0-match-0"}, std::pair{"by-user", "rule-match-0"}}) {
    google::protobuf::RepeatedPtrField<google::protobuf::Any> resources;
    resources.Add()->PackFrom(shared(rule, match));
    std::vector<std::uint64_t> hits;
    auto rules = server::rules_from_resources(
        resources, false,
        overlays(std::string("    - match: {policy: test-namespace/test-policy-1, rule: ") + rule +
                 "}\n      algorithm: token-bucket\n"),
        &hits);
    ASSERT_TRUE(rules.ok()) << rules.status();
    EXPECT_EQ(rules->get()->rules.at(0)->strategy, Strategy::kTokenBucket) << rule;
    EXPECT_EQ(hits, (std::vector<std::uint64_t>{1})) << rule;
  }
}

TEST(XdsOverlays, TheResourcesOwnAdditionsWinAndADistinctSelectorIsMatched) {
  auto listener = eg::distinct_match();
  eg::rlconf::RateLimitDescriptor& selector = *listener.mutable_descriptors(0)->mutable_descriptors(0)->mutable_descriptors(0);
  (*(*selector.mutable_metadata()->mutable_fields())["floodgate"].mutable_struct_value()->mutable_fields())["algorithm"]
      .set_string_value("token-bucket");
  google::protobuf::RepeatedPtrField<google::protobuf::Any> resources;
  resources.Add()->PackFrom(listener);
  auto rules = server::rules_from_resources(
      resources, false, overlays("    - match: {descriptor: rule-0-match-0}\n      algorithm: gcra\n      burst: 4\n"));
  ASSERT_TRUE(rules.ok()) << rules.status();
  const server::RlsRule& r = leaf(**rules, "test-namespace/test-policy-1/rule/0", "rule-0-match-0", "");
  EXPECT_EQ(r.strategy, Strategy::kTokenBucket);  // metadata.floodgate's
  EXPECT_EQ(r.options.burst, 4);                  // the overlay's, where the resource says nothing
}

TEST(XdsOverlays, ABadOverlayIsRefusedNamingItsField) {
  EXPECT_EQ(refused("    - match: {policy: default/per-user}\n      algorithm: gcra\n      burst: 0\n"),
            "fg.yaml:6:14: rls.overlays[0].burst must be a whole number from 1 to 9007199254740992, not 0");
  EXPECT_EQ(refused("    - match: {policy: default/per-user}\n      algorithm: bucket\n"),
            "fg.yaml:5:18: rls.overlays[0].algorithm: unknown strategy \"bucket\": expected fixed-window, "
            "moving-window, sliding-window-counter, token-bucket, leaky-bucket, gcra or concurrency");
  EXPECT_EQ(refused("    - match: {policy: per-user}\n      algorithm: gcra\n"),
            "fg.yaml:4:23: rls.overlays[0].match.policy must be NAMESPACE/NAME of a BackendTrafficPolicy, not "
            "\"per-user\"");
  EXPECT_EQ(refused("    - match: {policy: default/per-user}\n      burst: 5\n"),
            "fg.yaml:5:14: rls.overlays[0].burst needs algorithm token-bucket, leaky-bucket or gcra beside it");
  EXPECT_EQ(refused("    - match: {policy: default/per-user}\n      algorithm: concurrency\n"),
            "fg.yaml:5:18: rls.overlays[0].algorithm: concurrency needs reservation {id_key} beside it: the descriptor "
            "entry with the request's id, whose second call (Envoy's apply_on_stream_done) releases the lease");
  EXPECT_EQ(refused("    - match: {policy: default/per-user, rules: 0}\n      algorithm: gcra\n"),
            "fg.yaml:4:41: unknown key \"rules\" in rls.overlays[0].match (known: domain, policy, rule, descriptor)");
  EXPECT_EQ(refused("    - match: {domain: first-listener}\n      algorithm: gcra\n"),
            "fg.yaml:4:14: rls.overlays[0].match needs a policy (NAMESPACE/NAME) or a descriptor key");
  EXPECT_EQ(refused("    - match: {policy: default/per-user}\n"),
            "fg.yaml:4:7: rls.overlays[0] changes nothing: give algorithm, burst, fail, calendar or reservation");
}

// The new fields with hostile values: each refused at load, naming the field.
TEST(XdsOverlays, ACalendarOrAReservationWithBadValuesIsRefusedNamingItsField) {
  const std::string m = "    - match: {policy: default/per-user}\n";
  const std::string pre = "fg.yaml:5:";
  EXPECT_EQ(refused(m + "      calendar: null\n"),
            pre + "17: rls.overlays[0].calendar must be a map: {time_zone: <IANA zone>, anchor_day: <1-31, months only>}");
  EXPECT_EQ(refused(m + "      calendar: true\n"),
            pre + "17: rls.overlays[0].calendar must be a map: {time_zone: <IANA zone>, anchor_day: <1-31, months only>}");
  EXPECT_EQ(refused(m + "      calendar: [UTC]\n"),
            pre + "17: rls.overlays[0].calendar must be a map: {time_zone: <IANA zone>, anchor_day: <1-31, months only>}");
  EXPECT_EQ(refused(m + "      calendar: {}\n"),
            pre + "17: rls.overlays[0].calendar needs a time_zone (an IANA name such as Europe/Berlin, or UTC)");
  EXPECT_EQ(refused(m + "      calendar: {time_zone: null}\n"),
            pre + "29: rls.overlays[0].calendar.time_zone must be a single value");
  EXPECT_EQ(refused(m + "      calendar: {time_zone: [UTC]}\n"),
            pre + "29: rls.overlays[0].calendar.time_zone must be a single value");
  EXPECT_EQ(refused(m + "      calendar: {time_zone: Mars/Olympus}\n"),
            pre + "29: rls.overlays[0].calendar.time_zone: unknown time zone \"Mars/Olympus\": expected an IANA name "
                  "such as Europe/Berlin or UTC, found in the system's zoneinfo (/usr/share/zoneinfo, Debian's tzdata)");
  EXPECT_EQ(refused(m + "      calendar: {time_zone: UTC, zone: UTC}\n"),
            pre + "34: unknown key \"zone\" in rls.overlays[0].calendar (known: time_zone, anchor_day)");
  for (const std::string bad : {"0", "-1", "32", "9007199254740992", "1e3", "\"x\"", "null"}) {
    EXPECT_NE(refused(m + "      calendar: {time_zone: UTC, anchor_day: " + bad + "}\n")
                  .find("rls.overlays[0].calendar.anchor_day must be a whole number from 1 to 31"),
              std::string::npos)
        << bad << ": " << refused(m + "      calendar: {time_zone: UTC, anchor_day: " + bad + "}\n");
  }
  EXPECT_EQ(refused(m + "      algorithm: gcra\n      calendar: {time_zone: UTC}\n"),
            "fg.yaml:6:17: rls.overlays[0].calendar runs on the fixed window only, not algorithm gcra");
  EXPECT_EQ(refused(m + "      reservation: null\n"),
            pre + "20: rls.overlays[0].reservation must be a map with id_key (and ttl_ms)");
  EXPECT_EQ(refused(m + "      reservation: request_id\n"),
            pre + "20: rls.overlays[0].reservation must be a map with id_key (and ttl_ms)");
  EXPECT_EQ(refused(m + "      reservation: {ttl_ms: 1000}\n"),
            pre + "20: rls.overlays[0].reservation needs an id_key: the descriptor key that carries the request's id");
  EXPECT_EQ(refused(m + "      reservation: {id_key: \"\"}\n"), pre + "29: rls.overlays[0].reservation.id_key is empty");
  EXPECT_EQ(refused(m + "      reservation: {id_key: {a: b}}\n"),
            pre + "29: rls.overlays[0].reservation.id_key must be a single value");
  for (const std::string bad : {"0", "-5", "86400001", "9007199254740992", "\"soon\"", "null", "1.5"}) {
    EXPECT_NE(refused(m + "      reservation: {id_key: rid, ttl_ms: " + bad + "}\n")
                  .find("rls.overlays[0].reservation.ttl_ms must be a whole number from 1 to 86400000"),
              std::string::npos)
        << bad << ": " << refused(m + "      reservation: {id_key: rid, ttl_ms: " + bad + "}\n");
  }
  EXPECT_EQ(refused(m + "      algorithm: concurrency\n      burst: 2\n      reservation: {id_key: rid}\n"),
            "fg.yaml:6:14: rls.overlays[0].burst needs algorithm token-bucket, leaky-bucket or gcra beside it");
  EXPECT_EQ(refused(m + "      algorithm: concurrency\n      calendar: {time_zone: UTC}\n      reservation: {id_key: rid}\n"),
            "fg.yaml:6:17: rls.overlays[0].calendar runs on the fixed window only, not algorithm concurrency");
  EXPECT_EQ(refused(m + "      algorithm: concurrency\n      reservation: {id_key: rid, ttl_ms: 5000}\n"),
            "fg.yaml:6:42: rls.overlays[0].reservation.ttl_ms does not apply to concurrency: a lease lives one unit "
            "of the rule's rate");
  // The same match twice, or a narrower one after a wider one: the second would never apply.
  EXPECT_EQ(refused(m + "      algorithm: gcra\n" + m + "      fail: closed\n"),
            "fg.yaml:6:14: rls.overlays[1].match is the match of rls.overlays[0], and the first overlay that "
            "matches a rule applies: this one never would (put both changes in one overlay)");
  EXPECT_EQ(refused(m + "      algorithm: gcra\n    - match: {policy: default/per-user, rule: 2, domain: d}\n"
                        "      fail: closed\n"),
            "fg.yaml:6:14: rls.overlays[1].match is within the match of rls.overlays[0], and the first overlay that "
            "matches a rule applies: this one never would (put the narrower one first)");
  // The narrower first is what it means: rule 2 closed, the policy's other rules gcra.
  EXPECT_EQ(overlays("    - match: {policy: default/per-user, rule: 2}\n      fail: closed\n" + m +
                     "      algorithm: gcra\n    - match: {descriptor: user}\n      algorithm: gcra\n").size(),
            3u);
  const auto o = overlays(m + "      calendar: {time_zone: Europe/Berlin, anchor_day: 31}\n"
                              "      reservation: {id_key: rid, ttl_ms: 60000}\n");
  ASSERT_EQ(o.size(), 1u);
  EXPECT_EQ(o[0].time_zone, "Europe/Berlin");
  EXPECT_EQ(o[0].anchor_day, 31);
  EXPECT_EQ(o[0].reservation_id_key, "rid");
  EXPECT_EQ(o[0].reservation_ttl_ms, 60000);
}

// A calendar: the pushed unit read as a calendar period in the zone; a unit without one is
// refused at the push (or the reload that reads it again), naming the overlay's field.
TEST(XdsOverlays, ACalendarReadsTheRulesUnitInItsZoneAndIsRefusedOnAUnitWithoutOne) {
  const auto read = [](const eg::rlconf::RateLimitConfig& c, const std::string& yaml) {
    google::protobuf::RepeatedPtrField<google::protobuf::Any> resources;
    resources.Add()->PackFrom(c);
    return server::rules_from_resources(resources, false, overlays(yaml));
  };
  const std::string policy_rule = "test-namespace/test-policy-1/rule/0";
  auto rules = read(eg::distinct_match(1000, eg::rlconf::MONTH),
                    "    - match: {policy: test-namespace/test-policy-1}\n"
                    "      calendar: {time_zone: Europe/Berlin, anchor_day: 15}\n");
  ASSERT_TRUE(rules.ok()) << rules.status();
  const server::RlsRule& r = leaf(**rules, policy_rule, "rule-0-match-0", "");
  ASSERT_TRUE(r.calendar);
  EXPECT_EQ(r.calendar.unit, CalendarUnit::kMonth);
  EXPECT_EQ(r.calendar.anchor_day, 15);
  EXPECT_EQ(r.calendar.zone.name(), "Europe/Berlin");
  EXPECT_EQ(r.requests_per_unit, 1000u);
  ASSERT_NE(r.policy, nullptr);
  EXPECT_EQ(r.policy->limits().front().calendar.unit, CalendarUnit::kMonth);
  const std::string path = "first-route_first-route." + policy_rule + "_" + policy_rule + ".rule-0-match-0";
  for (const auto unit : {eg::rlconf::SECOND, eg::rlconf::MINUTE, eg::rlconf::HOUR}) {
    auto no = read(eg::distinct_match(5, unit), "    - match: {policy: test-namespace/test-policy-1}\n"
                                                "      calendar: {time_zone: UTC}\n");
    EXPECT_EQ(std::string(no.status().message()),
              "resource \"first-listener\": rls.overlays[0].calendar: descriptor \"" + path + "\" has unit " +
                  eg::rlconf::RateLimitUnit_Name(unit) + ", which has no calendar period (day, week, month or year)");
  }
  auto day = read(eg::distinct_match(5, eg::rlconf::DAY), "    - match: {policy: test-namespace/test-policy-1}\n"
                                                        "      calendar: {time_zone: UTC, anchor_day: 2}\n");
  EXPECT_EQ(std::string(day.status().message()),
            "resource \"first-listener\": rls.overlays[0].calendar.anchor_day applies to unit month only; descriptor \"" +
                path + "\" has unit DAY");
}

// A reservation whose id is Envoy Gateway's Distinct selector on x-request-id: the rule moves onto
// the selector above it (x-user-id), so that the id entry, taken out before matching, leaves a
// descriptor that finds it; concurrency takes its leases there.
TEST(XdsOverlays, AReservationOnTheRequestIdSelectorMovesTheRuleAboveIt) {
  const auto read = [](const eg::rlconf::RateLimitConfig& c, const std::string& yaml) {
    google::protobuf::RepeatedPtrField<google::protobuf::Any> resources;
    resources.Add()->PackFrom(c);
    return server::rules_from_resources(resources, false, overlays(yaml));
  };
  const std::string policy_rule = "test-namespace/test-policy-1/rule/0";
  auto rules = read(eg::distinct_user_and_request_id(4, eg::rlconf::MINUTE),
                    "    - match: {policy: test-namespace/test-policy-1, rule: 0}\n"
                    "      algorithm: concurrency\n      reservation: {id_key: rule-0-match-1}\n");
  ASSERT_TRUE(rules.ok()) << rules.status();
  const server::RlsDomain& d = *(*rules)->find("first-listener");
  const server::RlsNode& rule = *d.root.children.at(server::rls_child_key("first-route", "first-route"))
                                     ->children.at(server::rls_child_key(policy_rule, policy_rule));
  const server::RlsNode& user = *rule.children.at(server::rls_default_key("rule-0-match-0"));
  ASSERT_NE(user.rule, nullptr);
  EXPECT_TRUE(user.children.empty());  // the request id's own descriptor is gone
  EXPECT_EQ(user.rule->strategy, Strategy::kConcurrency);
  EXPECT_EQ(user.rule->reservation_id_key, "rule-0-match-1");
  EXPECT_EQ(user.rule->requests_per_unit, 4u);  // the slots: Envoy Gateway's rate
  EXPECT_EQ(d.reservation_id_keys, std::vector<std::string>{"rule-0-match-1"});
  ASSERT_EQ((*rules)->rules.size(), 1u);

  // The id on a selector above the rule, a selector with one value, or an id selector with no
  // selector above it that could hold the rule: refused, naming the field.
  auto above = read(eg::distinct_user_and_request_id(4, eg::rlconf::MINUTE),
                    "    - match: {policy: test-namespace/test-policy-1}\n      reservation: {id_key: rule-0-match-0}\n");
  EXPECT_NE(std::string(above.status().message())
                .find("rls.overlays[0].reservation.id_key \"rule-0-match-0\" is a descriptor above the rule"),
            std::string::npos) << above.status();
  auto valued = read(eg::multiple_rules(),
                     "    - match: {policy: test-namespace/test-policy-1, rule: 0}\n"
                     "      reservation: {id_key: rule-0-match-0}\n");
  EXPECT_NE(std::string(valued.status().message())
                .find("rls.overlays[0].reservation.id_key \"rule-0-match-0\": descriptor \"first-route_first-route."
                      "test-namespace/test-policy-1/rule/0_test-namespace/test-policy-1/rule/0.rule-0-match-0_rule-0-"
                      "match-0\" matches the one value \"rule-0-match-0\", not each request's id"),
            std::string::npos) << valued.status();
  eg::rlconf::RateLimitConfig top;
  top.set_name("l");
  top.set_domain("l");
  top.add_descriptors()->set_key("request-id");
  top.mutable_descriptors(0)->mutable_rate_limit()->set_requests_per_unit(3);
  top.mutable_descriptors(0)->mutable_rate_limit()->set_unit(eg::rlconf::MINUTE);
  auto at_top = read(top, "    - match: {descriptor: request-id}\n      reservation: {id_key: request-id}\n");
  EXPECT_EQ(std::string(at_top.status().message()),
            "resource \"l\": rls.overlays[0].reservation.id_key \"request-id\" is the key of descriptor "
            "\"request-id\", whose rule then moves onto the descriptor above it, and it has none");
  // An id entry the rules do not name (an action added to Envoy Gateway's route): as in a rules file.
  auto apart = read(eg::distinct_match(100, eg::rlconf::HOUR),
                    "    - match: {policy: test-namespace/test-policy-1}\n      reservation: {id_key: request_id}\n");
  ASSERT_TRUE(apart.ok()) << apart.status();
  EXPECT_EQ(leaf(**apart, policy_rule, "rule-0-match-0", "").reservation_id_key, "request_id");
}

// The example's ConfigMap holds a file that floodgate reads, with the overlay the docs show.
TEST(XdsOverlays, TheEnvoyGatewayExampleIsAValidConfiguration) {
  const std::string path = FLOODGATE_SOURCE_DIR "/examples/envoy-gateway/floodgate-overlays.yaml";
  const YAML::Node map = YAML::LoadFile(path);
  auto c = server::parse_config(map["data"]["floodgate.yaml"].as<std::string>(), path);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->rls.overlays.size(), 1u);
  const server::RlsOverlay& o = c->rls.overlays[0];
  EXPECT_EQ(o.policy, "default/per-user");
  EXPECT_EQ(o.rule, "0");
  EXPECT_EQ(o.algorithm, "gcra");
  EXPECT_EQ(o.burst, 3);
  EXPECT_EQ(o.fail, "closed");
  // It matches the rule Envoy Gateway makes of backendtrafficpolicy.yaml (docs/envoy-gateway.md).
  EXPECT_TRUE(o.matches("default/eg/http", {"httproute/default/backend/rule/0/match/0/*", "default/per-user/rule/0",
                                            "rule-0-match-0"}));
  EXPECT_FALSE(o.matches("default/eg/http", {"httproute/default/backend/rule/0/match/0/*", "default/per-user/rule/1",
                                             "rule-1-match-0"}));
}

}  // namespace
}  // namespace floodgate::testing
