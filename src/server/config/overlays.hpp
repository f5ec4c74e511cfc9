// Overlays: floodgate's algorithm, burst, fail mode, calendar and reservation for rate-limit rules
// that a control plane (Envoy Gateway) pushes over xDS, chosen in floodgate's configuration by what
// the author of a BackendTrafficPolicy can name (docs/envoy-gateway.md, "Algorithms for Envoy
// Gateway's rules").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace YAML {
class Node;
}

namespace floodgate::server {

/// One entry of `rls.overlays`. It matches a pushed rule (a descriptor with a rate_limit) when
/// every part given matches: `domain` the resource's domain; `policy` ("NAMESPACE/NAME" of a
/// BackendTrafficPolicy) a descriptor key on the rule's path "NAMESPACE/NAME/rule/RULE", RULE
/// being `rule` when given (the rule's index, or its name when it has one) and any when not;
/// `descriptor` a key on the path, exactly. The
/// rate (requests_per_unit, unit) always stays the pushed one; an overlay only sets the rule's
/// `algorithm`, `burst`, `fail`, `calendar` and `reservation`, as a rule file's keys (those the
/// resource itself sets in metadata.floodgate win).
struct RlsOverlay {
  std::string where;       ///< "rls.overlays[0]": names it in the log
  std::string domain;      ///< empty: any domain
  std::string policy;      ///< empty: any policy
  std::string rule;        ///< index or name; empty: every rule of the policy
  std::string descriptor;  ///< empty: any
  std::string algorithm;   ///< as a rule file's `algorithm`; empty: the rule's
  std::int64_t burst = 0;  ///< 0: the rule's
  std::string fail;        ///< "open", "closed"; empty: the rule's
  /// `calendar: {time_zone, anchor_day}` as a rule file's: the pushed unit (day, week, month,
  /// year; checked against each rule it applies to) is a period of the calendar in that zone.
  /// Empty: none. Only with the fixed window.
  std::string time_zone;
  int anchor_day = 0;  ///< 1-31 for a month; 0: not given (1)
  /// `reservation: {id_key, ttl_ms}` as a rule file's descriptor: the entry `id_key` carries the
  /// request's id; the first call reserves, the second settles (or releases a concurrency
  /// lease). When id_key is the key of the rule's own descriptor (Envoy Gateway's Distinct client
  /// selector on x-request-id), the rule moves onto the descriptor above it. Empty: none.
  std::string reservation_id_key;
  std::int64_t reservation_ttl_ms = 0;  ///< 0: the default (10 minutes)

  /// Whether the overlay applies to a rule of `domain` whose path has the keys `path_keys`.
  bool operator==(const RlsOverlay&) const = default;

  [[nodiscard]] bool matches(std::string_view rule_domain, const std::vector<std::string>& path_keys) const;
};

/// Reads `rls.overlays` (a list). Errors (yaml::Error) name the field: "rls.overlays[1].burst must
/// be a whole number from 1 to …", an unknown key, an overlay that matches on nothing, an
/// algorithm that floodgate does not know, concurrency without a reservation, a calendar beside
/// an algorithm other than the fixed window, an unknown time zone, an overlay whose match an
/// earlier one covers (the first that matches applies: it never would). What depends on the
/// pushed rule (a calendar on a unit without one) is checked at each push (rules_from_resources).
std::vector<RlsOverlay> parse_overlays(const std::string& source, const YAML::Node& list);

/// Logs a warning for each overlay that matched no rule (`hits[i]` == 0) of the rules of
/// `version`, naming it by its field path and match; returns how many.
std::uint64_t report_unmatched_overlays(const std::vector<RlsOverlay>& overlays,
                                        const std::vector<std::uint64_t>& hits, const std::string& version);

}  // namespace floodgate::server
