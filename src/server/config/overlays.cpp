// rls.overlays: reading them (every error names the field) and matching a pushed rule's path.
#include "server/config/overlays.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include "floodgate/algorithms.hpp"
#include "floodgate/rate.hpp"
#include "floodgate/storage.hpp"
#include "server/config/yaml_errors.hpp"

namespace floodgate::server {

namespace {

using yaml::fail;
using yaml::scalar;

// "NAMESPACE/NAME/rule/RULE" as Envoy Gateway names a BackendTrafficPolicy's rule in its keys
// (RULE: the rule's index in the policy, or its name).
bool names_policy_rule(std::string_view key, const std::string& policy, const std::string& rule) {
  const std::string prefix = policy + "/rule/";
  if (!key.starts_with(prefix) || key.size() == prefix.size()) return false;
  const std::string_view which = key.substr(prefix.size());
  return rule.empty() ? which.find('/') == std::string_view::npos : which == rule;
}

void parse_match(const std::string& source, const YAML::Node& node, const std::string& where, RlsOverlay& o) {
  const YAML::Node& match = node["match"];
  if (!match || !match.IsMap()) fail(source, node, where + " needs a match (policy, rule, domain, descriptor)");
  yaml::check_keys(source, match, {"domain", "policy", "rule", "descriptor"}, where + ".match");
  if (match["domain"]) o.domain = scalar<std::string>(source, match["domain"], where + ".match.domain");
  if (match["policy"]) {
    o.policy = scalar<std::string>(source, match["policy"], where + ".match.policy");
    const auto slash = o.policy.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == o.policy.size() ||
        o.policy.find('/', slash + 1) != std::string::npos) {
      fail(source, match["policy"], where + ".match.policy must be NAMESPACE/NAME of a BackendTrafficPolicy, not \"" +
                                        o.policy + "\"");
    }
  }
  if (match["rule"]) {
    if (!match["policy"]) fail(source, match["rule"], where + ".match.rule needs match.policy (a rule of the policy)");
    o.rule = scalar<std::string>(source, match["rule"], where + ".match.rule");
    if (o.rule.empty() || o.rule.find('/') != std::string::npos) {
      fail(source, match["rule"], where + ".match.rule must be the rule's index or name, without '/'");
    }
  }
  if (match["descriptor"]) o.descriptor = scalar<std::string>(source, match["descriptor"], where + ".match.descriptor");
  if (o.policy.empty() && o.descriptor.empty()) {
    fail(source, match, where + ".match needs a policy (NAMESPACE/NAME) or a descriptor key");
  }
}

// `calendar: {time_zone, anchor_day}`, as a rule file's; the unit is the pushed rule's.
void parse_calendar(const std::string& source, const YAML::Node& c, const std::string& where, RlsOverlay& o) {
  const std::string at = where + ".calendar";
  if (!c.IsMap()) fail(source, c, at + " must be a map: {time_zone: <IANA zone>, anchor_day: <1-31, months only>}");
  yaml::check_keys(source, c, {"time_zone", "anchor_day"}, at);
  if (!c["time_zone"]) fail(source, c, at + " needs a time_zone (an IANA name such as Europe/Berlin, or UTC)");
  o.time_zone = scalar<std::string>(source, c["time_zone"], at + ".time_zone");
  if (c["anchor_day"]) o.anchor_day = static_cast<int>(yaml::integer(source, c["anchor_day"], at + ".anchor_day", 1, 31));
  auto checked = Calendar::make(CalendarUnit::kMonth, o.time_zone, o.anchor_day == 0 ? 1 : o.anchor_day);
  if (!checked.ok()) fail(source, c["time_zone"], at + ".time_zone: " + std::string(checked.status().message()));
}

// `reservation: {id_key, ttl_ms}`, as a rule file's descriptor.
void parse_reservation(const std::string& source, const YAML::Node& r, const std::string& where, RlsOverlay& o) {
  const std::string at = where + ".reservation";
  if (!r.IsMap()) fail(source, r, at + " must be a map with id_key (and ttl_ms)");
  yaml::check_keys(source, r, {"id_key", "ttl_ms"}, at);
  if (!r["id_key"]) fail(source, r, at + " needs an id_key: the descriptor key that carries the request's id");
  o.reservation_id_key = scalar<std::string>(source, r["id_key"], at + ".id_key");
  if (o.reservation_id_key.empty()) fail(source, r["id_key"], at + ".id_key is empty");
  if (r["ttl_ms"]) {
    o.reservation_ttl_ms = yaml::integer(source, r["ttl_ms"], at + ".ttl_ms", 1, kMaxReservationTtl / 1000);
  }
}

// algorithm, burst, fail, calendar, reservation: each alone, then together.
void parse_changes(const std::string& source, const YAML::Node& node, const std::string& where, RlsOverlay& o) {
  Strategy strategy = Strategy::kFixedWindow;
  if (const YAML::Node& a = node["algorithm"]) {
    o.algorithm = scalar<std::string>(source, a, where + ".algorithm");
    auto s = parse_strategy(o.algorithm);
    if (!s.ok()) fail(source, a, where + ".algorithm: " + std::string(s.status().message()));
    strategy = *s;
  }
  if (node["burst"]) {
    o.burst = yaml::integer(source, node["burst"], where + ".burst", 1, kMaxAmount);
    if (strategy != Strategy::kTokenBucket && strategy != Strategy::kLeakyBucket && strategy != Strategy::kGcra) {
      fail(source, node["burst"], where + ".burst needs algorithm token-bucket, leaky-bucket or gcra beside it");
    }
  }
  if (const YAML::Node& f = node["fail"]) {
    o.fail = scalar<std::string>(source, f, where + ".fail");
    if (o.fail != "open" && o.fail != "closed") fail(source, f, where + ".fail must be open or closed");
  }
  if (const YAML::Node& c = node["calendar"]) {
    parse_calendar(source, c, where, o);
    if (strategy != Strategy::kFixedWindow) {
      fail(source, c, where + ".calendar runs on the fixed window only, not algorithm " + o.algorithm);
    }
  }
  if (const YAML::Node& r = node["reservation"]) parse_reservation(source, r, where, o);
  if (strategy == Strategy::kConcurrency && o.reservation_ttl_ms != 0) {
    fail(source, node["reservation"]["ttl_ms"],
         where + ".reservation.ttl_ms does not apply to concurrency: a lease lives one unit of the rule's rate");
  }
  if (strategy == Strategy::kConcurrency && o.reservation_id_key.empty()) {
    fail(source, node["algorithm"],
         where + ".algorithm: concurrency needs reservation {id_key} beside it: the descriptor entry with the "
                 "request's id, whose second call (Envoy's apply_on_stream_done) releases the lease");
  }
  if (o.algorithm.empty() && o.burst == 0 && o.fail.empty() && o.time_zone.empty() && o.reservation_id_key.empty()) {
    fail(source, node, where + " changes nothing: give algorithm, burst, fail, calendar or reservation");
  }
}

RlsOverlay parse_one(const std::string& source, const YAML::Node& node, const std::string& where) {
  if (!node.IsMap()) fail(source, node, where + " must be a map (match, algorithm, burst, fail, calendar, reservation)");
  yaml::check_keys(source, node, {"match", "algorithm", "burst", "fail", "calendar", "reservation"}, where);
  RlsOverlay o;
  o.where = where;
  parse_match(source, node, where, o);
  parse_changes(source, node, where, o);
  return o;
}

// Whether every rule `later` matches, `first` matches too: each part `first` gives, `later` gives
// alike (an empty part matches any).
bool covers(const RlsOverlay& first, const RlsOverlay& later) {
  const auto part = [](const std::string& a, const std::string& b) { return a.empty() || a == b; };
  return part(first.domain, later.domain) && part(first.policy, later.policy) && part(first.rule, later.rule) &&
         part(first.descriptor, later.descriptor);
}

bool same_match(const RlsOverlay& a, const RlsOverlay& b) {
  return a.domain == b.domain && a.policy == b.policy && a.rule == b.rule && a.descriptor == b.descriptor;
}

}  // namespace

