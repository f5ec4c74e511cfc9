// The rule files' YAML reader: envoyproxy/ratelimit rule files (or documents) into an RlsConfig,
// every rule checked, errors naming the file and line.
#include "server/rls/rules.hpp"

#include <algorithm>
#include <filesystem>
#include <limits>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "absl/strings/str_split.h"

#include "floodgate/storage.hpp"
#include "server/config/yaml_errors.hpp"

namespace floodgate::server {

namespace {

using yaml::check_keys;
using yaml::fail;
using yaml::scalar;

struct Parser {
  const std::string& source;
  const std::string& domain;
  RlsConfig& config;
  std::vector<std::string>& reservation_id_keys;  // the domain's (RlsDomain)

  void replaces(const YAML::Node& rep, const std::string& where, RlsRule& r) {
    if (!rep.IsSequence()) fail(source, rep, where + ": replaces must be a list of {name: NAME}");
    for (const auto& item : rep) {
      if (!item.IsMap() || !item["name"]) fail(source, item, where + ": each replaces item needs a name");
      check_keys(source, item, {"name"}, "a replaces item");
      // `- name:` with nothing after it is a null node: empty, as envoyproxy reads it.
      auto n = item["name"].IsNull() ? std::string() : scalar<std::string>(source, item["name"], "name");
      if (n.empty()) fail(source, item, where + ": a replaces name is empty");
      r.replaces.push_back(std::move(n));
    }
  }

  // floodgate's extensions: algorithm, burst, fail.
  void options(const YAML::Node& node, const std::string& where, RlsRule& r) {
    if (node["algorithm"]) {
      auto s = parse_strategy(scalar<std::string>(source, node["algorithm"], "algorithm"));
      if (!s.ok()) fail(source, node["algorithm"], where + ": " + std::string(s.status().message()));
      r.strategy = *s;
    }
    if (node["burst"]) r.options.burst = yaml::integer(source, node["burst"], where + ": burst", 1, kMaxAmount);
    if (node["fail"]) {
      const auto mode = scalar<std::string>(source, node["fail"], "fail");
      if (mode == "closed") {
        r.options.fail = FailMode::kClosed;
      } else if (mode != "open") {
        fail(source, node["fail"], where + ": fail must be open or closed");
      }
    }
  }

  // floodgate's `reservation: {id_key, ttl_ms}` (RlsRule::reservation_id_key).
  void reservation(const YAML::Node& node, const std::string& path, RlsRule& r) {
    const std::string where = fmt::format("the reservation of \"{}\"", path);
    if (!node.IsMap()) fail(source, node, where + " must be a map with id_key (and ttl_ms)");
    check_keys(source, node, {"id_key", "ttl_ms"}, where);
    if (!node["id_key"]) fail(source, node, where + " needs an id_key: the descriptor key that carries the request's id");
    r.reservation_id_key = scalar<std::string>(source, node["id_key"], "id_key");
    if (r.reservation_id_key.empty()) fail(source, node["id_key"], where + ": id_key is empty");
    r.reservation_ttl = kDefaultReservationTtl;
    if (node["ttl_ms"]) {
      r.reservation_ttl = yaml::integer(source, node["ttl_ms"], where + ": ttl_ms", 1, kMaxReservationTtl / 1000) * 1000;
    }
    if (r.policy == nullptr) {
      fail(source, node, where + ": a reservation needs a limit (requests_per_unit above 0, not unlimited)");
    }
    if (std::find(reservation_id_keys.begin(), reservation_id_keys.end(), r.reservation_id_key) ==
        reservation_id_keys.end()) {
      reservation_id_keys.push_back(r.reservation_id_key);
    }
  }

