// The real binary on a Redis of the test's own that is killed under load: every degraded decision
// is counted once, by the one pipeline, and the live view, the per-policy totals and /metrics agree.
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
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

}  // namespace
}  // namespace floodgate::testing
