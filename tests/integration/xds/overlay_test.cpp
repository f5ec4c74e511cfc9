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
            "fg.yaml:5:18: rls.overlays[0].algorithm: concurrency needs a reservation, which an overlay cannot give");
  EXPECT_EQ(refused("    - match: {policy: default/per-user, rules: 0}\n      algorithm: gcra\n"),
            "fg.yaml:4:41: unknown key \"rules\" in rls.overlays[0].match (known: domain, policy, rule, descriptor)");
  EXPECT_EQ(refused("    - match: {domain: first-listener}\n      algorithm: gcra\n"),
            "fg.yaml:4:14: rls.overlays[0].match needs a policy (NAMESPACE/NAME) or a descriptor key");
  EXPECT_EQ(refused("    - match: {policy: default/per-user}\n"),
            "fg.yaml:4:7: rls.overlays[0] changes nothing: give algorithm, burst or fail");
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
