// An overlay on one pushed rule: the keys it sets where the resource leaves them unset, and what
// the rule's unit and place refuse.
#include "server/xds/overlay_apply.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

namespace floodgate::server {

namespace {

// A calendar on the pushed unit: day, week, month or year; an anchor day for a month only; the
// fixed window, whatever the resource itself asks.
std::string calendar_refused(const RlsOverlay& o, const PushedRule& r, const YAML::Node& rate_limit) {
  if (r.unit != "DAY" && r.unit != "WEEK" && r.unit != "MONTH" && r.unit != "YEAR") {
    return fmt::format("{}.calendar: descriptor \"{}\" has unit {}, which has no calendar period (day, week, month "
                       "or year)", o.where, r.path, r.unit);
  }
  if (o.anchor_day != 0 && r.unit != "MONTH") {
    return fmt::format("{}.calendar.anchor_day applies to unit month only; descriptor \"{}\" has unit {}", o.where,
                       r.path, r.unit);
  }
  if (const YAML::Node& a = rate_limit["algorithm"]; a && a.Scalar() != "fixed-window") {
    return fmt::format("{}.calendar runs on the fixed window only; descriptor \"{}\" has algorithm {} from its "
                       "metadata.floodgate", o.where, r.path, a.Scalar());
  }
  return {};
}

// Where the request's id entry is: an entry of its own that the rules do not name (a route action
// added beside Envoy Gateway's, as in a rules file), or the rule's own key-only descriptor (a
// Distinct client selector on x-request-id), which the rule then leaves for the one above.
std::string reservation_refused(const RlsOverlay& o, const PushedRule& r, bool& lift) {
  const std::string& k = o.reservation_id_key;
  if (!r.keys.empty() && r.keys.back() == k) {
    if (!r.value.empty()) {
      return fmt::format("{}.reservation.id_key \"{}\": descriptor \"{}\" matches the one value \"{}\", not each "
                         "request's id (a Distinct client selector, a key without value, carries it)",
                         o.where, k, r.path, r.value);
    }
    if (r.has_children) {
      return fmt::format("{}.reservation.id_key \"{}\": descriptor \"{}\" has descriptors below it", o.where, k,
                         r.path);
    }
    lift = true;
    return {};
  }
  if (std::find(r.keys.begin(), r.keys.end(), k) != r.keys.end()) {
    return fmt::format("{}.reservation.id_key \"{}\" is a descriptor above the rule \"{}\": the request's id must be "
                       "the rule's own (last) client selector, or an entry the rules do not name",
                       o.where, k, r.path);
  }
  return {};
}

}  // namespace

OverlayApplied apply_overlay(const std::vector<RlsOverlay>& overlays, std::vector<std::uint64_t>& hits,
                             const PushedRule& rule, YAML::Node& descriptor, YAML::Node& rate_limit) {
  OverlayApplied out;
  for (std::size_t i = 0; i < overlays.size(); ++i) {
    const RlsOverlay& o = overlays[i];
    if (!o.matches(rule.domain, rule.keys)) continue;
    ++hits[i];
    out.overlay = o.where;
    const YAML::Node& set = rate_limit;  // const: looking does not add a key
    const YAML::Node& has = descriptor;
    if (!o.time_zone.empty() && !set["calendar"]) {
      out.error = calendar_refused(o, rule, rate_limit);
      if (!out.error.empty()) return out;
      YAML::Node calendar(YAML::NodeType::Map);
      calendar["time_zone"] = o.time_zone;
      if (o.anchor_day != 0) calendar["anchor_day"] = std::to_string(o.anchor_day);
      rate_limit["calendar"] = calendar;
    }
    if (!o.reservation_id_key.empty() && !has["reservation"]) {
      out.error = reservation_refused(o, rule, out.lift);
      if (!out.error.empty()) return out;
      YAML::Node reservation(YAML::NodeType::Map);
      reservation["id_key"] = o.reservation_id_key;
      if (o.reservation_ttl_ms != 0) reservation["ttl_ms"] = std::to_string(o.reservation_ttl_ms);
      descriptor["reservation"] = reservation;
    }
    if (!o.algorithm.empty() && !set["algorithm"]) rate_limit["algorithm"] = o.algorithm;
    if (o.burst > 0 && !set["burst"]) rate_limit["burst"] = std::to_string(o.burst);
    if (!o.fail.empty() && !set["fail"]) rate_limit["fail"] = o.fail;
    return out;
  }
  return out;
}

}  // namespace floodgate::server
