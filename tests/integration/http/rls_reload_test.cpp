// The gRPC rate-limit rules reload with the rest of the configuration: the real binary, checked
// through what it exposes without a gRPC client (the per-rule series on /metrics and the log).
#include <csignal>

#include "server_fixture.hpp"

namespace floodgate::testing {
namespace {

class RlsReload : public ::testing::Test {
 protected:
  void SetUp() override {
    rules_ = std::filesystem::temp_directory_path() / ("floodgate-rls-" + std::to_string(getpid()));
    std::filesystem::create_directories(rules_);
    write("a.yaml", "domain: first\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n");
  }
  void TearDown() override { std::filesystem::remove_all(rules_); }
  void write(const std::string& name, const std::string& text) const { std::ofstream(rules_ / name) << text; }
  std::string config() const {
    return "rls:\n  config: " + rules_.string() + "\n  listen: 127.0.0.1:0\n";
  }
  static std::string metrics(const ServerProcess& s) { return s.request(http::verb::get, "/metrics").body(); }
  // Waits (up to 5 s) until `pred` holds.
  template <class Pred>
  static bool eventually(Pred pred) {
    for (int i = 0; i < 100; ++i) {
      if (pred()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  std::filesystem::path rules_;
};

TEST_F(RlsReload, NewRuleFilesAreLoadedAndBadOnesRejectedWithTheirLine) {
  ServerProcess server(config());
  ASSERT_NE(server.port(), 0);
  EXPECT_NE(metrics(server).find("floodgate_rls_total_hits_total{domain=\"first\",rule=\"k\"} 0"), std::string::npos);

  write("b.yaml", "domain: second\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 5}\n");
  kill(server.pid(), SIGHUP);
  EXPECT_TRUE(eventually([&] {
    return metrics(server).find("floodgate_rls_total_hits_total{domain=\"second\",rule=\"user\"} 0") != std::string::npos;
  }));

  write("c.yaml", "domain: third\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 5}\n");
  kill(server.pid(), SIGHUP);
  const std::string expected = (rules_ / "c.yaml").string() +
                               ":4:24: the rate_limit of \"k\": invalid unit \"fortnight\" (second, minute, hour, day, "
                               "week, month, year)";
  EXPECT_TRUE(eventually([&] { return server.log_text().find(expected) != std::string::npos; })) << server.log_text();
  EXPECT_EQ(metrics(server).find("domain=\"third\""), std::string::npos);
  // The old rules keep serving: the process is up and answers.
  EXPECT_EQ(server.request(http::verb::get, "/healthz").result_int(), 200);
}

TEST_F(RlsReload, ABadRuleDirectoryStopsTheStart) {
  // A file envoyproxy/ratelimit refuses too: a rule that replaces itself.
  write("bad.yaml",
        "domain: x\ndescriptors:\n  - key: k\n    rate_limit: {name: a, unit: second, requests_per_unit: 1, "
        "replaces: [{name: a}]}\n");
  const std::string out = (rules_ / "out").string();
  const std::string cmd = std::string(FLOODGATE_BINARY) + " serve --listen 127.0.0.1:0 --rls-config " +
                          rules_.string() + " --grpc-listen 127.0.0.1:0 2>" + out;
  const int status = std::system(cmd.c_str());
  EXPECT_EQ(WEXITSTATUS(status), 2);
  std::ifstream in(out);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  EXPECT_EQ(text, "floodgate serve: " + (rules_ / "bad.yaml").string() +
                      ":4:73: the rate_limit of \"k\": replaces names the rule itself (\"a\")\n");
}

}  // namespace
}  // namespace floodgate::testing
