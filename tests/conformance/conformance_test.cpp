// Every case in tests/conformance/ (copied from shared/conformance/) through `replay`, in process
// and through the real `floodgate replay` binary, compared as conformance/README.md says.
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

namespace floodgate {
namespace {

namespace fs = std::filesystem;

struct Case {
  std::string name;
  std::string strategy;
  std::string limit;
  std::string flags;  // optional third line of NAME.args
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<std::string> lines_of(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const auto& entry : fs::directory_iterator(FLOODGATE_CONFORMANCE_DIR)) {
    const std::string file = entry.path().filename().string();
    const std::string suffix = ".args";
    if (file.size() <= suffix.size() || file.substr(file.size() - suffix.size()) != suffix) continue;
    const auto args = lines_of(entry.path());
    Case c{file.substr(0, file.size() - suffix.size()), args.at(0), args.at(1),
           args.size() > 2 ? args[2] : ""};
    cases.push_back(c);
  }
  std::sort(cases.begin(), cases.end(), [](const Case& a, const Case& b) { return a.name < b.name; });
  return cases;
}

absl::StatusOr<Policy> policy_of(const Case& c) {
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
    } else {
      return absl::InvalidArgumentError("unknown flag in args: " + flag);
    }
  }
  return Policy::make("conformance", *strategy, c.limit, o);
}

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
                               c.strategy == "token-bucket";
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto e = boost::json::parse(expected[i]).as_object();
    const auto g = boost::json::parse(got[i]).as_object();
    const std::string where = c.name + " line " + std::to_string(i + 1) + ": got " + got[i] +
                              " expected " + expected[i];
    ASSERT_EQ(g.at("allowed").as_bool(), e.at("allowed").as_bool()) << where;
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

}  // namespace
}  // namespace floodgate

namespace floodgate {
namespace {

struct CliResult {
  int exit_code;
  std::string output;  // stdout and stderr
};

CliResult cli(const std::string& args, const std::string& input) {
  // One file per test: ctest runs tests in parallel processes.
  const std::string in_path = ::testing::TempDir() + "/" +
                              ::testing::UnitTest::GetInstance()->current_test_info()->name() +
                              "." + std::to_string(getpid()) + ".jsonl";
  std::ofstream(in_path) << input;
  const std::string cmd = std::string(FLOODGATE_BINARY) + " " + args + " < " + in_path + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = pclose(pipe);
  std::remove(in_path.c_str());
  return {WEXITSTATUS(status), out};
}

TEST(ReplayCli, BadArgumentsExitTwoWithAClearMessage) {
  auto r = cli("replay --strategy lottery --limit 1/second", "");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("unknown strategy \"lottery\""), std::string::npos) << r.output;
  r = cli("replay --strategy gcra --limit 10/fortnight", "");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("\"fortnight\""), std::string::npos) << r.output;
  r = cli("replay --strategy fixed-window --limit 1/second --burst 5", "");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("burst applies to"), std::string::npos) << r.output;
  r = cli("replay --strategy gcra --limit 1/second --storage carrier-pigeon://x", "");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("unknown storage"), std::string::npos) << r.output;
}

TEST(ReplayCli, MalformedLineExitsOneAfterAnsweringTheLinesBefore) {
  const auto r = cli("replay --strategy gcra --limit 1/second",
                     "{\"t\": 0, \"key\": \"a\"}\n{\"t\": 0, \"key\": \"a\"}\nnot json\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("line 3: not valid JSON"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("{\"allowed\": true"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("{\"allowed\": false"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace floodgate

namespace floodgate {
namespace {

TEST(PaceCli, CopiesEveryLineInOrderNeverFasterThanTheRate) {
  std::string input;
  for (int i = 1; i <= 11; ++i) input += "line " + std::to_string(i) + "\n";
  const auto start = std::chrono::steady_clock::now();
  const auto r = cli("pace --limit 100/second", input);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, input);
  EXPECT_GE(took, std::chrono::milliseconds(100));  // 10 gaps of 10 ms: never early
}

TEST(PaceCli, ALineThatCannotGetASlotInTimeStopsTheRunWithAnError) {
  const auto r = cli("pace --limit 1/hour --timeout 1", "first\nsecond\nthird\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("first\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("line 2 not written"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("third"), std::string::npos) << r.output;
  const auto bad = cli("pace --limit 10/fortnight", "x\n");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("fortnight"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace floodgate
