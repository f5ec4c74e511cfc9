// The one loader of the conformance cases (tests/conformance/NAME.args, .trace.jsonl,
// .expected.jsonl), for every suite that runs them through a storage. Needs
// FLOODGATE_CONFORMANCE_DIR.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "floodgate/policy.hpp"
#include "floodgate/replay.hpp"
#include "floodgate/storage.hpp"

namespace floodgate::testing {

/// One case: strategy and limit (the first two lines of NAME.args) and the flags of
/// `floodgate replay` (an optional third line: --anchor first-hit, --burst N, --shape).
struct ConformanceCase {
  std::string name;
  std::string strategy;
  std::string limit;
  std::string flags;
};

inline void PrintTo(const ConformanceCase& c, std::ostream* os) { *os << c.name; }

/// The non-empty lines of a file.
inline std::vector<std::string> lines_of(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

/// Every case of the directory, by name.
inline std::vector<ConformanceCase> all_conformance_cases() {
  std::vector<ConformanceCase> cases;
  for (const auto& entry : std::filesystem::directory_iterator(FLOODGATE_CONFORMANCE_DIR)) {
    const std::string file = entry.path().filename().string();
    const std::string suffix = ".args";
    if (file.size() <= suffix.size() || !file.ends_with(suffix)) continue;
    const auto args = lines_of(entry.path());
    cases.push_back({file.substr(0, file.size() - suffix.size()), args.at(0), args.at(1),
                     args.size() > 2 ? args[2] : ""});
  }
  std::sort(cases.begin(), cases.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return cases;
}

/// The case's policy. Errors: InvalidArgument for a bad strategy or limit, or a flag that is not
/// one of `floodgate replay`'s (never silently ignored).
inline absl::StatusOr<Policy> conformance_policy(const ConformanceCase& c) {
  auto strategy = parse_strategy(c.strategy);
  if (!strategy.ok()) return strategy.status();
  PolicyOptions o;
  std::istringstream flags(c.flags);
  for (std::string flag; flags >> flag;) {
    if (flag == "--anchor") {
      std::string v;
      flags >> v;
      if (v != "first-hit" && v != "clock") return absl::InvalidArgumentError("bad --anchor: " + v);
      o.anchor = v == "first-hit" ? Anchor::kFirstHit : Anchor::kClock;
    } else if (flag == "--burst") {
      if (!(flags >> o.burst)) return absl::InvalidArgumentError("--burst needs a number");
    } else if (flag == "--shape") {
      o.shape = true;
    } else {
      return absl::InvalidArgumentError("unknown flag in args: " + flag);
    }
  }
  return Policy::make("conformance", *strategy, c.limit, o);
}

/// The replay output of a case through `storage` (or the error, as text, so a comparison fails).
inline std::string replay_conformance_case(const ConformanceCase& c, Storage& storage) {
  auto policy = conformance_policy(c);
  if (!policy.ok()) return "policy: " + std::string(policy.status().message());
  std::ifstream trace(std::filesystem::path(FLOODGATE_CONFORMANCE_DIR) / (c.name + ".trace.jsonl"));
  std::ostringstream out;
  const absl::Status s = replay(*policy, storage, trace, out);
  if (!s.ok()) out << "error: " << s.message();
  return out.str();
}

}  // namespace floodgate::testing
