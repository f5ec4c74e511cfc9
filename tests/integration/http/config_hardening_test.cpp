// The hardened configuration against the real binary: a reload that would remove every
// policy or that fails keeps the running configuration and is counted in /metrics; `--check-config`
// refuses what `serve` would refuse; `promtool check metrics` accepts /metrics with policy names
// chosen to provoke clashes.
#include <cstdio>
#include <fstream>

#include <boost/json.hpp>

#include "server_fixture.hpp"

namespace floodgate::testing {
namespace {

// Polls until `pred` holds (at most ~5 s); the reload watcher looks at the file every second.
template <class Pred>
bool eventually(Pred pred) {
  for (int i = 0; i < 250; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::string run(const std::string& command, int& status) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  char buf[4096];
  std::size_t n = 0;
  while (p != nullptr && (n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  status = p != nullptr ? pclose(p) : -1;
  return out;
}

TEST(ConfigReload, AnEmptiedFileKeepsThePoliciesAndIsCounted) {
  ServerProcess server("policies:\n  - {name: a, limit: 10/minute}\n");
  ASSERT_EQ(server.request(http::verb::post, "/v1/hit", R"({"policy": "a", "key": "k"})").result_int(), 200);
  server.write_config("");  // `: > cfg.yaml`, or an editor between truncate and write
  kill(server.pid(), SIGHUP);
  ASSERT_TRUE(eventually([&] { return server.log_text().find("would remove all 1") != std::string::npos; }))
      << server.log_text();
  EXPECT_EQ(server.request(http::verb::post, "/v1/hit", R"({"policy": "a", "key": "k"})").result_int(), 200);
  const std::string metrics = server.request(http::verb::get, "/metrics").body();
  EXPECT_NE(metrics.find("floodgate_config_reloads_total{result=\"failed\"} 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("floodgate_config_last_reload_ok 0"), std::string::npos) << metrics;
}

TEST(ConfigReload, ARefusedReloadIsCountedAndAGoodOneInstalled) {
  ServerProcess server("policies:\n  - {name: a, limit: 10/minute}\n");
  server.write_config("http: {idle_timeout_ms: 10000000000000}\npolicies:\n  - {name: a, limit: 10/minute}\n");
  kill(server.pid(), SIGHUP);
  ASSERT_TRUE(eventually([&] { return server.log_text().find("idle_timeout_ms") != std::string::npos; }));
  server.write_config("policies:\n  - {name: b, limit: 10/minute}\n");
  kill(server.pid(), SIGHUP);
  ASSERT_TRUE(eventually([&] {
    return server.request(http::verb::post, "/v1/hit", R"({"policy": "b", "key": "k"})").result_int() == 200;
  }));
  const std::string metrics = server.request(http::verb::get, "/metrics").body();
  EXPECT_NE(metrics.find("floodgate_config_reloads_total{result=\"ok\"} 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("floodgate_config_last_reload_ok 1"), std::string::npos) << metrics;
}

// budget_lease, the old spelling of budget_slice, is served as it for one release, with a warning
// naming its file and line logged at start and at each reload (not per request), and by
// --check-config; budget_slice logs nothing.
TEST(ConfigWarnings, TheOldBudgetLeaseSpellingIsLoggedAtEachLoad) {
  const std::string old_yaml = "policies:\n  - {name: a, limit: 1000/second, budget_lease: {max_slice: 10}}\n";
  const std::string new_yaml = "policies:\n  - {name: a, limit: 1000/second, budget_slice: {max_slice: 10}}\n";
  const std::string warning = "budget_lease is deprecated, write budget_slice";
  auto count = [&](const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  ServerProcess server(old_yaml);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(server.request(http::verb::post, "/v1/hit", R"({"policy": "a", "key": "k"})").result_int(), 200);
  }
  EXPECT_EQ(count(server.log_text(), warning), 1u) << server.log_text();
  EXPECT_NE(server.log_text().find("floodgate.yaml:2:"), std::string::npos) << server.log_text();
  kill(server.pid(), SIGHUP);
  ASSERT_TRUE(eventually([&] { return count(server.log_text(), "reloaded the configuration") == 1; }))
      << server.log_text();
  EXPECT_EQ(count(server.log_text(), warning), 2u) << server.log_text();
  server.write_config(new_yaml);
  kill(server.pid(), SIGHUP);
  ASSERT_TRUE(eventually([&] { return count(server.log_text(), "reloaded the configuration") >= 2; }))
      << server.log_text();
  EXPECT_EQ(count(server.log_text(), warning), 2u) << server.log_text();

  const auto dir = std::filesystem::temp_directory_path() / ("fg-warn-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string cfg = (dir / "cfg.yaml").string();
  std::ofstream(cfg) << old_yaml;
  int status = 0;
  std::string out = run(std::string(FLOODGATE_BINARY) + " serve --check-config " + cfg + " 2>&1", status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(count(out, warning), 1u) << out;
  std::ofstream(cfg) << new_yaml;
  out = run(std::string(FLOODGATE_BINARY) + " serve --check-config " + cfg + " 2>&1", status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(count(out, warning), 0u) << out;
  std::filesystem::remove_all(dir);
}

TEST(CheckConfig, RefusesWhatServeWouldRefuse) {
  const auto dir = std::filesystem::temp_directory_path() / ("fg-check-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string cfg = (dir / "cfg.yaml").string();
  for (const char* yaml :
       {"log_level: bogus\n", "storage: bogus://x\n", "listen: 999.1.1.1:80\n", "threads: 100000\n",
        "http: {idle_timeout_ms: 10000000000000}\n", "http: {max_header_bytes: 4294967297}\n",
        "threads: 2\nthreads: 3\n", "threads: 2\n---\nthreads: 3\n",
        "storage: redis://127.0.0.1:1\npolicies:\n  - {name: c, strategy: fixed-window, limit: 1 per 100 years}\n",
        "policies:\n  - {name: inline gcra 10/minute, limit: 10/minute}\n"}) {
    std::ofstream(cfg) << yaml;
    int status = 0;
    const std::string out = run(std::string(FLOODGATE_BINARY) + " serve --check-config " + cfg + " 2>&1", status);
    EXPECT_NE(status, 0) << yaml << out;
    EXPECT_NE(out.find(cfg), std::string::npos) << yaml << out;  // the message names the file
  }
  for (const std::string& path : {dir.string(), std::string("/dev/zero")}) {
    int status = 0;
    const std::string out = run(std::string(FLOODGATE_BINARY) + " serve --check-config " + path + " 2>&1", status);
    EXPECT_NE(status, 0) << out;
    EXPECT_NE(out.find("not a regular file"), std::string::npos) << out;
  }
  std::filesystem::remove_all(dir);
}

TEST(Metrics, PromtoolAcceptsMetricsWithNamesChosenToClash) {
  std::string yaml = "policies:\n";
  for (const char* name : {"\"a\\\"b\"", "\"back\\\\slash\"", "\"inline-1\"", "\"other-1\"", "\"x{y}=z,\"", "\"ünï\""}) {
    yaml += std::string("  - {name: ") + name + ", limit: 10/minute}\n";
  }
  for (int i = 0; i < 300; ++i) yaml += "  - {name: p" + std::to_string(i) + ", limit: 10/minute}\n";  // past the bound
  ServerProcess server(yaml);
  for (const char* body : {R"({"policy": "a\"b", "key": "k"})", R"({"policy": "p299", "key": "k"})",
                           R"({"limit": "10/minute", "key": "k"})"}) {
    EXPECT_EQ(server.request(http::verb::post, "/v1/hit", body).result_int(), 200) << body;
  }
  const auto file = std::filesystem::temp_directory_path() / ("fg-metrics-" + std::to_string(getpid()) + ".txt");
  std::ofstream(file) << server.request(http::verb::get, "/metrics").body();
  int status = 0;
  const std::string out = run("promtool check metrics < " + file.string() + " 2>&1", status);
  EXPECT_EQ(status, 0) << out;
  std::filesystem::remove(file);
}

}  // namespace
// log_format: json writes one JSON object a line (time, level, msg), whatever the message holds:
// a refused reload's message quotes the bad limit, and the quotes survive as JSON.
TEST(LogFormat, JsonIsOneObjectALine) {
  ServerProcess server("log_format: json\npolicies:\n  - {name: a, limit: 10/minute}\n");
  ASSERT_NE(server.port(), 0);
  ASSERT_EQ(server.request(http::verb::get, "/healthz").result_int(), 200);
  server.write_config("log_format: json\npolicies:\n  - {name: a, limit: 10/fortnight}\n");
  kill(server.pid(), SIGHUP);
  ASSERT_TRUE(eventually([&] { return server.log_text().find("fortnight") != std::string::npos; })) << server.log_text();
  std::istringstream lines(server.log_text());
  bool quoted = false;
  int objects = 0;
  bool listening = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    boost::system::error_code ec;
    const boost::json::value v = boost::json::parse(line, ec);
    ASSERT_FALSE(ec) << "not JSON: " << line;
    ASSERT_TRUE(v.is_object()) << line;
    const auto& o = v.as_object();
    ASSERT_TRUE(o.contains("time") && o.contains("level") && o.contains("msg")) << line;
    EXPECT_EQ(std::string_view(o.at("time").as_string()).back(), 'Z') << line;
    const std::string_view msg = o.at("msg").as_string();
    listening = listening || msg.find("listening on") != std::string_view::npos;
    quoted = quoted || msg.find("\"10/fortnight\"") != std::string_view::npos;
    ++objects;
  }
  EXPECT_GT(objects, 0);
  EXPECT_TRUE(listening) << server.log_text();
  EXPECT_TRUE(quoted) << server.log_text();
}

}  // namespace floodgate::testing
