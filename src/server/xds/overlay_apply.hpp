// An overlay (rls.overlays) applied to one rule of a pushed RateLimitConfig, in the YAML tree that
// the rules parser reads (xds/rules_resource.cpp builds it): what the overlay may set, and what it
// refuses because of the rule it meets (a calendar on a unit without one, an id key in the wrong
// place).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "server/config/overlays.hpp"

namespace YAML {
class Node;
}

namespace floodgate::server {

/// A pushed rule with a rate (not unlimited, requests_per_unit above 0), as an overlay meets it.
struct PushedRule {
  std::string_view domain;
  const std::vector<std::string>& keys;  ///< the descriptor keys from the top down to the rule's own
  std::string_view path;                 ///< "k1_v1.k2", as the parser names the rule
  std::string_view value;                ///< the rule's own descriptor value ("" for a key-only one)
  std::string_view unit;                 ///< as pushed: "SECOND" … "YEAR"
  bool has_children = false;             ///< descriptors below the rule's own
};

/// What apply_overlay did.
struct OverlayApplied {
  /// Not empty: the push (or the reload that re-reads it) is refused with this message, which
  /// names the overlay's field ("rls.overlays[0].calendar: …").
  std::string error;
  /// The overlay's reservation id_key is the rule's own key (Envoy Gateway's Distinct client
  /// selector): the rule (its rate_limit, reservation and flags) moves onto the descriptor above,
  /// and its own descriptor goes, so that the request's id entry, taken out before matching,
  /// leaves a descriptor that finds the rule (RlsService::resolve).
  bool lift = false;
  std::string overlay;  ///< which overlay applied ("rls.overlays[0]"), if any
};

/// The first overlay that matches `rule` (its hit counted in `hits`) sets in `rate_limit` (the
/// rule's rate_limit map) and `descriptor` (its descriptor map) what they leave unset: algorithm,
/// burst, fail, calendar, reservation. The rate stays the pushed one.
OverlayApplied apply_overlay(const std::vector<RlsOverlay>& overlays, std::vector<std::uint64_t>& hits,
                             const PushedRule& rule, YAML::Node& descriptor, YAML::Node& rate_limit);

/// The keys of a descriptor map that belong to its rule and move with it when it is lifted.
inline constexpr const char* kLiftedRuleKeys[] = {"rate_limit", "reservation", "shadow_mode", "detailed_metric",
                                                  "quota_mode", "metadata"};

}  // namespace floodgate::server