  // floodgate's `calendar: {time_zone: Europe/Berlin, anchor_day: 31}` beside a unit of day,
  // week, month or year: periods of the calendar in that zone instead of envoyproxy's windows
  // aligned to the Unix epoch (a month of 30 days).
  Calendar calendar(const YAML::Node& node, const std::string& where, RlsUnit unit) {
    const std::string at = where + ": calendar";
    if (!node.IsMap()) fail(source, node, at + " must be a map: {time_zone: <IANA zone>, anchor_day: <1-31, months only>}");
    check_keys(source, node, {"time_zone", "anchor_day"}, at);
    CalendarUnit cu = CalendarUnit::kNone;
    switch (unit) {
      case RlsUnit::kDay: cu = CalendarUnit::kDay; break;
      case RlsUnit::kWeek: cu = CalendarUnit::kWeek; break;
      case RlsUnit::kMonth: cu = CalendarUnit::kMonth; break;
      case RlsUnit::kYear: cu = CalendarUnit::kYear; break;
      default:
        fail(source, node, at + " applies to unit day, week, month or year only");
    }
    if (!node["time_zone"]) fail(source, node, at + " needs a time_zone (an IANA name such as Europe/Berlin, or UTC)");
    const auto zone = scalar<std::string>(source, node["time_zone"], "time_zone");
    int anchor = 1;
    if (node["anchor_day"]) {
      if (cu != CalendarUnit::kMonth) {
        fail(source, node["anchor_day"], fmt::format("{}.anchor_day applies to unit month only, not {}", at, to_string(cu)));
      }
      anchor = static_cast<int>(yaml::integer(source, node["anchor_day"], at + ".anchor_day", 1, 31));
    }
    auto c = Calendar::make(cu, zone, anchor);
    if (!c.ok()) fail(source, node["time_zone"], at + ".time_zone: " + std::string(c.status().message()));
    return *c;
  }

  std::unique_ptr<RlsRule> rule(const YAML::Node& node, const std::string& path,
                                const std::vector<std::string>& identity) {
    const std::string where = fmt::format("the rate_limit of \"{}\"", path);
    if (!node.IsMap()) fail(source, node, where + " must be a map");
    check_keys(source, node,
               {"name", "replaces", "unlimited", "unit", "requests_per_unit", "algorithm", "burst", "fail", "calendar"},
               where);
    auto r = std::make_unique<RlsRule>();
    r->path = path;
    r->identity = identity;
    if (node["name"]) r->name = scalar<std::string>(source, node["name"], "name");
    if (const YAML::Node& rep = node["replaces"]) replaces(rep, where, *r);
    for (const std::string& n : r->replaces) {
      if (n == r->name) fail(source, node["replaces"], fmt::format("{}: replaces names the rule itself (\"{}\")", where, n));
    }
    if (node["unlimited"]) r->unlimited = scalar<bool>(source, node["unlimited"], "unlimited");
    if (r->unlimited) {  // as envoyproxy: a requests_per_unit beside it is ignored, a unit refused
      if (node["unit"]) fail(source, node["unit"], where + ": unlimited takes no unit");
      if (node["calendar"]) fail(source, node["calendar"], where + ": unlimited takes no calendar");
      return r;
    }
    if (!node["unit"]) fail(source, node, where + " needs a unit (second, minute, hour, day, week, month, year)");
    const auto unit_text = scalar<std::string>(source, node["unit"], "unit");
    r->unit = parse_rls_unit(unit_text);
    if (r->unit == RlsUnit::kUnknown) {
      fail(source, node["unit"],
           fmt::format("{}: invalid unit \"{}\" (second, minute, hour, day, week, month, year)", where, unit_text));
    }
    // As envoyproxy: without requests_per_unit the limit is 0, and every request is over it.
    if (node["requests_per_unit"]) {
      const auto rpu = scalar<std::int64_t>(source, node["requests_per_unit"], "requests_per_unit");
      if (rpu < 0 || rpu > std::numeric_limits<std::uint32_t>::max()) {
        fail(source, node["requests_per_unit"], where + ": requests_per_unit must be a whole number from 0 to 4294967295");
      }
      r->requests_per_unit = static_cast<std::uint32_t>(rpu);
    }
    options(node, where, *r);
    if (node["calendar"]) r->calendar = calendar(node["calendar"], where, r->unit);
    if (r->requests_per_unit > 0) {
      Limit limit;
      limit.amount = r->requests_per_unit;
      limit.period = rls_unit_period(r->unit);
      // `algorithm: concurrency`: requests_per_unit leases at once, each living one unit.
      limit.concurrent = r->strategy == Strategy::kConcurrency;
      if (r->calendar) limit = *Limit::make(r->requests_per_unit, r->calendar);
      auto p = Policy::make(fmt::format("{}/{}", domain, path), r->strategy, std::vector<Limit>{limit},
                            r->options);
      if (!p.ok()) fail(source, node, where + ": " + std::string(p.status().message()));
      // The rule's own state: its identity is the domain and the descriptor's keys and values,
      // each a part of its own (the stat-key path joins them ambiguously: "a_b" is key "a_b" or
      // key "a" with value "b").
      r->policy = std::make_shared<const Policy>(p->with_identity(PolicyKind::kRule, identity));
      r->counter = rls_counter(*r->policy);
    } else if (node["burst"] || node["algorithm"] || node["calendar"]) {
      fail(source, node, where + ": requests_per_unit 0 denies every request; algorithm, burst and calendar do not apply");
    }
    return r;
  }

