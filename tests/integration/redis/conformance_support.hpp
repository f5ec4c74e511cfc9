// The conformance cases of tests/conformance/ for the Redis suites: the one loader
// (tests/support/conformance_cases.hpp) under the names these suites use.
#pragma once

#include "support/conformance_cases.hpp"

namespace floodgate::redis::testing {

using Case = floodgate::testing::ConformanceCase;
using floodgate::testing::lines_of;

inline std::vector<Case> all_cases() { return floodgate::testing::all_conformance_cases(); }
inline absl::StatusOr<Policy> policy_of(const Case& c) { return floodgate::testing::conformance_policy(c); }
inline std::string replay_through(const Case& c, Storage& storage) {
  return floodgate::testing::replay_conformance_case(c, storage);
}

}  // namespace floodgate::redis::testing
