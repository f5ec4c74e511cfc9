// Reading one `policies:` entry of the configuration file into a ServicePolicy.
#include "server/config/policy.hpp"

#include <fmt/format.h>

#include "server/config/limits.hpp"
#include "server/config/yaml_errors.hpp"

namespace floodgate::server {

bool is_http_token(std::string_view name) noexcept {
  if (name.empty()) return false;
  for (const char c : name) {
    const bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (!alnum && std::string_view("!#$%&'*+-.^_`|~").find(c) == std::string_view::npos) return false;
  }
  return true;
}

namespace {

bool has_control(std::string_view s) {
  for (const char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  }
  return false;
}

}  // namespace

absl::Status check_policy_name(std::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("a policy name is empty");
  if (name.size() > limits::kMaxNameBytes) {
    return absl::InvalidArgumentError(
        fmt::format("a policy name is longer than {} bytes", limits::kMaxNameBytes));
  }
  if (has_control(name)) {
    return absl::InvalidArgumentError("a policy name has a control character (tab, newline, …)");
  }
  // The service's own names: the metrics slots "inline" (inline limits) and "other" (policies
  // beyond the metrics bound), and the names of inline policies ("inline gcra 10/minute").
  if (name == "inline" || name == "other" || name.rfind("inline ", 0) == 0) {
    return absl::InvalidArgumentError(fmt::format(
        "the policy name \"{}\" is reserved (inline, other and names starting with \"inline \" are "
        "the service's own)",
        name));
  }
  return absl::OkStatus();
}

namespace {

using yaml::check_keys;
using yaml::fail;
using yaml::scalar;

// One of `allowed` (the first is the default when absent).
std::string choice(const std::string& source, const YAML::Node& node, const std::string& what,
                   std::initializer_list<const char*> allowed) {
  const auto v = scalar<std::string>(source, node, what);
  std::string list;
  for (const char* a : allowed) {
    if (v == a) return v;
    list += (list.empty() ? "" : ", ") + std::string(a);
  }
  fail(source, node, fmt::format("{} must be one of {}, not \"{}\"", what, list, v));
}

PolicyOptions parse_options(const std::string& source, const YAML::Node& node, const std::string& where,
                            std::vector<std::string>* warnings) {
  PolicyOptions o;
  if (node["burst"]) o.burst = yaml::integer(source, node["burst"], where + " burst", 1, kMaxAmount);
  if (node["anchor"] && choice(source, node["anchor"], where + " anchor", {"clock", "first-hit"}) == "first-hit") {
    o.anchor = Anchor::kFirstHit;
  }
  if (node["shape"]) o.shape = scalar<bool>(source, node["shape"], where + " shape");
  if (node["fail"] && choice(source, node["fail"], where + " fail", {"open", "closed"}) == "closed") {
    o.fail = FailMode::kClosed;
  }
  if (node["blocked_cache"]) {
    o.blocked_cache = static_cast<std::size_t>(yaml::integer(
        source, node["blocked_cache"], where + " blocked_cache", 0, limits::kMaxBlockedCache, "keys; 0 = off"));
  }
  // budget_slice: {max_slice: 1000, interval_ms: 100, share: 4}; budget_lease, its old spelling, is
  // accepted for one release with a warning.
  const char* key = node["budget_slice"] ? "budget_slice" : "budget_lease";
  if (node["budget_slice"] && node["budget_lease"]) {
    fail(source, node["budget_lease"], where + ": budget_lease is the old spelling of budget_slice: give only budget_slice");
  }
  if (const YAML::Node& slice = node[key]) {
    if (std::string_view(key) == "budget_lease" && warnings != nullptr) {
      warnings->push_back(fmt::format("{}: {}: budget_lease is deprecated, write budget_slice (the old spelling is "
                                      "accepted until the next release)", yaml::where(source, slice.Mark()), where));
    }
    const std::string what = where + " " + key;
    if (!slice.IsMap()) fail(source, slice, what + " must be a map, e.g. {max_slice: 1000}");
    check_keys(source, slice, {"max_slice", "interval_ms", "share"}, what);
    if (!slice["max_slice"]) fail(source, slice, what + " needs max_slice (units, 1 to 2^53)");
    o.budget.max_slice = yaml::integer(source, slice["max_slice"], what + " max_slice", 1, kMaxAmount, "units");
    if (slice["interval_ms"]) {
      o.budget.interval = yaml::integer(source, slice["interval_ms"], what + " interval_ms", kMinBudgetInterval / 1000,
                                        kMaxBudgetInterval / 1000, "milliseconds") * 1000;
    }
    if (slice["share"]) o.budget.share = yaml::integer(source, slice["share"], what + " share", 1, kMaxBudgetShare);
  }
  return o;
}

KeySource parse_key_source(const std::string& source, const YAML::Node& key, const std::string& where) {
  // key: {header: X-Api-Key}  or  key: {query: api_key}
  if (!key.IsMap() || key.size() != 1 || !(key["header"] || key["query"])) {
    fail(source, key, where + ": key must be {header: NAME} or {query: NAME}");
  }
  KeySource ks;
  const bool header = static_cast<bool>(key["header"]);
  const YAML::Node& name = header ? key["header"] : key["query"];
  ks.kind = header ? KeySource::Kind::kHeader : KeySource::Kind::kQuery;
  if (name.IsNull() || (name.IsScalar() && name.Scalar().empty())) {
    fail(source, key, fmt::format("{}: key {} needs a name, e.g. {}", where, header ? "header" : "query",
                                   header ? "{header: X-Api-Key}" : "{query: api_key}"));
  }
  ks.name = scalar<std::string>(source, name, where + " key");
  if (header && !is_http_token(ks.name)) {
    fail(source, name, fmt::format("{}: key header \"{}\" is not an HTTP field name (letters, digits "
                                   "and !#$%&'*+-.^_`|~, no spaces or line breaks)",
                                   where, ks.name));
  }
  if (!header && (ks.name.empty() || has_control(ks.name) || ks.name.size() > limits::kMaxNameBytes)) {
    fail(source, name, fmt::format("{}: key query must be a parameter name of 1 to {} bytes without "
                                   "control characters", where, limits::kMaxNameBytes));
  }
  return ks;
}

// Policy::make's message without its own `policy "NAME": ` prefix (the caller names the policy).
std::string reason_of(const absl::Status& status, std::string_view name) {
  std::string_view m(status.message().data(), status.message().size());
  const std::string prefix = fmt::format("policy \"{}\": ", name);
  if (m.starts_with(prefix)) m.remove_prefix(prefix.size());
  return std::string(m);
}

// The field a refusal of Policy::make is about: burst, shape, anchor or budget_slice (or its old
// spelling) when it names one and the entry has it, else the limit.
YAML::Node field_of(const YAML::Node& node, std::string_view reason) {
  for (const char* field : {"burst", "shape", "anchor", "budget_slice"}) {
    if (reason.find(field) != std::string_view::npos && node[field]) return node[field];
  }
  if (reason.find("budget_slice") != std::string_view::npos && node["budget_lease"]) return node["budget_lease"];
  return node["limit"];
}

void parse_overrides(const std::string& source, const YAML::Node& overrides, const std::string& where,
                     const Policy& base, const PolicyOptions& options, ServicePolicy& sp) {
  if (!overrides.IsMap()) fail(source, overrides, where + ": overrides must map keys to limits");
  for (const auto& kv : overrides) {
    const auto key = scalar<std::string>(source, kv.first, where + " override key");
    if (key.size() > limits::kMaxNameBytes) {
      fail(source, kv.first, fmt::format("{}: an override key is longer than {} bytes", where, limits::kMaxNameBytes));
    }
    const auto text = scalar<std::string>(source, kv.second, "override");
    auto op = Policy::make(fmt::format("{}/override/{}", base.name(), key), base.strategy(), text, options);
    if (!op.ok()) {
      fail(source, kv.second, fmt::format("{} override \"{}\": {}", where, key,
                                          reason_of(op.status(), fmt::format("{}/override/{}", base.name(), key))));
    }
    // Its own state, whatever the names: the identity is (policy, key), not the display name.
    sp.overrides.emplace(key, std::make_shared<const Policy>(op->with_identity(PolicyKind::kOverride, {base.name(), key})));
  }
}

}  // namespace

ServicePolicy parse_policy(const std::string& source, const YAML::Node& node, std::vector<std::string>* warnings) {
  if (!node.IsMap()) fail(source, node, "each policy must be a map with name, strategy and limit");
  check_keys(source, node,
             {"name", "strategy", "limit", "burst", "anchor", "shape", "key", "fail", "shadow",
              "blocked_cache", "budget_slice", "budget_lease", "overrides", "allow"},
             "a policy");
  if (!node["name"]) fail(source, node, "a policy needs a name");
  const auto name = scalar<std::string>(source, node["name"], "name");
  if (auto s = check_policy_name(name); !s.ok()) fail(source, node["name"], std::string(s.message()));
  const std::string where = fmt::format("policy \"{}\"", name);
  if (!node["limit"]) fail(source, node, where + " needs a limit, e.g. limit: 10/minute");
  auto strategy = parse_strategy(node["strategy"] ? scalar<std::string>(source, node["strategy"], "strategy")
                                                  : std::string("gcra"));
  if (!strategy.ok()) fail(source, node["strategy"], where + ": " + std::string(strategy.status().message()));
  PolicyOptions o = parse_options(source, node, where, warnings);
  const YAML::Node& limit_node = node["limit"];
  auto policy = Policy::make(name, *strategy, scalar<std::string>(source, limit_node, "limit"), o);
  if (!policy.ok()) {
    const std::string reason = reason_of(policy.status(), name);
    fail(source, field_of(node, reason), where + ": " + reason);
  }

  ServicePolicy sp;
  sp.policy = std::make_shared<const Policy>(*std::move(policy));
  if (node["shadow"]) sp.shadow = scalar<bool>(source, node["shadow"], where + " shadow");
  if (const YAML::Node& key = node["key"]) sp.key_source = parse_key_source(source, key, where);
  if (const YAML::Node& overrides = node["overrides"]) parse_overrides(source, overrides, where, *sp.policy, o, sp);
  if (const YAML::Node& allow = node["allow"]) {
    if (!allow.IsSequence()) fail(source, allow, where + ": allow must be a list of keys");
    for (const auto& k : allow) sp.allow.insert(scalar<std::string>(source, k, where + " allow"));
  }
  return sp;
}

}  // namespace floodgate::server