  // `metadata`: any YAML tree; plain scalars become booleans, numbers or null where YAML reads
  // them so (as envoyproxy's YAML library does), quoted ones stay strings.
  RlsMeta meta(const YAML::Node& node) {
    RlsMeta m;
    if (node.IsMap()) {
      m.kind = RlsMeta::Kind::kMap;
      for (const auto& kv : node) {
        m.names.push_back(scalar<std::string>(source, kv.first, "metadata key"));
        m.items.push_back(meta(kv.second));
      }
    } else if (node.IsSequence()) {
      m.kind = RlsMeta::Kind::kList;
      for (const auto& item : node) m.items.push_back(meta(item));
    } else if (node.IsScalar() && node.Tag() != "!") {
      if (YAML::convert<bool>::decode(node, m.boolean)) {
        m.kind = RlsMeta::Kind::kBool;
      } else if (YAML::convert<double>::decode(node, m.number)) {
        m.kind = RlsMeta::Kind::kNumber;
      } else {
        m.kind = RlsMeta::Kind::kString;
        m.string = node.Scalar();
      }
    } else if (node.IsScalar()) {
      m.kind = RlsMeta::Kind::kString;
      m.string = node.Scalar();
    }
    return m;
  }

  bool flag(const YAML::Node& d, const char* key) { return d[key] && scalar<bool>(source, d[key], key); }

  std::string text(const YAML::Node& node, const char* what) {
    auto v = scalar<std::string>(source, node, what);
    if (v.find('\0') != std::string::npos || v.find('\1') != std::string::npos) {
      fail(source, node, fmt::format("a descriptor {} has a control character \\0 or \\1", what));
    }
    return v;
  }

  // The rule of descriptor `d` (its rate_limit `rl` and the flags beside it) into `node`.
  void descriptor_rule(const YAML::Node& d, const YAML::Node& rl, const std::string& path,
                       const std::vector<std::string>& id, bool walks, std::shared_ptr<const RlsMeta> metadata,
                       RlsNode& node) {
    node.rule = rule(rl, path, id);
    node.rule->shadow_mode = flag(d, "shadow_mode");
    node.rule->quota_mode = flag(d, "quota_mode");
    node.rule->detailed_metric = flag(d, "detailed_metric");
    node.rule->walk = walks;
    node.rule->metadata = std::move(metadata);
    if (const YAML::Node& res = d["reservation"]) reservation(res, path, *node.rule);
    if (node.rule->strategy == Strategy::kConcurrency && node.rule->reservation_id_key.empty()) {
      fail(source, rl,
           fmt::format("\"{}\" limits requests in progress (algorithm concurrency): it needs a reservation "
                       "{{id_key, …}} naming the descriptor entry with the request's id, so that the call at "
                       "the stream's end releases the lease",
                       path));
    }
    config.rules.push_back(node.rule.get());
    config.rule_domains.push_back(domain);
  }

