// The command line as a user runs it: `floodgate replay` and `floodgate pace` through the real
// binary (FLOODGATE_BINARY); `floodgate simulate` has simulate_cli_test.cpp.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

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

// Every field a trace line may carry is in `replay --help`.
TEST(ReplayCli, HelpNamesEveryTraceField) {
  const auto r = cli("replay --help", "");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* field : {"\"t\"", "\"key\"", "\"cost\"", "\"reservation\"", "\"ttl_ms\"", "\"actual\"",
                            "\"settle\"", "not_outstanding", "concurrency"}) {
    EXPECT_NE(r.output.find(field), std::string::npos) << field << " in\n" << r.output;
  }
}

TEST(ReplayCli, MalformedLineExitsOneAfterAnsweringTheLinesBefore) {
  const auto r = cli("replay --strategy gcra --limit 1/second",
                     "{\"t\": 0, \"key\": \"a\"}\n{\"t\": 0, \"key\": \"a\"}\nnot json\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("line 3: not valid JSON"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("{\"allowed\": true"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("{\"allowed\": false"), std::string::npos) << r.output;
}

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
  // In seconds, as the option is given: the slot of a 1/hour limit comes in (nearly) 3600 s.
  EXPECT_NE(r.output.find("the slot comes in 3599."), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" s, after the deadline"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("µs"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("third"), std::string::npos) << r.output;
  const auto bad = cli("pace --limit 10/fortnight", "x\n");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("fortnight"), std::string::npos) << bad.output;
}

// Invoked as `ratelimit` (envoyproxy/ratelimit's binary name, which Envoy Gateway runs), floodgate
// is `floodgate serve --envoyproxy-env`; `--version` stays floodgate's and names the commit.
TEST(Cli, AsRatelimitItServesWithEnvoyproxysEnvironment) {
  const std::string dir = ::testing::TempDir() + "/ratelimit-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string link = dir + "/ratelimit";
  std::filesystem::remove(link);
  std::filesystem::create_symlink(FLOODGATE_BINARY, link);
  const auto run = [](const std::string& cmd) {
    FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
    std::string out;
    char buf[4096];
    for (std::size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
    const int status = pclose(pipe);
    return std::pair<int, std::string>(WEXITSTATUS(status), out);
  };
  // serve's own options are parsed: a bad --envoyproxy-env value stops the start naming it.
  const auto [code, out] = run("env -i PATH=/usr/bin:/bin PORT=notaport " + link);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("PORT"), std::string::npos) << out;
  const auto [vcode, version] = run(link + " --version");
  EXPECT_EQ(vcode, 0) << version;
  EXPECT_EQ(version.rfind("floodgate ", 0), 0u) << version;
  EXPECT_NE(version.find('('), std::string::npos) << version;  // the commit
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace floodgate
