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

// testdata/out/ratelimit-config/distinct-match.yaml: a Distinct header selector (no value), 5/SECOND.
inline rlconf::RateLimitConfig distinct_match() {
  return listener({route_rule("test-namespace/test-policy-1/rule/0", "rule-0-match-0", "", 5, rlconf::SECOND)});
}

// testdata/out/ratelimit-config/multiple-rules.yaml: the policy's rules 0 (5/SECOND) and 1
// (4294967295/SECOND), each selector with its own name as value.
inline rlconf::RateLimitConfig multiple_rules() {
  return listener({route_rule("test-namespace/test-policy-1/rule/0", "rule-0-match-0", "rule-0-match-0", 5, rlconf::SECOND),
                   route_rule("test-namespace/test-policy-1/rule/1", "rule-1-match-0", "rule-1-match-0", 4294967295u,
                              rlconf::SECOND)});
}

}  // namespace floodgate::testing::envoy_gateway
