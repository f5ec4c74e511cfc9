// Rate-limit rules in the YAML format of envoyproxy/ratelimit: a directory of files, one domain
// each (or several merged), loaded unchanged with every key of current envoyproxy/ratelimit;
// floodgate adds optional `algorithm`, `burst`, `fail` and `calendar` to `rate_limit`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "floodgate/policy.hpp"

namespace YAML {
class Node;
}

namespace floodgate::server {

/// The time units of envoyproxy/ratelimit, numbered as Envoy's RateLimitUnit enum.
enum class RlsUnit : std::uint8_t {
  kUnknown = 0, kSecond = 1, kMinute = 2, kHour = 3, kDay = 4, kMonth = 5, kYear = 6, kWeek = 7,
};

/// The length of a unit in µs as envoyproxy/ratelimit divides time: month 30 days, year 365 days.
/// kUnknown → 0.
Micros rls_unit_period(RlsUnit unit) noexcept;

/// "second", "MINUTE", … (case-insensitive) → the unit; kUnknown for anything else.
RlsUnit parse_rls_unit(std::string_view text) noexcept;

/// A descriptor's `metadata`: any YAML tree (a map at the top), kept as plain values so that the
/// loader needs no protobuf; the service turns it into a google.protobuf.Struct at reload.
struct RlsMeta {
  enum class Kind : std::uint8_t { kNull, kBool, kNumber, kString, kList, kMap };
  Kind kind = Kind::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  // kList: the elements; kMap: the values, named by `names` (in file order). Two vectors rather
  // than pairs: a pair needs RlsMeta complete, a vector does not (clang + libstdc++ refuse it).
  std::vector<RlsMeta> items;
  std::vector<std::string> names;  // kMap
};

/// A `rate_limit` block of one descriptor node.
struct RlsRule {
  /// Metric label and `current_limit.name` fallback: the key path, envoyproxy's stat key
  /// ("database_users", "message_type_marketing.to_number").
  std::string path;
  /// Whose state the rule counts (Policy::identity of kind kRule): the domain, then per level the
  /// key and "=value" (or "" for a key-only node). A request's limit override of this rule takes
  /// the same parts with PolicyKind::kRuleOverride.
  std::vector<std::string> identity;
  /// `rate_limit.name` (optional; what `replaces` refers to).
  std::string name;
  std::vector<std::string> replaces;
  bool unlimited = false;
  std::uint32_t requests_per_unit = 0;  ///< 0: every request is over limit (a block list)
  RlsUnit unit = RlsUnit::kUnknown;
  /// floodgate's `calendar` beside `unit` (day, week, month, year): the unit is a period of this
  /// calendar (time zone, and anchor day for a month), not envoyproxy's epoch-aligned window.
  /// None (the default): envoyproxy's meaning, a month of 30 days.
  Calendar calendar;
  bool shadow_mode = false;
  /// envoyproxy: metrics carry the request's values. Ours: bounded (see RlsMetrics).
  bool detailed_metric = false;
  /// `quota_mode`: over its limit, the descriptor's status is OVER_LIMIT but the request is
  /// refused only when every quota-mode descriptor of it is over (and no other one is).
  bool quota_mode = false;
  /// Some node on the rule's path has `share_threshold` or `value_to_metric`: the storage key or
  /// the metric label depends on how each entry matched (RlsDomain::walk), not only on the rule.
  bool walk = false;
  /// The descriptor's `metadata` (null when none): merged into the response's dynamic metadata
  /// when the descriptor passes and the service is asked to (RlsSettings::dynamic_metadata).
  std::shared_ptr<const RlsMeta> metadata;
  /// The policy the storage applies (null when unlimited or requests_per_unit is 0): the rule's
  /// algorithm (default fixed window aligned to the clock, as envoyproxy), burst and fail mode.
  std::shared_ptr<const Policy> policy;
  /// The policy of the rule as a quota counts (quota_mode, QUOTA_MODE), for a fixed window: the
  /// same window and state with an amount no count reaches (rls_counter), so that every hit is
  /// counted even past requests_per_unit, as envoyproxy counts. Null for other algorithms.
  std::shared_ptr<const Policy> counter;
  /// The strategy and options, for limits that a request overrides.
  Strategy strategy = Strategy::kFixedWindow;
  PolicyOptions options;
  /// floodgate's `reservation: {id_key, ttl_ms}` beside the rate_limit (docs/envoy.md, "Token
  /// budgets"): the descriptor entry `id_key` carries the request's id; it is taken out before
  /// matching and is never part of the counter's key. The first call with an id reserves its
  /// hits, the second settles with its hits (Effect::kReserveOrSettle). Empty id_key: none.
  std::string reservation_id_key;
  Micros reservation_ttl = 0;
};

/// A fixed window aligned to the clock (or to a calendar) counted as envoyproxy counts: the same
/// name, window, kind and identity (so the same state) with an amount of kMaxAmount, which no count
/// reaches: every hit is committed, and the count (Decision::limit − Decision::remaining) is
/// compared with the rule's requests_per_unit by the caller. Null for any other policy.
std::shared_ptr<const Policy> rls_counter(const Policy& policy);

/// Whether `value` fits a wildcard pattern split at its '*'s (each '*' stands for any run of
/// bytes, possibly empty): "/api*v1" → {"/api", "v1"}; "svc*ep*rpc" → {"svc", "ep", "rpc"}.
bool rls_wildcard_match(const std::vector<std::string>& parts, std::string_view value) noexcept;

/// How a descriptor entry found its node.
enum class RlsHow : std::uint8_t { kExact, kWildcard, kDefault };

/// One level of a domain's descriptor tree. Children are found by "key" + '\0' + "value" (a node
/// with a value) or by "key" + '\1' (a key-only node, the default for any value).
struct RlsNode {
  absl::flat_hash_map<std::string, std::unique_ptr<RlsNode>> children;
  /// Children whose value has a '*' (envoyproxy's wildcard, anywhere in the value and any number
  /// of times), in file order: {key, the value split at '*', the child's key in `children`}.
  /// Tried after an exact value and before the key-only default; the first that matches wins.
  struct Wildcard {
    std::string key;
    std::vector<std::string> parts;
    std::string child;
  };
  std::vector<Wildcard> wildcards;
  std::unique_ptr<RlsRule> rule;  ///< null: no rate_limit at this node
  std::string config_value;       ///< the configured value ("" for a key-only node)
  /// `share_threshold` (only on a wildcard value): every value the wildcard matches counts in one
  /// state, named by the pattern.
  bool share_threshold = false;
  /// `value_to_metric`: the metric label carries the request's value at this level.
  bool value_to_metric = false;