bool RlsOverlay::matches(std::string_view rule_domain, const std::vector<std::string>& path_keys) const {
  if (!domain.empty() && domain != rule_domain) return false;
  if (!policy.empty() && std::none_of(path_keys.begin(), path_keys.end(), [this](const std::string& k) {
        return names_policy_rule(k, policy, rule);
      })) {
    return false;
  }
  return descriptor.empty() || std::find(path_keys.begin(), path_keys.end(), descriptor) != path_keys.end();
}

std::vector<RlsOverlay> parse_overlays(const std::string& source, const YAML::Node& list) {
  if (!list.IsSequence()) fail(source, list, "rls.overlays must be a list");
  std::vector<RlsOverlay> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    RlsOverlay o = parse_one(source, list[i], fmt::format("rls.overlays[{}]", i));
    for (const RlsOverlay& before : out) {
      if (covers(before, o)) {
        fail(source, list[i]["match"],
             o.where + ".match is " + (same_match(before, o) ? "the match" : "within the match") + " of " +
                 before.where + ", and the first overlay that matches a rule applies: this one never would (" +
                 (same_match(before, o) ? "put both changes in one overlay)" : "put the narrower one first)"));
      }
    }
    out.push_back(std::move(o));
  }
  return out;
}

std::uint64_t report_unmatched_overlays(const std::vector<RlsOverlay>& overlays,
                                        const std::vector<std::uint64_t>& hits, const std::string& version) {
  std::uint64_t unmatched = 0;
  for (std::size_t i = 0; i < overlays.size() && i < hits.size(); ++i) {
    if (hits[i] > 0) continue;
    const RlsOverlay& o = overlays[i];
    ++unmatched;
    spdlog::warn("{} matches no rule of the rules of version {} (policy \"{}\"{}{}{})", o.where, version, o.policy,
                 o.rule.empty() ? "" : fmt::format(", rule \"{}\"", o.rule),
                 o.domain.empty() ? "" : fmt::format(", domain \"{}\"", o.domain),
                 o.descriptor.empty() ? "" : fmt::format(", descriptor \"{}\"", o.descriptor));
  }
  return unmatched;
}

}  // namespace floodgate::server
