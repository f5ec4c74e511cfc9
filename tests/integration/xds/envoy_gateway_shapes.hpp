// RateLimitConfig resources shaped exactly as Envoy Gateway's translator generates them, from its
// testdata (envoyproxy/gateway, internal/xds/translator/testdata/out/ratelimit-config/): the domain
// and the resource's name are the listener's; the first level is the route (key = value), the
// second the BackendTrafficPolicy's rule "NAMESPACE/NAME/rule/INDEX" (key = value), the third the
// rule's client selector "rule-INDEX-match-N" with the rate. Every other field keeps its default
// (rate_limit null above the leaf, name "", replaces [], every flag false), as there.
#pragma once

#include <cstdint>
#include <string>

#include "ratelimit/config/ratelimit/v3/rls_conf.pb.h"

namespace floodgate::testing::envoy_gateway {

namespace rlconf = ::ratelimit::config::ratelimit::v3;

// One route → one policy rule → one client selector with `requests_per_unit` per `unit`.
inline rlconf::RateLimitDescriptor route_rule(const std::string& policy_rule, const std::string& match,
                                              const std::string& match_value, std::uint32_t requests_per_unit,
                                              rlconf::RateLimitUnit unit) {
  rlconf::RateLimitDescriptor leaf;
  leaf.set_key(match);
  leaf.set_value(match_value);
  leaf.mutable_rate_limit()->set_requests_per_unit(requests_per_unit);
  leaf.mutable_rate_limit()->set_unit(unit);
  rlconf::RateLimitDescriptor rule;
  rule.set_key(policy_rule);
  rule.set_value(policy_rule);
  *rule.add_descriptors() = std::move(leaf);
  return rule;
}

inline rlconf::RateLimitConfig listener(std::initializer_list<rlconf::RateLimitDescriptor> policy_rules) {
  rlconf::RateLimitConfig c;
  c.set_name("first-listener");
  c.set_domain("first-listener");
  rlconf::RateLimitDescriptor& route = *c.add_descriptors();
  route.set_key("first-route");
  route.set_value("first-route");
  for (const auto& r : policy_rules) *route.add_descriptors() = r;
  return c;
}

// testdata/out/ratelimit-config/distinct-match.yaml: a Distinct header selector (no value), 5/SECOND
// (or the policy's other rate: month-year-rule.yaml has MONTH and YEAR).
inline rlconf::RateLimitConfig distinct_match(std::uint32_t requests_per_unit = 5,
                                              rlconf::RateLimitUnit unit = rlconf::SECOND) {
  return listener(
      {route_rule("test-namespace/test-policy-1/rule/0", "rule-0-match-0", "", requests_per_unit, unit)});
}

// A rule with two Distinct header selectors (x-user-id, then x-request-id): nested one below the
// other in the order of the rule's selectors, the rate on the last, as multiple-matches.yaml nests
// its two selectors; each keyed as distinct-match.yaml's ("rule-0-match-N", no value).
inline rlconf::RateLimitConfig distinct_user_and_request_id(std::uint32_t requests_per_unit,
                                                            rlconf::RateLimitUnit unit) {
  rlconf::RateLimitConfig c = distinct_match(requests_per_unit, unit);
  rlconf::RateLimitDescriptor& rule = *c.mutable_descriptors(0)->mutable_descriptors(0);
  rlconf::RateLimitDescriptor request_id = rule.descriptors(0);
  request_id.set_key("rule-0-match-1");
  rule.clear_descriptors();
  rlconf::RateLimitDescriptor& user = *rule.add_descriptors();
  user.set_key("rule-0-match-0");
  *user.add_descriptors() = std::move(request_id);
  return c;
}

// testdata/out/ratelimit-config/multiple-rules.yaml: the policy's rules 0 (5/SECOND) and 1
// (4294967295/SECOND), each selector with its own name as value.
inline rlconf::RateLimitConfig multiple_rules() {
  return listener({route_rule("test-namespace/test-policy-1/rule/0", "rule-0-match-0", "rule-0-match-0", 5, rlconf::SECOND),
                   route_rule("test-namespace/test-policy-1/rule/1", "rule-1-match-0", "rule-1-match-0", 4294967295u,
                              rlconf::SECOND)});
}

}  // namespace floodgate::testing::envoy_gateway