  /// The child an entry leads to: key+value, else the first wildcard that fits, else the
  /// key-only default; null when none (rls/match.cpp). `how` (optional) says which.
  [[nodiscard]] const RlsNode* child(std::string_view key, std::string_view value,
                                     RlsHow* how = nullptr) const;
};

/// One level of a walk: the node an entry found and how.
struct RlsStep {
  const RlsNode* node;
  RlsHow how;

  /// The entry matched a `share_threshold` wildcard: every value it matches shares one counter,
  /// keyed by the configured pattern instead of the value.
  [[nodiscard]] bool shares_wildcard() const noexcept { return how == RlsHow::kWildcard && node->share_threshold; }
};

struct RlsDomain {
  std::string domain;
  std::string source;  ///< the file it came from
  RlsNode root;
  /// The id_key of every rule of the domain with a reservation (few: usually one).
  std::vector<std::string> reservation_id_keys;

  /// The rule of a descriptor (a range of entries with key() and value()): its entries walk the
  /// tree, the most specific child at each level (RlsNode::child); the rule is the last entry's
  /// node's rate_limit. Null when an entry finds no child or that node has no rule.
  template <class Entries>
  [[nodiscard]] const RlsRule* match(const Entries& entries) const {
    const RlsNode* node = &root;
    for (const auto& e : entries) {
      node = node->child(e.key(), e.value());
      if (node == nullptr) return nullptr;
    }
    return node->rule.get();
  }

  /// As match, recording each level in `steps` (for rules with RlsRule::walk).
  template <class Entries>
  [[nodiscard]] const RlsRule* walk(const Entries& entries, std::vector<RlsStep>& steps) const {
    const RlsNode* node = &root;
    steps.clear();
    for (const auto& e : entries) {
      RlsHow how = RlsHow::kExact;
      node = node->child(e.key(), e.value(), &how);
      if (node == nullptr) return nullptr;
      steps.push_back({node, how});
    }
    return node->rule.get();
  }
};

/// All domains of an --rls-config directory. Immutable once loaded.
struct RlsConfig {
  std::string source = "<none>";
  absl::flat_hash_map<std::string, std::unique_ptr<RlsDomain>> domains;
  /// Every rule, for metrics (pointers into `domains`).
  std::vector<const RlsRule*> rules;
  /// Domain of each entry of `rules`.
  std::vector<std::string> rule_domains;

  [[nodiscard]] const RlsDomain* find(std::string_view domain) const;
};

/// The child key of a descriptor entry (see RlsNode).
std::string rls_child_key(std::string_view key, std::string_view value);
std::string rls_default_key(std::string_view key);

/// Parses one file's text (one domain) into `into`. Errors (InvalidArgument) are
/// "<source>:<line>: <reason>", like the main configuration. A domain already in `into` is an
/// error naming both files, unless `merge` (envoyproxy's MERGE_DOMAIN_CONFIG): then the file's
/// descriptors join the domain's (a descriptor defined twice at one level is still an error).
absl::Status parse_rls_file(const std::string& yaml, const std::string& source, RlsConfig& into,
                            bool merge = false);

/// The same for a document already in YAML form (rules that did not come from a file: a resource
/// pushed over xDS, xds/rules_resource.hpp): the same checks and messages, `source` naming it.
absl::Status parse_rls_document(const YAML::Node& root, const std::string& source, RlsConfig& into,
                                bool merge = false);

/// Loads every *.yaml / *.yml file of `dir` (sorted by name; subdirectories are not read). A
/// domain defined by two files is an error naming both unless `merge`. An empty directory is
/// valid (no domains).
absl::StatusOr<std::shared_ptr<const RlsConfig>> load_rls_config(const std::string& dir, bool merge = false);

/// Every rule's policy against the exactness limits of the storage `storage_url` names (parsed,
/// not connected), as check_startup does for the configuration's policies. Errors:
/// InvalidArgument naming the domain, the rule and the limit.
absl::Status check_rules_storage(const RlsConfig& rules, const std::string& storage_url);

}  // namespace floodgate::server
