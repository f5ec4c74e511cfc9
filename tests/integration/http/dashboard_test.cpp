// The dashboard's endpoints end to end through the real binary: the embedded page, POST
// /v1/simulate (its own body limit, exact decisions, errors) and GET /v1/live.
#include <poll.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include <boost/json.hpp>

#include "server_fixture.hpp"

namespace floodgate::testing {
namespace {

const char* kConfig = R"(
policies:
  - name: login
    strategy: fixed-window
    limit: 3/hour
    anchor: first-hit
http:
  max_body_bytes: 512
  max_simulate_body_bytes: 200000
)";

std::string trace_json(int n, double step = 0) {
  std::string out = "[";
  for (int i = 0; i < n; ++i) {
    out += (i ? "," : "") + std::string("{\"t\": ") + std::to_string(i * step) + ", \"key\": \"a\"}";
  }
  return out + "]";
}

TEST(Dashboard, ThePageIsEmbedded) {
  ServerProcess server(kConfig);
  const Response page = server.request(http::verb::get, "/");
  EXPECT_EQ(page.result_int(), 200);
  EXPECT_EQ(page[http::field::content_type], "text/html; charset=utf-8");
  EXPECT_NE(page.body().find("<script src=\"/app.js\"></script>"), std::string::npos);
  const Response js = server.request(http::verb::get, "/app.js");
  EXPECT_EQ(js.result_int(), 200);
  EXPECT_EQ(js[http::field::content_type], "text/javascript; charset=utf-8");
  EXPECT_NE(js.body().find("/v1/simulate"), std::string::npos);
  EXPECT_EQ(server.request(http::verb::get, "/style.css").result_int(), 200);
  EXPECT_EQ(server.request(http::verb::post, "/", "{}").result_int(), 405);
  EXPECT_EQ(server.request(http::verb::get, "/nothing.js").result_int(), 404);
}

// 2,000 requests at one instant against 10/minute: every strategy admits exactly 10. The body
// (~50 KB) is far beyond max_body_bytes (512), which still holds for the other endpoints.
TEST(Dashboard, SimulateDecidesATraceOnAPrivateStore) {
  ServerProcess server(kConfig);
  const std::string body = R"({"limit": "10/minute", "from": 1995, "trace": )" + trace_json(2000) + "}";
  ASSERT_GT(body.size(), 40'000u);
  const Response res = server.request(http::verb::post, "/v1/simulate", body);
  ASSERT_EQ(res.result_int(), 200) << res.body();
  const boost::json::object out = boost::json::parse(res.body()).as_object();
  EXPECT_EQ(out.at("events").as_int64(), 2000);
  const boost::json::array& lanes = out.at("strategies").as_array();
  ASSERT_EQ(lanes.size(), 7u);
  for (const auto& l : lanes) {
    const auto& lane = l.as_object();
    EXPECT_EQ(lane.at("allowed").as_int64(), 10) << lane.at("strategy");
    EXPECT_EQ(lane.at("blocked").as_int64(), 1990) << lane.at("strategy");
    const auto& decisions = lane.at("decisions").as_array();
    ASSERT_EQ(decisions.size(), 5u);
    EXPECT_FALSE(decisions[0].as_object().at("allowed").as_bool());
    EXPECT_EQ(decisions[0].as_object().at("level").as_int64(), 10);
    EXPECT_EQ(decisions[0].as_object().at("capacity").as_int64(), 10);
  }
  // The same trace again: a fresh store, the same answer.
  const Response again = server.request(http::verb::post, "/v1/simulate", body);
  EXPECT_EQ(again.body(), res.body());
  // The service's own storage was not touched, and the ordinary limit still applies elsewhere.
  const Response hit = server.request(http::verb::post, "/v1/hit",
                                      R"({"limit": "10/minute", "key": "a", "pad": ")" + std::string(600, 'x') + "\"}");
  EXPECT_EQ(hit.result_int(), 413);
  const Response ok = server.request(http::verb::post, "/v1/hit", R"({"limit": "10/minute", "key": "a"})");
  EXPECT_EQ(ok.result_int(), 200);
  EXPECT_EQ(ok["X-RateLimit-Remaining"], "9");
}

TEST(Dashboard, SimulateRejectsBadInputClearly) {
  ServerProcess server(kConfig);
  struct Case {
    std::string body;
    int status;
    std::string message;
  };
  const std::vector<Case> cases = {
      {R"({"trace": []})", 400, "\\\"limit\\\" must be a string"},
      {R"({"limit": "3/fortnight", "trace": []})", 400, "unknown unit"},
      {R"({"limit": "3/minute", "strategies": ["gcra", "lottery"], "trace": []})", 400, "unknown strategy \\\"lottery\\\""},
      {R"({"limit": "3/minute", "trace": [{"t": 2, "key": "a"}, {"t": 1, "key": "a"}]})", 400, "trace[1]: \\\"t\\\" goes backwards"},
      {R"({"limit": "3/minute", "trace": [{"t": 0}]})", 400, "trace[0]: missing \\\"key\\\""},
      {R"({"limit": "3/minute", "trace": [{"t": 0, "key": "a", "cost": -1}]})", 400, "\\\"cost\\\" must be a whole number"},
      {R"({"limit": "3/minute", "burst": -2, "trace": []})", 400, "\\\"burst\\\" must be a whole number"},
      {R"({"limit": "3/minute", "from": 5, "trace": []})", 400, "\\\"from\\\" must be an index"},
      {R"({"limit": "3/minute", "trace": {}})", 400, "\\\"trace\\\" must be a list"},
      {"not json", 400, "not valid JSON"},
      {R"({"limit": "3/minute", "trace": )" + trace_json(10001) + "}", 413, "larger than the limit"},
  };
  for (const Case& c : cases) {
    const Response res = server.request(http::verb::post, "/v1/simulate", c.body);
    EXPECT_EQ(res.result_int(), c.status) << c.body.substr(0, 80) << " → " << res.body();
    EXPECT_NE(res.body().find(c.message), std::string::npos) << c.body.substr(0, 80) << " → " << res.body();
  }
  EXPECT_EQ(server.request(http::verb::get, "/v1/simulate").result_int(), 405);
}

TEST(Dashboard, SimulateBoundsTheTrace) {
  ServerProcess server("http: {max_simulate_body_bytes: 1000000}\n");
  const Response res = server.request(http::verb::post, "/v1/simulate",
                                      R"({"limit": "3/minute", "trace": )" + trace_json(10001) + "}");
  EXPECT_EQ(res.result_int(), 400);
  EXPECT_NE(res.body().find("the trace has 10001 requests: at most 10000"), std::string::npos) << res.body();
}

// The body limit is chosen from the request line; when the line arrives in pieces the header is
// read first. Either way /v1/simulate gets its own limit and every other endpoint keeps its own.
TEST(Dashboard, BodyLimitsWhenTheRequestLineArrivesInPieces) {
  ServerProcess server(kConfig);
  auto raw = [&](const std::string& target, const std::string& body, std::size_t split) {
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::socket socket(ioc);
    socket.connect({boost::asio::ip::make_address("127.0.0.1"), server.port()});
    const std::string request = "POST " + target + " HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                                std::to_string(body.size()) + "\r\nAuthorization: Bearer " + kTestAdminToken +
                                "\r\nConnection: close\r\n\r\n" + body;
    boost::asio::write(socket, boost::asio::buffer(request.data(), split));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    boost::system::error_code ec;
    boost::asio::write(socket, boost::asio::buffer(request.data() + split, request.size() - split), ec);
    std::string response;
    char buf[4096];
    for (std::size_t n; (n = socket.read_some(boost::asio::buffer(buf), ec)) > 0 || !ec;) response.append(buf, n);
    return response.substr(0, response.find("\r\n"));
  };
  const std::string trace = R"({"limit": "5/second", "strategies": ["gcra"], "from": 999, "trace": )" + trace_json(1000) + "}";
  ASSERT_GT(trace.size(), 512u);
  for (std::size_t split : {3, 12, 30}) {
    EXPECT_EQ(raw("/v1/simulate", trace, split), "HTTP/1.1 200 OK") << split;
    EXPECT_EQ(raw("/v1/hit", std::string(600, ' '), split), "HTTP/1.1 413 Payload Too Large") << split;
  }
}

TEST(Dashboard, LiveCountsDecisionsAndTheMostDeniedKeys) {
  ServerProcess server(kConfig);
  for (int i = 0; i < 6; ++i) server.request(http::verb::post, "/v1/hit", R"({"policy": "login", "key": "mallory"})");
  for (int i = 0; i < 2; ++i) server.request(http::verb::post, "/v1/hit", R"({"policy": "login", "key": "alice"})");
  const Response res = server.request(http::verb::get, "/v1/live");
  ASSERT_EQ(res.result_int(), 200) << res.body();
  const boost::json::object live = boost::json::parse(res.body()).as_object();
  EXPECT_EQ(live.at("seconds").as_int64(), 180);
  EXPECT_FALSE(live.at("storage").as_object().at("degraded").as_bool());
  const auto& policies = live.at("policies").as_array();
  ASSERT_GE(policies.size(), 1u);
  const auto& login = policies[0].as_object();
  EXPECT_EQ(login.at("name").as_string(), "login");
  EXPECT_EQ(login.at("policy").as_string(), "fixed-window 3/hour (first-hit windows)");
  EXPECT_EQ(login.at("state").as_string(), "ok");
  EXPECT_EQ(login.at("totals").as_object().at("allowed").as_int64(), 5);
  EXPECT_EQ(login.at("totals").as_object().at("denied").as_int64(), 3);
  // The per-second series hold the same decisions (the requests took well under 180 s).
  std::int64_t allowed = 0, denied = 0;
  for (const auto& n : login.at("allowed").as_array()) allowed += n.as_int64();
  for (const auto& n : login.at("denied").as_array()) denied += n.as_int64();
  EXPECT_EQ(login.at("allowed").as_array().size(), 180u);
  EXPECT_EQ(allowed, 5);
  EXPECT_EQ(denied, 3);
  const auto& top = login.at("top_denied").as_array();
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0].as_object().at("key").as_string(), "mallory");
  EXPECT_EQ(top[0].as_object().at("count").as_int64(), 3);
}

