// Every case in tests/conformance/ (copied from shared/conformance/) through `replay`, in process
// and through the real `floodgate replay` binary, compared as conformance/README.md says. The CLI
// tests are in tests/unit/cli_test.cpp.
#include <chrono>
#include <cmath>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "floodgate/memory_storage.hpp"
#include "floodgate/replay.hpp"
#include "support/conformance_cases.hpp"

namespace floodgate {
namespace {

namespace fs = std::filesystem;

using Case = testing::ConformanceCase;
using testing::lines_of;

std::vector<Case> all_cases() { return testing::all_conformance_cases(); }
absl::StatusOr<Policy> policy_of(const Case& c) { return testing::conformance_policy(c); }

double number(const boost::json::value& v) {
  if (v.is_double()) return v.get_double();
  if (v.is_int64()) return static_cast<double>(v.get_int64());
  return static_cast<double>(v.get_uint64());
}

// Compares produced output with the expected lines; checks per strategy as the README says.
void compare(const Case& c, const std::string& produced) {
  const auto expected = lines_of(fs::path(FLOODGATE_CONFORMANCE_DIR) / (c.name + ".expected.jsonl"));
  std::vector<std::string> got;
  std::istringstream in(produced);
  for (std::string line; std::getline(in, line);) got.push_back(line);
  ASSERT_EQ(got.size(), expected.size()) << c.name;
  const bool exact_remaining = c.strategy == "fixed-window" || c.strategy == "moving-window" ||
                               c.strategy == "sliding-window-counter" ||
                               c.strategy == "token-bucket" || c.strategy == "concurrency";
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto e = boost::json::parse(expected[i]).as_object();
    const auto g = boost::json::parse(got[i]).as_object();
    const std::string where = c.name + " line " + std::to_string(i + 1) + ": got " + got[i] +
                              " expected " + expected[i];
    ASSERT_EQ(g.at("allowed").as_bool(), e.at("allowed").as_bool()) << where;
    ASSERT_EQ(g.contains("not_outstanding"), e.contains("not_outstanding")) << where;
    if (e.contains("not_outstanding")) continue;  // a lease's release that freed nothing
    if (exact_remaining) {
      ASSERT_EQ(g.at("remaining").as_int64(), e.at("remaining").as_int64()) << where;
    }
    if (e.at("retry_after").is_null()) {
      ASSERT_TRUE(g.at("retry_after").is_null()) << where;
    } else {
      ASSERT_FALSE(g.at("retry_after").is_null()) << where;
      ASSERT_NEAR(number(g.at("retry_after")), number(e.at("retry_after")), 0.001) << where;
    }
    ASSERT_NEAR(number(g.at("reset_after")), number(e.at("reset_after")), 0.001) << where;
    if (e.contains("delay")) {
      ASSERT_TRUE(g.contains("delay")) << where;
      ASSERT_NEAR(number(g.at("delay")), number(e.at("delay")), 0.001) << where;
    }
  }
}

class Conformance : public ::testing::TestWithParam<Case> {};

TEST_P(Conformance, InProcessReplayMatchesExpected) {
  const Case& c = GetParam();
  auto policy = policy_of(c);
  ASSERT_TRUE(policy.ok()) << policy.status();
  MemoryStorage storage;
  std::ifstream trace(fs::path(FLOODGATE_CONFORMANCE_DIR) / (c.name + ".trace.jsonl"));
  std::ostringstream out;
  const absl::Status s = replay(*policy, storage, trace, out);
  ASSERT_TRUE(s.ok()) << s;
  compare(c, out.str());
}

TEST_P(Conformance, BinaryReplayMatchesExpected) {
  const Case& c = GetParam();
  const fs::path dir(FLOODGATE_CONFORMANCE_DIR);
  const std::string cmd = std::string(FLOODGATE_BINARY) + " replay --strategy '" + c.strategy +
                          "' --limit '" + c.limit + "' " + c.flags + " < '" +
                          (dir / (c.name + ".trace.jsonl")).string() + "'";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  ASSERT_EQ(pclose(pipe), 0) << cmd;
  compare(c, out);
}

INSTANTIATE_TEST_SUITE_P(Cases, Conformance, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& p) { return p.param.name; });

TEST(ConformanceSuite, HasAllCases) { EXPECT_GE(all_cases().size(), 40u); }

TEST(ConformanceSuite, TheLoaderRefusesAFlagReplayDoesNotKnow) {
  const auto bad = policy_of(Case{"x", "gcra", "1/second", "--burst 3 --bogus"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--bogus"), std::string::npos);
  EXPECT_TRUE(policy_of(Case{"x", "gcra", "1/second", "--burst 3"}).ok());
}

}  // namespace
}  // namespace floodgate
