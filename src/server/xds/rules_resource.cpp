// RateLimitConfig resources → the YAML tree of a rules file → the rules parser.
#include "server/xds/rules_resource.hpp"

#include <cctype>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "ratelimit/config/ratelimit/v3/rls_conf.pb.h"
#include "server/xds/overlay_apply.hpp"

namespace floodgate::server {

const char* const kRateLimitConfigTypeUrl = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig";

namespace {

namespace rlconf = ::ratelimit::config::ratelimit::v3;
using google::protobuf::Struct;
using google::protobuf::Value;

struct Refused {
  std::string message;
};

// Where descriptors() is: the resource's domain, the keys down to here, and the overlays with
// how many rules each matched.
struct Walk {
  std::string domain;
  std::vector<std::string> keys;
  const std::vector<RlsOverlay>& overlays;
  std::vector<std::uint64_t>& hits;
};

// A string that the rules parser must keep a string ("true" stays text): tagged as quoted.
YAML::Node text(const std::string& s) {
  YAML::Node n(s);
  n.SetTag("!");
  return n;
}

YAML::Node number(double d) {
  if (std::trunc(d) == d && std::fabs(d) < 1e18) return YAML::Node(fmt::format("{}", static_cast<long long>(d)));
  return YAML::Node(fmt::format("{}", d));
}

YAML::Node value(const Value& v) {
  switch (v.kind_case()) {
    case Value::kBoolValue: return YAML::Node(v.bool_value() ? "true" : "false");
    case Value::kNumberValue: return number(v.number_value());
    case Value::kStringValue: return text(v.string_value());
    case Value::kListValue: {
      YAML::Node list(YAML::NodeType::Sequence);
      for (const Value& item : v.list_value().values()) list.push_back(value(item));
      return list;
    }
    case Value::kStructValue: {
      YAML::Node map(YAML::NodeType::Map);
      for (const auto& [k, item] : v.struct_value().fields()) map[k] = value(item);
      return map;
    }
    default: return YAML::Node(YAML::NodeType::Null);
  }
}

// metadata.floodgate: floodgate's additions to a rule. Keys of the file's rate_limit (algorithm,
// burst, fail, calendar) and of its descriptor (reservation, share_threshold, value_to_metric);
// the rules parser checks their values as in a file.
void additions(const Value& v, const std::string& where, YAML::Node& node, YAML::Node* rate_limit) {
  if (v.kind_case() != Value::kStructValue) throw Refused{where + ": metadata.floodgate must be a struct"};
  for (const auto& [k, item] : v.struct_value().fields()) {
    const bool rule_key = k == "algorithm" || k == "burst" || k == "fail" || k == "calendar";
    if (!rule_key && k != "reservation" && k != "share_threshold" && k != "value_to_metric") {
      throw Refused{fmt::format("{}: unknown key \"{}\" in metadata.floodgate (known: algorithm, burst, fail, "
                                "calendar, reservation, share_threshold, value_to_metric)", where, k)};
    }
    if ((rule_key || k == "reservation") && rate_limit == nullptr) {
      throw Refused{fmt::format("{}: metadata.floodgate.{} needs a rate_limit on the descriptor", where, k)};
    }
    YAML::Node& into = rule_key ? *rate_limit : node;
    if (item.kind_case() == Value::kStringValue) {
      into[k] = YAML::Node(item.string_value());  // parsed as the rules file would read it
    } else {
      into[k] = value(item);
    }
  }
}

// The first overlay that matches a rule with a rate sets what metadata.floodgate left unset.
// Returns the overlay ("rls.overlays[0]") if the rule moves onto the descriptor above
// (OverlayApplied::lift), else "".
std::string overlay(Walk& walk, const rlconf::RateLimitDescriptor& d, const std::string& path, YAML::Node& node,
             YAML::Node& rate_limit) {
  if (!d.has_rate_limit() || d.rate_limit().unlimited() || d.rate_limit().requests_per_unit() == 0) return {};
  const std::string unit = rlconf::RateLimitUnit_IsValid(d.rate_limit().unit())
                               ? rlconf::RateLimitUnit_Name(d.rate_limit().unit())
                               : std::to_string(d.rate_limit().unit());
  const PushedRule rule{walk.domain, walk.keys, path, d.value(), unit, d.descriptors_size() > 0};
  OverlayApplied applied = apply_overlay(walk.overlays, walk.hits, rule, node, rate_limit);
  if (!applied.error.empty()) throw Refused{std::move(applied.error)};
  return applied.lift ? applied.overlay : std::string();
}

// A rule lifted from `child` (its own key carries the request's id) onto `parent`, which must
// have no rule of its own.
void lift_rule(YAML::Node& parent, const YAML::Node& child, const std::string& parent_path) {
  if (parent["rate_limit"]) {
    throw Refused{fmt::format("{}.reservation.id_key \"{}\" is the key of descriptor \"{}\", whose rule then moves "
                              "onto descriptor \"{}\", which has a rate_limit of its own", child["overlay"].Scalar(),
                              child["key"].Scalar(), child["path"].Scalar(), parent_path)};
  }
  for (const char* key : kLiftedRuleKeys) {
    if (child[key]) parent[key] = child[key];
  }
}

// A pushed rate_limit as a rules file writes it.
YAML::Node rate_limit_of(const rlconf::RateLimitPolicy& p) {
  YAML::Node rate_limit(YAML::NodeType::Map);
  if (!p.name().empty()) rate_limit["name"] = text(p.name());
  if (p.replaces_size() > 0) {
    YAML::Node replaces(YAML::NodeType::Sequence);
    for (const auto& r : p.replaces()) {
      YAML::Node item(YAML::NodeType::Map);
      item["name"] = text(r.name());
      replaces.push_back(item);
    }
    rate_limit["replaces"] = replaces;
  }
  if (p.unlimited()) {
    rate_limit["unlimited"] = "true";
    // A unit beside unlimited is refused, as in a file; UNKNOWN (0) is no unit at all.
    if (p.unit() != rlconf::UNKNOWN) rate_limit["unit"] = text(rlconf::RateLimitUnit_Name(p.unit()));
  } else {
    const std::string unit = rlconf::RateLimitUnit_IsValid(p.unit()) ? rlconf::RateLimitUnit_Name(p.unit())
                                                                      : std::to_string(p.unit());
    rate_limit["unit"] = text(unit);
    rate_limit["requests_per_unit"] = std::to_string(p.requests_per_unit());
  }
  return rate_limit;
}

// The descriptors of `list`; a rule that an overlay lifts (see overlay) goes into `lifted`, for the
// descriptor above (null at the top: refused).
YAML::Node descriptors(const google::protobuf::RepeatedPtrField<rlconf::RateLimitDescriptor>& list,
                       const std::string& prefix, Walk& walk, YAML::Node* lifted) {
  YAML::Node out(YAML::NodeType::Sequence);
  for (const rlconf::RateLimitDescriptor& d : list) {
    YAML::Node node(YAML::NodeType::Map);
    node["key"] = text(d.key());
    if (!d.value().empty()) node["value"] = text(d.value());
    const std::string path = prefix + (prefix.empty() ? "" : ".") + d.key() + (d.value().empty() ? "" : "_" + d.value());
    const std::string where = fmt::format("descriptor \"{}\"", path);
    YAML::Node rate_limit = d.has_rate_limit() ? rate_limit_of(d.rate_limit()) : YAML::Node(YAML::NodeType::Map);
    if (d.has_metadata()) {
      YAML::Node meta(YAML::NodeType::Map);
      for (const auto& [k, v] : d.metadata().fields()) {
        if (k == "floodgate") {
          additions(v, where, node, d.has_rate_limit() ? &rate_limit : nullptr);
        } else {
          meta[k] = value(v);
        }
      }
      if (meta.size() > 0) node["metadata"] = meta;
    }
    walk.keys.push_back(d.key());
    const std::string lift = overlay(walk, d, path, node, rate_limit);
    if (d.has_rate_limit()) node["rate_limit"] = rate_limit;
    if (d.shadow_mode()) node["shadow_mode"] = "true";
    if (d.detailed_metric()) node["detailed_metric"] = "true";
    if (d.quota_mode()) node["quota_mode"] = "true";
    if (d.descriptors_size() > 0) {
      YAML::Node from_below(YAML::NodeType::Null);
      node["descriptors"] = descriptors(d.descriptors(), path, walk, &from_below);
      if (from_below.IsMap()) lift_rule(node, from_below, path);
    }
    walk.keys.pop_back();
    if (lift.empty()) {
      out.push_back(node);
      continue;
    }
    if (lifted == nullptr || lifted->IsMap()) {
      throw Refused{fmt::format("{}.reservation.id_key \"{}\" is the key of descriptor \"{}\", whose rule then "
                                "moves onto the descriptor above it, and {}", lift, d.key(), path,
                                lifted == nullptr ? "it has none" : "another rule moves there too")};
    }
    *lifted = node;
    (*lifted)["path"] = path;
    (*lifted)["overlay"] = lift;
  }
  return out;
}

// The parser's messages start "<source>:<line>:<column>: "; a built tree has no lines to name.
std::string without_position(const std::string& message, const std::string& source) {
  if (!message.starts_with(source + ":")) return message;
  std::size_t i = source.size();
  for (int part = 0; part < 2; ++part) {  // ":<line>" then ":<column>"
    if (i >= message.size() || message[i] != ':') return message;
    ++i;
    const std::size_t digits = i;
    while (i < message.size() && std::isdigit(static_cast<unsigned char>(message[i]))) ++i;
    if (i == digits) return message;
  }
  return source + message.substr(i);
}

}  // namespace

absl::StatusOr<std::shared_ptr<const RlsConfig>> rules_from_resources(
    const google::protobuf::RepeatedPtrField<google::protobuf::Any>& resources, bool merge,
    const std::vector<RlsOverlay>& overlays, std::vector<std::uint64_t>* overlay_hits) {
  std::vector<std::uint64_t> hits(overlays.size(), 0);
  auto config = std::make_shared<RlsConfig>();
  config->source = "xDS";
  std::set<std::string> names;
  for (int i = 0; i < resources.size(); ++i) {
    const google::protobuf::Any& any = resources.Get(i);
    if (any.type_url() != kRateLimitConfigTypeUrl) {
      return absl::InvalidArgumentError(
          fmt::format("resource {}: type {} is not {}", i, any.type_url(), kRateLimitConfigTypeUrl));
    }
    rlconf::RateLimitConfig rc;
    if (!any.UnpackTo(&rc)) {
      return absl::InvalidArgumentError(fmt::format("resource {}: not a valid RateLimitConfig message", i));
    }
    const std::string source = fmt::format("resource \"{}\"", rc.name());
    if (!names.insert(rc.name()).second) {
      return absl::InvalidArgumentError(fmt::format("{}: two resources have this name", source));
    }
    YAML::Node root(YAML::NodeType::Map);
    root["domain"] = text(rc.domain());
    try {
      Walk walk{rc.domain(), {}, overlays, hits};
      root["descriptors"] = descriptors(rc.descriptors(), "", walk, nullptr);
    } catch (const Refused& r) {
      return absl::InvalidArgumentError(fmt::format("{}: {}", source, r.message));
    }
    if (auto s = parse_rls_document(root, source, *config, merge); !s.ok()) {
      return absl::InvalidArgumentError(without_position(std::string(s.message()), source));
    }
  }
  if (overlay_hits != nullptr) *overlay_hits = std::move(hits);
  return std::shared_ptr<const RlsConfig>(std::move(config));
}

}  // namespace floodgate::server