// A connection with one request written and its answer not yet read.
struct Pending {
  boost::asio::ip::tcp::socket socket;
  Pending(boost::asio::io_context& ioc, unsigned short port, http::verb method, const std::string& target,
          const std::string& body)
      : socket(ioc) {
    socket.connect({boost::asio::ip::make_address("127.0.0.1"), port});
    http::request<http::string_body> req{method, target, 11};
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::content_type, "application/json");
    req.set(http::field::authorization, std::string("Bearer ") + kTestAdminToken);
    req.body() = body;
    req.prepare_payload();
    http::write(socket, req);
  }
  Response read() {
    boost::beast::flat_buffer buffer;
    Response res;
    http::read(socket, buffer, res);
    return res;
  }
};

std::string big_simulation() {
  return R"({"limit": "100/second", "trace": )" + trace_json(10'000, 0.001) + "}";
}

// A simulation of 10,000 requests takes tens to hundreds of milliseconds; it runs beside the I/O
// threads, so a decision sent while simulations run and wait is answered first even with one I/O
// thread: before the last of four simulations sent ahead of it (one simulation thread, so the
// last waits for three others), which leaves the check a margin of three whole simulations.
TEST(Dashboard, SimulationsDoNotDelayDecisions) {
  ServerProcess server("policies:\n  - {name: login, strategy: fixed-window, limit: 3/hour}\n",
                       {"--threads", "1"});
  boost::asio::io_context ioc;
  std::vector<std::unique_ptr<Pending>> sims;
  for (int i = 0; i < 4; ++i) {  // the most that may run or wait at once
    sims.push_back(std::make_unique<Pending>(ioc, server.port(), http::verb::post, "/v1/simulate",
                                             big_simulation()));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the simulations are read
  Pending hit(ioc, server.port(), http::verb::post, "/v1/hit", R"({"policy": "login", "key": "k"})");
  pollfd answered{hit.socket.native_handle(), POLLIN, 0};
  ASSERT_EQ(poll(&answered, 1, 30'000), 1) << "the decision is answered";
  pollfd last{sims.back()->socket.native_handle(), POLLIN, 0};
  EXPECT_EQ(poll(&last, 1, 0), 0) << "before the simulations that were sent first";
  EXPECT_EQ(hit.read().result_int(), 200);
  for (auto& sim : sims) {
    const Response s = sim->read();
    ASSERT_EQ(s.result_int(), 200) << s.body();
    EXPECT_EQ(boost::json::parse(s.body()).at("events").as_int64(), 10'000);
  }
}

// At most 4 simulations run or wait at once; the rest get 503 with Retry-After at once, and the
// connection stays usable.
TEST(Dashboard, SimulationsBeyondTheBoundAreRefusedWithRetryAfter) {
  ServerProcess server("policies:\n  - {name: login, strategy: fixed-window, limit: 3/hour}\n",
                       {"--threads", "1"});
  boost::asio::io_context ioc;
  const std::string body = big_simulation();
  std::vector<std::unique_ptr<Pending>> sims;
  for (int i = 0; i < 10; ++i) {
    sims.push_back(std::make_unique<Pending>(ioc, server.port(), http::verb::post, "/v1/simulate", body));
  }
  int ok = 0, refused = 0;
  for (auto& p : sims) {
    const Response r = p->read();
    if (r.result_int() == 200) {
      ++ok;
    } else {
      ASSERT_EQ(r.result_int(), 503) << r.body();
      EXPECT_EQ(r[http::field::retry_after], "1");
      EXPECT_NE(r.body().find("try again"), std::string::npos) << r.body();
      EXPECT_TRUE(r.keep_alive());
      ++refused;
    }
  }
  EXPECT_GE(ok, 4) << "four run or wait";
  EXPECT_GE(refused, 1) << "ten at once exceed the bound";
  EXPECT_EQ(server.request(http::verb::post, "/v1/simulate", R"({"limit": "1/second", "trace": [{"t": 0, "key": "a"}]})")
                .result_int(),
            200)
      << "once they are done, simulations are accepted again";
}

// The admin token through the real binary: from admin.token_file, checked on every admin request,
// rotated by rewriting the file and SIGHUP; a reload whose token is invalid is refused and the
// token in force stays.
TEST(Dashboard, AdminEndpointsTakeTheTokenFromItsFileAndRotateOnReload) {
  const auto dir = std::filesystem::temp_directory_path() / ("floodgate-admin-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "token").string();
  std::ofstream(file) << "first-token-0123456789\n";
  ServerProcess server("admin: {token_file: " + file + "}\n" + kConfig, {}, false);
  auto live = [&](const std::string& token) {
    return server.request(http::verb::get, "/v1/live", "", {{"Authorization", "Bearer " + token}}).result_int();
  };
  EXPECT_EQ(live("first-token-0123456789"), 200);
  EXPECT_EQ(live("second-token-0123456789"), 401);
  const Response none = server.request(http::verb::delete_, "/v1/keys?policy=login&key=k", "", {{"Authorization", ""}});
  EXPECT_EQ(none.result_int(), 401);
  EXPECT_EQ(none[http::field::www_authenticate], R"(Bearer realm="floodgate")");
  EXPECT_EQ(server.request(http::verb::post, "/v1/hit", R"({"policy": "login", "key": "k"})", {{"Authorization", ""}})
                .result_int(),
            200);  // decisions stay open
  auto reloaded = [&](const std::string& result) {  // waits for the reload's counter
    const std::string line = "floodgate_config_reloads_total{result=\"" + result + "\"} 1\n";
    for (int i = 0; i < 300; ++i) {
      if (server.request(http::verb::get, "/metrics").body().find(line) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  };
  std::ofstream(file) << "second-token-0123456789\n";
  kill(server.pid(), SIGHUP);
  ASSERT_TRUE(reloaded("ok"));
  EXPECT_EQ(live("second-token-0123456789"), 200);
  EXPECT_EQ(live("first-token-0123456789"), 401);
  std::ofstream(file) << "short\n";
  kill(server.pid(), SIGHUP);
  ASSERT_TRUE(reloaded("failed"));
  EXPECT_EQ(live("second-token-0123456789"), 200) << "an invalid token file is refused, the old token stays";
  const std::string metrics = server.request(http::verb::get, "/metrics").body();
  EXPECT_NE(metrics.find("floodgate_http_unauthorized_total{reason=\"wrong\"} 2\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("floodgate_config_reloads_total{result=\"failed\"} 1\n"), std::string::npos) << metrics;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace floodgate::testing
