// Loading the RLQS rule files: every error names the file, line and column.
#include "server/rlqs/rules.hpp"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "floodgate/rate.hpp"
#include "server/config/yaml_errors.hpp"

namespace floodgate::server::rlqs {

namespace {

using yaml::fail;
using yaml::scalar;

// The largest burst: max_tokens is a uint32 on the wire, and the sum over clients is the burst.
constexpr std::int64_t kMaxBurst = 0xFFFFFFFFLL;

std::vector<std::pair<std::string, std::string>> parse_match(const std::string& source, const YAML::Node& node,
                                                             const std::string& what) {
  if (!node.IsMap()) fail(source, node, fmt::format("{} must be a map of bucket_id entries, e.g. {{api: chat}}", what));
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& kv : node) {
    const auto key = scalar<std::string>(source, kv.first, what + " key");
    const auto value = scalar<std::string>(source, kv.second, fmt::format("{}.{}", what, key));
    if (key.empty()) fail(source, kv.first, fmt::format("{} has an empty key", what));
    if (value.empty()) fail(source, kv.second, fmt::format("{}.{} is empty (\"*\" matches any value)", what, key));
    out.emplace_back(key, value == "*" ? std::string() : value);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void parse_limit(const std::string& source, const YAML::Node& node, const std::string& what, Rule& rule) {
  const auto text = scalar<std::string>(source, node, what);
  auto limits = parse_limits(text);
  if (!limits.ok()) fail(source, node, fmt::format("{}: {}", what, std::string(limits.status().message())));
  if (limits->size() != 1) fail(source, node, fmt::format("{}: one rate, e.g. 600/minute (got \"{}\")", what, text));
  const Limit& l = limits->front();
  if (l.calendar || l.concurrent) {
    fail(source, node, fmt::format("{}: a rate per period, e.g. 600/minute (no calendar, no concurrency)", what));
  }
  rule.amount = l.amount;
  rule.period = l.period;
  rule.burst = l.burst;
  if (rule.per_second() * kMaxFillSeconds < 1) {
    fail(source, node, fmt::format("{}: at least 1/day (Envoy's token bucket counts whole tokens)", what));
  }
}

Rule parse_rule(const std::string& source, const YAML::Node& node, const std::string& what) {
  if (!node.IsMap()) fail(source, node, fmt::format("{} must be a map with match and limit or action", what));
  yaml::check_keys(source, node, {"match", "limit", "burst", "action"}, what);
  Rule rule;
  rule.name = fmt::format("{}:{}", std::filesystem::path(source).filename().string(), node.Mark().line + 1);
  if (!node["match"]) fail(source, node, fmt::format("{} needs a match (e.g. match: {{api: chat}}; {{}}: any)", what));
  rule.match = parse_match(source, node["match"], what + ".match");
  const YAML::Node& action = node["action"];
  const YAML::Node& limit = node["limit"];
  if (action && limit) fail(source, action, fmt::format("{}: limit and action are two answers: give one", what));
  if (!action && !limit) fail(source, node, fmt::format("{} needs a limit (e.g. 600/minute) or an action", what));
  if (action) {
    const auto a = scalar<std::string>(source, action, what + ".action");
    if (a == "allow") rule.action = Action::kAllow;
    else if (a == "deny") rule.action = Action::kDeny;
    else fail(source, action, fmt::format("{}.action must be allow or deny (got \"{}\")", what, a));
    if (node["burst"]) fail(source, node["burst"], fmt::format("{}.burst goes with a limit", what));
    return rule;
  }
  parse_limit(source, limit, what + ".limit", rule);
  if (const YAML::Node& b = node["burst"]) rule.burst = yaml::integer(source, b, what + ".burst", 1, kMaxBurst);
  if (rule.burst == 0) {  // one second's worth of the rate, at least 1
    rule.burst = std::clamp<std::int64_t>(
        static_cast<std::int64_t>(rule.per_second()), 1, kMaxBurst);
  }
  rule.burst = std::min(rule.burst, kMaxBurst);
  return rule;
}

}  // namespace

bool Rule::matches(const std::map<std::string, std::string>& bucket) const {
  for (const auto& [key, value] : match) {
    const auto it = bucket.find(key);
    if (it == bucket.end() || (!value.empty() && it->second != value)) return false;
  }
  return true;
}

const Rule* Rules::find(const std::string& domain, const std::map<std::string, std::string>& bucket) const {
  const auto it = domains.find(domain);
  if (it == domains.end()) return nullptr;
  for (const Rule& r : it->second) {
    if (r.matches(bucket)) return &r;
  }
  return nullptr;
}

absl::Status parse_rules_file(const std::string& text, const std::string& source, Rules& into) {
  return yaml::guarded(source, [&] {
    const YAML::Node root = yaml::load_document(text, source);
    if (!root.IsMap()) fail(source, root, "an RLQS rule file is a map with domain and buckets");
    yaml::check_keys(source, root, {"domain", "buckets"}, "the file");
    if (!root["domain"]) fail(source, root, "domain is missing");
    const auto domain = scalar<std::string>(source, root["domain"], "domain");
    if (domain.empty()) fail(source, root["domain"], "domain is empty");
    if (into.domains.contains(domain)) {
      fail(source, root["domain"], fmt::format("domain \"{}\" is also in another file of {}", domain, into.source));
    }
    const YAML::Node& buckets = root["buckets"];
    if (!buckets || !buckets.IsSequence()) fail(source, buckets ? buckets : root, "buckets must be a list of rules");
    std::vector<Rule> rules;
    for (std::size_t i = 0; i < buckets.size(); ++i) {
      Rule r = parse_rule(source, buckets[i], fmt::format("buckets[{}]", i));
      r.name += " " + domain;
      rules.push_back(std::move(r));
    }
    into.domains.emplace(domain, std::move(rules));
  });
}

absl::StatusOr<std::shared_ptr<const Rules>> load_rules(const std::string& dir) {
  auto files = yaml::yaml_files_in(dir, "RLQS rule files");
  if (!files.ok()) return files.status();
  auto rules = std::make_shared<Rules>();
  rules->source = dir;
  for (const std::string& f : *files) {
    auto text = yaml::read_config_file(f);
    if (!text.ok()) return text.status();
    if (auto s = parse_rules_file(*text, f, *rules); !s.ok()) return s;
  }
  return std::shared_ptr<const Rules>(std::move(rules));
}

}  // namespace floodgate::server::rlqs
