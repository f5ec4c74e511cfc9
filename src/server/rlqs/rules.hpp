// The rules of the Rate Limit Quota Service (RLQS): a directory of YAML files, each naming a domain
// and its bucket rules in order. A rule matches a bucket_id (Envoy's map of strings) and says what
// every client reporting a matching bucket_id gets: a share of one global rate, or a blanket
// allow or deny.
//
//     domain: edge
//     buckets:
//       - match: {tenant: "*", api: chat}   # each entry must be in the bucket_id; "*": any value
//         limit: 600/minute                 # the global rate of EACH distinct matching bucket_id
//         burst: 50                         # optional: the sum of the clients' max_tokens
//       - match: {api: admin}
//         action: deny
//       - match: {}
//         action: allow
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "floodgate/clock.hpp"

namespace floodgate::server::rlqs {

inline constexpr std::uint32_t kMaxFillSeconds = 86'400;

/// What a rule does with a matching bucket.
enum class Action : std::uint8_t { kLimit, kAllow, kDeny };

/// One entry of `buckets`, validated.
struct Rule {
  /// "<file>:<line>" of the rule, then its domain: the metric label and the log's name for it.
  std::string name;
  /// Entries the bucket_id must hold; an empty value is "*" (any value), sorted by key.
  std::vector<std::pair<std::string, std::string>> match;
  Action action = Action::kLimit;
  /// kLimit: the global rate, `amount` requests per `period` µs (both ≥ 1).
  std::int64_t amount = 0;
  Micros period = 0;
  /// kLimit: the sum over clients of max_tokens (≥ 1): `burst`, or one second's worth of the rate,
  /// at least 1.
  std::int64_t burst = 0;

  /// Whether every entry of `match` holds in `bucket`.
  [[nodiscard]] bool matches(const std::map<std::string, std::string>& bucket) const;
  /// The global rate in requests per second (kLimit).
  [[nodiscard]] double per_second() const noexcept {
    return static_cast<double>(amount) * static_cast<double>(kMicrosPerSecond) / static_cast<double>(period);
  }
};

/// Every domain's rules, in file order. Immutable once loaded; shared by the streams.
struct Rules {
  std::string source;  ///< the directory, for messages
  absl::flat_hash_map<std::string, std::vector<Rule>> domains;

  /// The first rule of `domain` that matches `bucket`; null when none does (the bucket is allowed).
  [[nodiscard]] const Rule* find(const std::string& domain, const std::map<std::string, std::string>& bucket) const;
};

/// Parses one file's text into `into`. Errors (InvalidArgument) read
/// "<source>:<line>:<column>: <what>", e.g. `edge.yaml:4:14: buckets[0].limit: invalid limit …`.
/// A domain already in `into` (from another file) is an error naming both files.
absl::Status parse_rules_file(const std::string& text, const std::string& source, Rules& into);

/// Reads every *.yaml and *.yml file of `dir` (in name order). Errors: NotFound (not a directory),
/// InvalidArgument (a file's error, as parse_rules_file).
absl::StatusOr<std::shared_ptr<const Rules>> load_rules(const std::string& dir);

}  // namespace floodgate::server::rlqs
