// The conformance cases of tests/conformance/ for the Redis suites: the one loader
// (tests/support/conformance_cases.hpp) under the names these suites use.
#pragma once

#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "floodgate/decision.hpp"
#include "support/conformance_cases.hpp"

namespace floodgate::redis::testing {

using Case = floodgate::testing::ConformanceCase;
using floodgate::testing::lines_of;

inline std::vector<Case> all_cases() { return floodgate::testing::all_conformance_cases(); }
inline absl::StatusOr<Policy> policy_of(const Case& c) { return floodgate::testing::conformance_policy(c); }
inline std::string replay_through(const Case& c, Storage& storage) {
  return floodgate::testing::replay_conformance_case(c, storage);
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
                     "delay={} limit_reset_after={}",
                     d.allowed, d.limit, d.period, d.remaining, d.reset_after, d.retry_after,
                     d.delay, d.limit_reset_after);
}

/// Whether two decisions agree field for field.
inline bool same(const Decision& a, const Decision& b) {
  return a.allowed == b.allowed && a.limit == b.limit && a.period == b.period &&
         a.remaining == b.remaining && a.reset_after == b.reset_after &&
         a.retry_after == b.retry_after && a.delay == b.delay && a.degraded == b.degraded &&
         a.limit_reset_after == b.limit_reset_after;
}

}  // namespace floodgate::redis::testing
