// The conformance cases of tests/conformance/ as policies and traces, for running them through
// any storage.
#pragma once

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "floodgate/memory_storage.hpp"
#include "floodgate/policy.hpp"
#include "floodgate/replay.hpp"

namespace floodgate::redis::testing {

struct Case {
  std::string name;
  std::string strategy;
  std::string limit;
  std::string flags;
};

inline void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

inline std::vector<std::string> lines_of(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

inline std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const auto& entry : std::filesystem::directory_iterator(FLOODGATE_CONFORMANCE_DIR)) {
    const std::string file = entry.path().filename().string();
    const std::string suffix = ".args";
    if (file.size() <= suffix.size() || !file.ends_with(suffix)) continue;
    const auto args = lines_of(entry.path());
    cases.push_back(Case{file.substr(0, file.size() - suffix.size()), args.at(0), args.at(1),
                         args.size() > 2 ? args[2] : ""});
  }
  std::sort(cases.begin(), cases.end(), [](const Case& a, const Case& b) { return a.name < b.name; });
  return cases;
}

inline absl::StatusOr<Policy> policy_of(const Case& c) {
  auto strategy = parse_strategy(c.strategy);
  if (!strategy.ok()) return strategy.status();
  PolicyOptions o;
  std::istringstream flags(c.flags);
  for (std::string flag; flags >> flag;) {
    if (flag == "--anchor") {
      std::string v;
      flags >> v;
      o.anchor = v == "first-hit" ? Anchor::kFirstHit : Anchor::kClock;
    } else if (flag == "--burst") {
      flags >> o.burst;
    } else if (flag == "--shape") {
      o.shape = true;
    }
  }
  return Policy::make("conformance", *strategy, c.limit, o);
}

/// The replay output of a case through `storage`.
inline std::string replay_through(const Case& c, Storage& storage) {
  auto policy = policy_of(c);
  if (!policy.ok()) return "policy: " + std::string(policy.status().message());
  std::ifstream trace(std::filesystem::path(FLOODGATE_CONFORMANCE_DIR) / (c.name + ".trace.jsonl"));
  std::ostringstream out;
  const absl::Status s = replay(*policy, storage, trace, out);
  if (!s.ok()) out << "error: " << s.message();
  return out.str();
}

/// The output of `floodgate replay` (FLOODGATE_BINARY) for a case through the storage at `url`,
/// then "exit status N" if it did not exit with 0.
inline std::string replay_cli(const Case& c, const std::string& url) {
  const std::string cmd = std::string(FLOODGATE_BINARY) + " replay --strategy '" + c.strategy +
                          "' --limit '" + c.limit + "' " + c.flags + " --name conformance" +
                          " --storage '" + url + "' < '" + FLOODGATE_CONFORMANCE_DIR + "/" +
                          c.name + ".trace.jsonl'";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return "popen failed: " + cmd;
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  if (const int status = pclose(pipe); status != 0) out += "exit status " + std::to_string(status);
  return out;
}

/// Every field of a decision, for failure messages.
inline std::string describe(const Decision& d) {
  return fmt::format("allowed={} limit={} period={} remaining={} reset_after={} retry_after={} "
                     "delay={}",
                     d.allowed, d.limit, d.period, d.remaining, d.reset_after, d.retry_after,
                     d.delay);
}

/// Whether two decisions agree field for field.
inline bool same(const Decision& a, const Decision& b) {
  return a.allowed == b.allowed && a.limit == b.limit && a.period == b.period &&
         a.remaining == b.remaining && a.reset_after == b.reset_after &&
         a.retry_after == b.retry_after && a.delay == b.delay && a.degraded == b.degraded;
}

}  // namespace floodgate::redis::testing
