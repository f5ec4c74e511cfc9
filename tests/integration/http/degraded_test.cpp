// The real binary on a Redis of the test's own that is killed under load: every degraded decision
// is counted once, by the one pipeline, and the live view, the per-policy totals and /metrics agree.
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include <boost/json.hpp>

#include "server_fixture.hpp"

namespace floodgate::testing {
namespace {

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

std::uint64_t series(const std::string& text, const std::string& name) {
  const auto at = text.find("\n" + name + " ");
  EXPECT_NE(at, std::string::npos) << name;
  return at == std::string::npos ? 0 : std::stoull(text.substr(at + name.size() + 2));
}

TEST(Degraded, RedisKilledUnderLoadCountsEveryDegradedDecisionOnceEverywhere) {
  const auto dir = std::filesystem::temp_directory_path() / ("floodgate-degraded-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const int port = free_port();
  const std::string pidfile = (dir / "redis.pid").string();
  ASSERT_EQ(std::system(("redis-server --port " + std::to_string(port) + " --bind 127.0.0.1 --save '' " +
                         "--appendonly no --daemonize yes --dir " + dir.string() + " --pidfile " + pidfile +
                         " --logfile " + (dir / "redis.log").string()).c_str()),
            0);
  ServerProcess server("storage: redis://127.0.0.1:" + std::to_string(port) +
                       "?timeout_ms=500&connect_timeout_ms=200\n"
                       "policies:\n"
                       "  - {name: api, strategy: fixed-window, limit: 1000000/hour}\n"
                       "  - {name: login, strategy: gcra, limit: 1000000/hour, fail: closed}\n");
  // Load on two connections' worth of threads until told to stop; Redis dies in the middle.
  std::atomic<bool> stop{false};
  std::atomic<int> sent{0};
  std::vector<std::thread> load;
  for (int t = 0; t < 2; ++t) {
    load.emplace_back([&, t] {
      const std::string policy = t == 0 ? "api" : "login";
      for (int i = 0; !stop.load() && i < 5000; ++i) {
        server.request(http::verb::post, "/v1/hit", R"({"policy": ")" + policy + R"(", "key": "k)" + std::to_string(i % 50) + R"("})");
        sent.fetch_add(1);
      }
    });
  }
  while (sent.load() < 100) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::ifstream in(pidfile);
  int pid = 0;
  in >> pid;
  ASSERT_GT(pid, 0);
  kill(pid, SIGKILL);
  const int at_kill = sent.load();
  while (sent.load() < at_kill + 200) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  stop = true;
  for (auto& th : load) th.join();

  const auto live = boost::json::parse(server.request(http::verb::get, "/v1/live").body());
  const std::uint64_t total = live.at("storage").at("degraded_total").to_number<std::uint64_t>();
  std::uint64_t per_policy = 0;
  for (const auto& p : live.at("policies").as_array()) per_policy += p.at("totals").at("degraded").to_number<std::uint64_t>();
  const std::string text = server.request(http::verb::get, "/metrics").body();
  RecordProperty("degraded", std::to_string(total));
  EXPECT_GE(total, 150u);  // nearly all of the 200 requests after the kill (a few were in flight before)
  EXPECT_EQ(per_policy, total);
  EXPECT_EQ(series(text, "floodgate_storage_degraded_total"), total);
  EXPECT_EQ(series(text, R"(floodgate_decisions_total{policy="api",result="degraded"})") +
                series(text, R"(floodgate_decisions_total{policy="login",result="degraded"})"),
            total);
  std::filesystem::remove_all(dir);
}

// `serve` with Redis not reachable yet starts, decides by each
// policy's fail mode (counted as degraded), reports not ready while a fail-closed policy's store
// is down, and takes real decisions once Redis answers (connected in the background).
TEST(Degraded, StartsBeforeRedisAndSwitchesToRealDecisionsOnceItAnswers) {
  const auto dir = std::filesystem::temp_directory_path() / ("floodgate-before-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const int port = free_port();
  ServerProcess server("storage: redis://127.0.0.1:" + std::to_string(port) +
                       "?timeout_ms=500&connect_timeout_ms=200\n"
                       "policies:\n"
                       "  - {name: api, strategy: fixed-window, limit: 2/hour}\n"
                       "  - {name: login, strategy: gcra, limit: 1000/hour, fail: closed}\n");
  ASSERT_NE(server.port(), 0);
  auto hit = [&](const std::string& policy, const std::string& key) {
    return server.request(http::verb::post, "/v1/hit", R"({"policy": ")" + policy + R"(", "key": ")" + key + R"("})")
        .result_int();
  };
  for (int i = 0; i < 3; ++i) EXPECT_EQ(hit("api", "k"), 200) << "fail open: allowed, even beyond 2/hour";
  // Fail closed: an outage, not the tenant's excess.
  const auto outage =
      server.request(http::verb::post, "/v1/hit", R"({"policy": "login", "key": "k"})");
  EXPECT_EQ(outage.result_int(), 503) << outage.body();
  EXPECT_EQ(outage["Retry-After"], "1");
  EXPECT_NE(outage.body().find("the storage is unavailable"), std::string::npos) << outage.body();
  EXPECT_EQ(server.request(http::verb::get, "/readyz").result_int(), 503);
  EXPECT_EQ(series(server.request(http::verb::get, "/metrics").body(), "floodgate_storage_degraded_total"), 4u);

  const std::string pidfile = (dir / "redis.pid").string();
  ASSERT_EQ(std::system(("redis-server --port " + std::to_string(port) + " --bind 127.0.0.1 --save '' " +
                         "--appendonly no --daemonize yes --dir " + dir.string() + " --pidfile " + pidfile +
                         " --logfile " + (dir / "redis.log").string()).c_str()),
            0);
  const auto start = std::chrono::steady_clock::now();
  while (server.request(http::verb::get, "/readyz").result_int() != 200 &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const auto ready_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  RecordProperty("ready_after_redis_ms", std::to_string(ready_ms.count()));
  // The watch probes at most 1 s apart while Redis is down; the decisions' 5 s "failed
  // recently" window no longer holds readiness once Redis has answered.
  EXPECT_LT(ready_ms, std::chrono::milliseconds(2500)) << server.log_text();
  EXPECT_EQ(hit("login", "k"), 200) << "a real decision";
  EXPECT_EQ(hit("api", "k"), 200);
  EXPECT_EQ(hit("api", "k"), 200);
  EXPECT_EQ(hit("api", "k"), 429) << "the limit holds again: 2/hour";
  EXPECT_EQ(series(server.request(http::verb::get, "/metrics").body(), "floodgate_storage_degraded_total"), 4u);
  EXPECT_NE(server.log_text().find("storage reachable"), std::string::npos) << server.log_text();
  std::ifstream in(pidfile);
  int pid = 0;
  in >> pid;
  if (pid > 0) kill(pid, SIGKILL);
  std::filesystem::remove_all(dir);
}

// The option that keeps the old behaviour: exit at once, naming the problem.
TEST(Degraded, StorageStartFailFastExitsWhenRedisIsDown) {
  const std::string command = std::string(FLOODGATE_BINARY) + " serve --listen 127.0.0.1:0 --storage-start fail-fast " +
                              "--storage 'redis://127.0.0.1:" + std::to_string(free_port()) + "' 2>&1";
  FILE* out = popen(command.c_str(), "r");
  ASSERT_NE(out, nullptr);
  std::string text;
  char buf[512];
  while (fgets(buf, sizeof buf, out) != nullptr) text += buf;
  const int status = pclose(out);
  EXPECT_EQ(WEXITSTATUS(status), 2) << text;
  EXPECT_NE(text.find("cannot connect"), std::string::npos) << text;
}

}  // namespace
}  // namespace floodgate::testing