  void descriptors(const YAML::Node& list, RlsNode& parent, const std::string& prefix,
                   const std::vector<std::string>& parent_id, bool walk) {
    if (list.IsNull()) return;
    if (!list.IsSequence()) fail(source, list, "descriptors must be a list");
    for (const auto& d : list) {
      if (!d.IsMap()) fail(source, d, "a descriptor must be a map with a key");
      check_keys(source, d,
                 {"key", "value", "rate_limit", "descriptors", "shadow_mode", "quota_mode", "detailed_metric",
                  "value_to_metric", "share_threshold", "metadata", "reservation"},
                 "a descriptor");
      if (!d["key"]) fail(source, d, "a descriptor needs a key");
      const auto key = text(d["key"], "key");
      if (key.empty()) fail(source, d["key"], "a descriptor key is empty");
      // As envoyproxy: an empty value is no value (a key-only node).
      const std::string value = d["value"] ? text(d["value"], "value") : std::string();
      const bool has_value = !value.empty();
      // A part per key and per value ('=' before a value, "" for none): unambiguous.
      std::vector<std::string> id = parent_id;
      id.push_back(key);
      id.push_back(has_value ? "=" + value : std::string());
      // envoyproxy/ratelimit's stat key: key_value, levels joined by '.'.
      const std::string path = prefix + (prefix.empty() ? "" : ".") + key + (has_value ? "_" + value : "");
      const std::string child = has_value ? rls_child_key(key, value) : rls_default_key(key);
      if (parent.children.contains(child)) {
        fail(source, d, fmt::format("duplicate descriptor \"{}\" in domain \"{}\"", path, domain));
      }
      auto node = std::make_unique<RlsNode>();
      node->config_value = value;
      node->share_threshold = flag(d, "share_threshold");
      node->value_to_metric = flag(d, "value_to_metric");
      const bool wildcard = value.find('*') != std::string::npos;
      if (node->share_threshold && !wildcard) {
        fail(source, d["share_threshold"],
             fmt::format("share_threshold needs a wildcard value (with '*'), and \"{}\" has none", path));
      }
      const bool walks = walk || node->share_threshold || node->value_to_metric;
      std::shared_ptr<const RlsMeta> metadata;
      if (const YAML::Node& m = d["metadata"]; m && !m.IsNull()) {
        if (!m.IsMap()) fail(source, m, "metadata must be a map");
        metadata = std::make_shared<const RlsMeta>(meta(m));
      }
      if (const YAML::Node& rl = d["rate_limit"]) descriptor_rule(d, rl, path, id, walks, std::move(metadata), *node);
      if (d["reservation"] && !d["rate_limit"]) {
        fail(source, d["reservation"], fmt::format("the reservation of \"{}\" needs a rate_limit beside it", path));
      }
      if (const YAML::Node& nested = d["descriptors"]) descriptors(nested, *node, path, id, walks);
      if (wildcard) parent.wildcards.push_back({key, absl::StrSplit(value, '*'), child});
      parent.children.emplace(child, std::move(node));
    }
  }
};

void parse_rls_root(const YAML::Node& root, const std::string& source, RlsConfig& into, bool merge);

}  // namespace

absl::Status parse_rls_file(const std::string& yaml, const std::string& source, RlsConfig& into, bool merge) {
  return yaml::guarded(source, [&] {
    const YAML::Node root = yaml::load_document(yaml, source);
    parse_rls_root(root, source, into, merge);
  });
}

absl::Status parse_rls_document(const YAML::Node& root, const std::string& source, RlsConfig& into, bool merge) {
  return yaml::guarded(source, [&] { parse_rls_root(root, source, into, merge); });
}

namespace {

void parse_rls_root(const YAML::Node& root, const std::string& source, RlsConfig& into, bool merge) {
  if (!root.IsMap()) fail(source, root, "a rate-limit file must be a map with domain and descriptors");
  check_keys(source, root, {"domain", "descriptors"}, "the file");
  if (!root["domain"]) fail(source, root, "the file needs a domain");
  const auto domain = scalar<std::string>(source, root["domain"], "domain");
  if (domain.empty()) fail(source, root["domain"], "the domain is empty");
  RlsDomain* d = nullptr;
  std::unique_ptr<RlsDomain> fresh;
  if (auto it = into.domains.find(domain); it != into.domains.end()) {
    if (!merge) {
      fail(source, root["domain"],
           fmt::format("domain \"{}\" is already defined in {}", domain, it->second->source));
    }
    d = it->second.get();  // MERGE_DOMAIN_CONFIG: this file's descriptors join the domain's
  } else {
    fresh = std::make_unique<RlsDomain>();
    fresh->domain = domain;
    fresh->source = source;
    d = fresh.get();
  }
  Parser p{source, domain, into, d->reservation_id_keys};
  if (const YAML::Node& list = root["descriptors"]) p.descriptors(list, d->root, "", {domain}, false);
  if (fresh) into.domains.emplace(domain, std::move(fresh));
}

}  // namespace

absl::StatusOr<std::shared_ptr<const RlsConfig>> load_rls_config(const std::string& dir, bool merge) {
  auto files = yaml::yaml_files_in(dir, "rate-limit files");
  if (!files.ok()) return files.status();
  auto config = std::make_shared<RlsConfig>();
  config->source = dir;
  for (const std::string& f : *files) {
    auto text = yaml::read_config_file(f);
    if (!text.ok()) return text.status();
    if (auto s = parse_rls_file(*text, f, *config, merge); !s.ok()) return s;
  }
  return std::shared_ptr<const RlsConfig>(std::move(config));
}

}  // namespace floodgate::server
