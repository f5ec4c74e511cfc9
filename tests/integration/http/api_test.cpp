// The HTTP API end to end: the real binary on a loopback port. Runs once per storage URL in
// FLOODGATE_TEST_STORAGES (comma-separated; default memory, memory batched and the Redis fixtures).
#include <poll.h>

#include <cstdlib>
#include <ctime>
#include <sstream>
#include <thread>

#include <boost/json.hpp>

#include "server_fixture.hpp"

namespace floodgate::testing {
namespace {

const char* kConfig = R"(
policies:
  - name: api
    strategy: gcra
    limit: 5/minute
    key: {header: X-Real-IP}
    overrides:
      vip-1: 100/minute
    allow: [trusted]
  - name: windows
    strategy: fixed-window
    limit: 2/minute; 3/hour
    anchor: first-hit
    key: {query: user}
  - name: shadowed
    strategy: fixed-window
    limit: 1/hour
    anchor: first-hit
    shadow: true
  - name: cached
    strategy: fixed-window
    limit: 2/hour
    anchor: first-hit
    blocked_cache: 100
  - name: closed
    strategy: token-bucket
    limit: 1/second
    fail: closed
http:
  max_header_bytes: 2048
  max_body_bytes: 512
)";

std::vector<std::string> storages() {
  const char* env = std::getenv("FLOODGATE_TEST_STORAGES");
  std::vector<std::string> out;
  // "+batch": the same storage with requests coalesced into batches (--batching on).
  // "redis-fixture" / "redis-cluster-fixture": the servers the Redis test fixtures started (their
  // ports are read when the test runs).
  std::stringstream in(env != nullptr && *env != '\0'
                           ? env
                           : "memory,memory+batch,redis-fixture,redis-cluster-fixture");
  for (std::string s; std::getline(in, s, ',');) {
    if (!s.empty()) out.push_back(s);
  }
  return out;
}

// The storage URL for a parameter: fixture names resolve to the running Redis servers.
std::string resolve_storage(const std::string& param) {
  auto read = [](const std::string& file) {
    std::ifstream in(file);
    std::string text;
    std::getline(in, text);
    return text;
  };
  if (param == "redis-fixture") {
    const std::string port = read(std::string(FLOODGATE_REDIS_SINGLE_DIR) + "/port");
    // A command timeout far above the default 50 ms: the fixture is shared with tests that load
    // it, and a degraded (fail-open) decision here would be a false failure.
    return port.empty() ? "" : "redis://127.0.0.1:" + port + "?timeout_ms=2000";
  }
  if (param == "redis-cluster-fixture") {
    std::string ports = read(std::string(FLOODGATE_REDIS_CLUSTER_DIR) + "/ports");
    if (ports.empty()) return "";
    std::string url = "redis-cluster://";
    std::stringstream in(ports);
    bool first = true;
    for (std::string p; std::getline(in, p, ',');) {
      url += (first ? "" : ",") + std::string("127.0.0.1:") + p;
      first = false;
    }
    return url + "?timeout_ms=2000";
  }
  return param;
}

class Api : public ::testing::TestWithParam<std::string> {
 protected:
  // A key of the test's own, so that runs against a shared Redis do not meet.
  std::string key(const std::string& k) const {
    return k + "-" + std::to_string(getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  static std::vector<std::string> args_for(std::string storage) {
    const std::string suffix = "+batch";
    const bool batch = storage.size() > suffix.size() &&
                       storage.compare(storage.size() - suffix.size(), suffix.size(), suffix) == 0;
    if (batch) storage.resize(storage.size() - suffix.size());
    const std::string url = resolve_storage(storage);
    if (url.empty()) return {"--storage", "unresolved-fixture://" + storage};
    // A networked storage batches by default ("auto"); memory is tested both ways.
    return {"--storage", url, "--batching", batch ? "on" : "auto"};
  }
  ServerProcess server{kConfig, args_for(GetParam())};
};

std::string field(const Response& r, const char* name) {
  auto it = r.find(name);
  return it == r.end() ? "<absent>" : std::string(it->value());
}

// GCRA 5/minute: 5 hits in a row, then the 6th waits 12 s less the time the requests took,
// which Retry-After rounds up (whole seconds): 12 unless they took a second or more.
int latest_retry_after(std::chrono::steady_clock::time_point since) {
  const auto took = std::chrono::steady_clock::now() - since;
  return 12 - static_cast<int>(std::chrono::duration_cast<std::chrono::seconds>(took).count());
}

TEST_P(Api, HitAllowsThenDeniesWith429AndHeaders) {
  const std::string body = R"({"policy": "api", "key": ")" + key("u") + R"("})";
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) {
    const Response r = server.request(http::verb::post, "/v1/hit", body);
    ASSERT_EQ(r.result_int(), 200) << r.body();
    EXPECT_EQ(field(r, "X-RateLimit-Remaining"), std::to_string(4 - i));
    EXPECT_EQ(field(r, "RateLimit-Policy"), "\"api\";q=5;w=60");
    EXPECT_NE(r.body().find("\"allowed\": true"), std::string::npos);
  }
  const Response denied = server.request(http::verb::post, "/v1/hit", body);
  const int floor_retry = latest_retry_after(start);
  EXPECT_EQ(denied.result_int(), 429);
  const int retry = std::stoi(field(denied, "Retry-After"));
  EXPECT_LE(retry, 12);
  EXPECT_GE(retry, floor_retry);
  // t: until the bucket is empty again, 60 s after the first hit, rounded up.
  EXPECT_EQ(field(denied, "RateLimit"), "\"api\";r=0;t=" + std::to_string(48 + retry));
  EXPECT_EQ(field(denied, "X-RateLimit-Limit"), "5");
  EXPECT_NE(denied.body().find("\"allowed\": false"), std::string::npos);
  EXPECT_EQ(denied.body().find("\"retry_after\": null"), std::string::npos) << denied.body();
}

std::string metric(ServerProcess& server, const std::string& series) {
  const std::string text = server.request(http::verb::get, "/metrics").body();
  const auto at = text.find("\n" + series + " ");
  return at == std::string::npos ? "<absent>"
                                 : text.substr(at + series.size() + 2,
                                               text.find('\n', at + 1) - (at + series.size() + 2));
}

TEST_P(Api, BlockedKeyCacheDeniesLocallyUntilClear) {
  const std::string k = key("b");
  const std::string body = R"({"policy": "cached", "key": ")" + k + R"("})";
  EXPECT_EQ(server.request(http::verb::post, "/v1/hit", body).result_int(), 200);
  EXPECT_EQ(server.request(http::verb::post, "/v1/hit", body).result_int(), 200);
  EXPECT_EQ(metric(server, "floodgate_blocked_cache_hits_total"), "0");
  const Response first = server.request(http::verb::post, "/v1/hit", body);  // the storage denies
  ASSERT_EQ(first.result_int(), 429);
  EXPECT_EQ(metric(server, "floodgate_blocked_cache_hits_total"), "0");
  const Response local = server.request(http::verb::post, "/v1/hit", body);  // the cache denies
  ASSERT_EQ(local.result_int(), 429);
  EXPECT_EQ(metric(server, "floodgate_blocked_cache_hits_total"), "1");
  const int retry = std::stoi(field(local, "Retry-After"));
  EXPECT_GT(retry, 0);
  EXPECT_LE(retry, std::stoi(field(first, "Retry-After")));
  EXPECT_EQ(field(local, "X-RateLimit-Remaining"), "0");
  // A clear through the service forgets the local block too.
  EXPECT_EQ(server.request(http::verb::delete_, "/v1/keys?policy=cached&key=" + k).result_int(), 204);
  EXPECT_EQ(server.request(http::verb::post, "/v1/hit", body).result_int(), 200);
  EXPECT_EQ(metric(server, "floodgate_blocked_cache_hits_total"), "1");
}

TEST_P(Api, TestStatsAndClear) {
  const std::string k = key("t");
  const std::string body = R"({"policy": "api", "key": ")" + k + R"(", "cost": 5})";
  EXPECT_EQ(server.request(http::verb::post, "/v1/test", body).result_int(), 200);
  EXPECT_EQ(server.request(http::verb::post, "/v1/hit", body).result_int(), 200);
  const Response t = server.request(http::verb::post, "/v1/test", body);
  EXPECT_EQ(t.result_int(), 200);  // a peek answers 200 and says in the body
  EXPECT_NE(t.body().find("\"allowed\": false"), std::string::npos);
  const Response s = server.request(http::verb::get, "/v1/stats?policy=api&key=" + k);
  EXPECT_EQ(s.result_int(), 200);
  EXPECT_NE(s.body().find("\"remaining\": 0"), std::string::npos) << s.body();
  EXPECT_EQ(server.request(http::verb::delete_, "/v1/keys?policy=api&key=" + k).result_int(), 204);
  EXPECT_NE(server.request(http::verb::get, "/v1/stats?policy=api&key=" + k).body().find("\"remaining\": 5"),
            std::string::npos);
}

TEST_P(Api, AuthForNginxTakesTheKeyFromAHeaderOrQuery) {
  const std::string ip = key("10.0.0.1");
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(server.request(http::verb::get, "/v1/auth?policy=api", "", {{"X-Real-IP", ip}}).result_int(), 204);
  }
  const Response denied = server.request(http::verb::get, "/v1/auth?policy=api", "", {{"X-Real-IP", ip}});
  const int floor_retry = latest_retry_after(start);
  EXPECT_EQ(denied.result_int(), 429);
  const int retry = std::stoi(field(denied, "Retry-After"));
  EXPECT_LE(retry, 12);
  EXPECT_GE(retry, floor_retry);
  const Response missing = server.request(http::verb::get, "/v1/auth?policy=api");
  EXPECT_EQ(missing.result_int(), 400);
  EXPECT_NE(missing.body().find("X-Real-IP header"), std::string::npos);
  // Multi-limit policy keyed by a query parameter: 2 per minute (windows that start at the first
  // hit, so that no clock boundary between the requests opens a new one).
  const std::string user = key("q");
  EXPECT_EQ(server.request(http::verb::get, "/v1/auth?policy=windows&user=" + user).result_int(), 204);
  EXPECT_EQ(server.request(http::verb::get, "/v1/auth?policy=windows&user=" + user).result_int(), 204);
  EXPECT_EQ(server.request(http::verb::get, "/v1/auth?policy=windows&user=" + user).result_int(), 429);
}

TEST_P(Api, OverridesAllowListAndShadowMode) {
  const std::string vip = "vip-1";
  server.request(http::verb::delete_, "/v1/keys?policy=api&key=vip-1");
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(server.request(http::verb::post, "/v1/hit", R"({"policy": "api", "key": "vip-1"})").result_int(), 200);
  }
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(server.request(http::verb::post, "/v1/hit", R"({"policy": "api", "key": "trusted"})").result_int(), 200);
  }
  const std::string body = R"({"policy": "shadowed", "key": ")" + key("s") + R"("})";
  EXPECT_EQ(server.request(http::verb::post, "/v1/hit", body).result_int(), 200);
  const Response shadow = server.request(http::verb::post, "/v1/hit", body);
  EXPECT_EQ(shadow.result_int(), 200);
  EXPECT_NE(shadow.body().find("\"shadow_denied\": true"), std::string::npos);
  EXPECT_EQ(field(shadow, "Retry-After"), "<absent>");
  const Response m = server.request(http::verb::get, "/metrics");
  EXPECT_NE(m.body().find("floodgate_decisions_total{policy=\"shadowed\",result=\"shadow_denied\"} 1"),
            std::string::npos)
      << m.body();
  EXPECT_EQ(m.body().find(key("s")), std::string::npos);  // never a series per key
}

TEST_P(Api, InlineLimits) {
  const std::string body = R"({"limit": "2/day", "strategy": "sliding-window-counter", "key": ")" + key("i") + R"("})";
  EXPECT_EQ(server.request(http::verb::post, "/v1/hit", body).result_int(), 200);
  EXPECT_EQ(server.request(http::verb::post, "/v1/hit", body).result_int(), 200);
  EXPECT_EQ(server.request(http::verb::post, "/v1/hit", body).result_int(), 429);
}

// A settle's answer says what happened to its id, from inside the storage's atomic step: settled
// (outstanding), unknown (a mistyped id: its actual charged now), already_settled (a second settle,
// with the same actual or another: nothing changes). Multi-limit too (the Redis reply's 9th word).
TEST_P(Api, ASettleSaysWhatHappenedToItsId) {
  for (const char* limit : {"1000/hour", "1000/hour; 5000/day"}) {
    const bool two = std::string_view(limit).find(';') != std::string_view::npos;
    const std::string k = key(two ? "settle-two" : "settle-one");
    // The answer's "reservation", and each limit's remaining ("limits": the day's too).
    using Answer = std::pair<std::string, std::vector<std::int64_t>>;
    const auto post = [&](const char* path, const std::string& rest) {
      const Response r = server.request(http::verb::post, path,
                                        R"({"limit": ")" + std::string(limit) + R"(", "strategy": "fixed-window", "key": ")" + k + "\", " + rest + "}");
      EXPECT_EQ(r.result_int(), 200) << r.body();
      const auto v = boost::json::parse(r.body()).as_object();
      Answer a{v.contains("reservation") ? std::string(v.at("reservation").as_string().c_str()) : "<absent>", {}};
      for (const auto& l : v.at("limits").as_array()) a.second.push_back(l.at("remaining").as_int64());
      return a;
    };
    const auto expect = [&](const char* what, std::int64_t hour, std::int64_t day) {
      return two ? Answer{what, {hour, day}} : Answer{what, {hour}};
    };
    EXPECT_EQ(post("/v1/hit", R"("cost": 300, "reservation": "req-1")"), expect("<absent>", 700, 4700));
    EXPECT_EQ(post("/v1/settle", R"("reservation": "req-1", "actual": 120)"), expect("settled", 880, 4880));
    EXPECT_EQ(post("/v1/settle", R"("reservation": "req-1", "actual": 120)"), expect("already_settled", 880, 4880));
    EXPECT_EQ(post("/v1/settle", R"("reservation": "req-1", "actual": 500)"), expect("already_settled", 880, 4880));
    EXPECT_EQ(post("/v1/settle", R"("reservation": "req-l", "actual": 80)"), expect("unknown", 800, 4800));
    EXPECT_EQ(post("/v1/settle", R"("reservation": "req-l", "actual": 80)"), expect("already_settled", 800, 4800));
  }
}

TEST_P(Api, BadInputGetsItsStatusAndAClearMessage) {
  struct Case {
    http::verb method;
    std::string target;
    std::string body;
    int status;
    std::string says;
  };
  const Case cases[] = {
      {http::verb::post, "/v1/hit", "{not json", 400, "not valid JSON"},
      {http::verb::post, "/v1/hit", "[1]", 400, "JSON object"},
      {http::verb::post, "/v1/hit", R"({"policy": "nope", "key": "a"})", 400, "unknown policy \\\"nope\\\""},
      {http::verb::post, "/v1/hit", R"({"policy": "api"})", 400, "\\\"key\\\" must be a non-empty string"},
      {http::verb::post, "/v1/hit", R"({"policy": "api", "key": "a", "cost": -1})", 400, "\\\"cost\\\""},
      {http::verb::post, "/v1/hit", R"({"limit": "10/fortnight", "key": "a"})", 400, "fortnight"},
      {http::verb::post, "/v1/hit", R"({"limit": "10/minute", "strategy": "lottery", "key": "a"})", 400, "lottery"},
      {http::verb::post, "/v1/hit", R"({"key": "a"})", 400, "give an inline"},
      {http::verb::get, "/v1/hit", "", 405, "takes POST"},
      {http::verb::get, "/v1/nothing", "", 404, "no such endpoint"},
      {http::verb::get, "/v1/stats?policy=api", "", 400, "policy=NAME&key=KEY"},
      {http::verb::get, "/v1/auth", "", 400, "policy=NAME"},
      {http::verb::post, "/v1/hit", std::string(600, ' '), 413, "larger than the limit"},
  };
  for (const Case& c : cases) {
    const Response r = server.request(c.method, c.target, c.body);
    EXPECT_EQ(r.result_int(), c.status) << c.target << " " << c.body;
    EXPECT_NE(r.body().find(c.says), std::string::npos) << r.body();
  }
  const Response big = server.request(http::verb::get, "/healthz", "", {{"X-Big", std::string(4000, 'x')}});
  EXPECT_EQ(big.result_int(), 431);
  EXPECT_EQ(server.request(http::verb::get, "/healthz").result_int(), 200);  // still serving
}

TEST_P(Api, HealthReadyAndMetrics) {
  EXPECT_EQ(server.request(http::verb::get, "/healthz").result_int(), 200);
  EXPECT_EQ(server.request(http::verb::get, "/readyz").result_int(), 200);
  const Response m = server.request(http::verb::get, "/metrics");
  EXPECT_EQ(m.result_int(), 200);
  EXPECT_NE(m.body().find("# TYPE floodgate_decisions_total counter"), std::string::npos);
  EXPECT_NE(m.body().find("floodgate_storage_latency_seconds_bucket{le=\"+Inf\"}"), std::string::npos);
}

// Each server of a networked storage, with its breaker, on /metrics and in the live view; the
// memory store has none.
TEST_P(Api, StorageServersAndTheirBreakersAreShown) {
  ASSERT_EQ(server.request(http::verb::post, "/v1/hit", R"({"policy": "api", "key": ")" + key("s") + R"("})")
                .result_int(),
            200);
  const std::string text = server.request(http::verb::get, "/metrics").body();
  const Response live = server.request(http::verb::get, "/v1/live");
  ASSERT_EQ(live.result_int(), 200);
  const auto servers = boost::json::parse(live.body()).at("storage").at("servers").as_array();
  const bool networked = GetParam().rfind("memory", 0) != 0;
  if (!networked) {
    EXPECT_TRUE(servers.empty());
    EXPECT_EQ(text.find("floodgate_storage_breaker_open"), std::string::npos);
    return;
  }
  ASSERT_FALSE(servers.empty());
  std::size_t connections = 0;
  for (const auto& s : servers) {
    const std::string name(s.at("name").as_string());
    EXPECT_EQ(s.at("breaker").as_string(), "closed") << name;
    EXPECT_NE(text.find("floodgate_storage_breaker_open{server=\"" + name + "\"} 0\n"), std::string::npos)
        << name << "\n" << text;
    connections += static_cast<std::size_t>(s.at("connections").as_int64());
  }
  EXPECT_GE(connections, 1u) << "the hit went through a connection";
}

// What one request resolves (its reservation, time to live, kind, allow list, shadow mode) is its
// own: the same requests give the same answers one after another on one keep-alive connection as
// each on a connection of its own. Each step is (method, target, body, the key's tag); the keys
// are made apart for the two runs, so both start from the same state.
TEST_P(Api, OneConnectionCarriesNothingIntoTheNextRequest) {
  struct Step {
    http::verb method;
    std::string target;
    std::string body;  // "%" is replaced by the run's key
    int sleep_ms = 0;  // before the step
  };
  const auto hit = [](std::string body) { return Step{http::verb::post, "/v1/hit", std::move(body)}; };
  const std::vector<Step> steps = {
      // A reservation, then plain hits of another key: those reserve nothing (no 409).
      hit(R"({"limit": "10/hour", "key": "%-a", "reservation": "r1"})"),
      hit(R"({"limit": "10/hour", "key": "%-b"})"),
      hit(R"({"limit": "10/hour", "key": "%-b"})"),
      // A settle, then tests: a test charges nothing.
      hit(R"({"limit": "10/hour", "key": "%-c", "cost": 5, "reservation": "r2"})"),
      Step{http::verb::post, "/v1/settle", R"({"limit": "10/hour", "key": "%-c", "reservation": "r2", "actual": 1})"},
      Step{http::verb::post, "/v1/test", R"({"limit": "10/hour", "key": "%-c"})"},
      Step{http::verb::post, "/v1/test", R"({"limit": "10/hour", "key": "%-c"})"},
      // A reservation of 1 ms, then one without ttl_ms: that one lives for the default (its id
      // is still outstanding 50 ms later: 409).
      hit(R"({"limit": "10/hour", "key": "%-d", "reservation": "short", "ttl_ms": 1})"),
      hit(R"({"limit": "10/hour", "key": "%-d", "reservation": "r4"})"),
      Step{http::verb::post, "/v1/hit", R"({"limit": "10/hour", "key": "%-d", "reservation": "r4"})", 50},
      // An allow-listed key of a policy, then the same key under an inline limit: limited. (The
      // key is the allow list's own, so each run has an inline limit of its own: `@`.)
      hit(R"({"policy": "api", "key": "trusted"})"),
      hit(R"({"limit": "1 per @ seconds", "key": "trusted"})"),
      hit(R"({"policy": "api", "key": "trusted"})"),
      hit(R"({"limit": "1 per @ seconds", "key": "trusted"})"),
      // A shadow policy's denial, then an inline limit: denied for real.
      hit(R"({"policy": "shadowed", "key": "%-s"})"),
      hit(R"({"policy": "shadowed", "key": "%-s"})"),
      hit(R"({"limit": "1/hour", "key": "%-s"})"),
      hit(R"({"limit": "1/hour", "key": "%-s"})"),
  };
  const auto run = [&](ServerProcess::Connection* kept, const std::string& k, int seconds) {
    std::vector<std::string> answers;
    for (const Step& st : steps) {
      if (st.sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(st.sleep_ms));
      std::string body = st.body;
      if (const auto at = body.find('%'); at != std::string::npos) body.replace(at, 1, k);
      if (const auto at = body.find('@'); at != std::string::npos) body.replace(at, 1, std::to_string(seconds));
      const Response r = kept != nullptr ? server.request(*kept, st.method, st.target, body)
                                         : server.request(st.method, st.target, body);
      answers.push_back(std::to_string(r.result_int()) + " remaining " + field(r, "X-RateLimit-Remaining"));
    }
    return answers;
  };
  ServerProcess::Connection one = server.connect();
  // Periods apart per process and run: the inline state of a key outlives the test in Redis.
  const int seconds = 3600 + static_cast<int>(getpid() % 100000) * 2;
  const std::vector<std::string> kept = run(&one, key("kept"), seconds);
  const std::vector<std::string> fresh = run(nullptr, key("fresh"), seconds + 1);
  EXPECT_EQ(kept, fresh);
  // And the answers themselves, as the API promises them.
  const std::vector<std::string> expected = {
      "200 remaining 9", "200 remaining 9", "200 remaining 8",                  // r1; b, b
      "200 remaining 5", "200 remaining 9", "200 remaining 9", "200 remaining 9",  // c: 5, settled to 1, tests
      "200 remaining 9", "200 remaining 8", "409 remaining <absent>",            // d: short, r4, r4 again
      "200 remaining 5", "200 remaining 0", "200 remaining 5", "429 remaining 0",  // trusted
      "200 remaining 0", "200 remaining 0", "200 remaining 0", "429 remaining 0",  // shadow, then inline
  };
  EXPECT_EQ(fresh, expected);
}

INSTANTIATE_TEST_SUITE_P(Storages, Api, ::testing::ValuesIn(storages()),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string name = p.param.substr(0, p.param.find(':'));
                           if (p.param.find("+batch") != std::string::npos) name += "_batched";
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name + std::to_string(p.index);
                         });

// ---- the process: reload, drain, hardening --------------------------------------------------

TEST(Serve, SighupReloadsAndABadConfigKeepsTheOldOne) {
  ServerProcess server("policies:\n  - {name: a, limit: 1/minute}\n");
  EXPECT_EQ(server.request(http::verb::post, "/v1/hit", R"({"policy": "b", "key": "k"})").result_int(), 400);
  server.write_config("policies:\n  - {name: a, limit: 1/minute}\n  - {name: b, limit: 1/minute}\n");
  kill(server.pid(), SIGHUP);
  bool reloaded = false;
  for (int i = 0; i < 100 && !reloaded; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    reloaded = server.request(http::verb::post, "/v1/hit", R"({"policy": "b", "key": "k"})").result_int() == 200;
  }
  EXPECT_TRUE(reloaded);
  server.write_config("policies:\n  - {name: a, limit: 1/fortnight}\n");
  kill(server.pid(), SIGHUP);
  std::string log;
  for (int i = 0; i < 250 && log.find("rejected") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    log = server.log_text();
  }
  // Still the old configuration: b exists.
  EXPECT_EQ(server.request(http::verb::post, "/v1/hit", R"({"policy": "b", "key": "k2"})").result_int(), 200);
  EXPECT_NE(log.find("rejected"), std::string::npos) << log;
  EXPECT_NE(log.find("floodgate.yaml:2:"), std::string::npos) << log;  // file and line
  EXPECT_NE(log.find("fortnight"), std::string::npos) << log;
}

TEST(Serve, SigtermExitsPromptly) {
  ServerProcess server("{}\n");
  EXPECT_EQ(server.request(http::verb::get, "/healthz").result_int(), 200);
  // An idle keep-alive connection must not hold the exit up.
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::socket idle(ioc);
  idle.connect({boost::asio::ip::make_address("127.0.0.1"), server.port()});
  const auto [status, took] = server.terminate();
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_LT(took.count(), 5000);
}

TEST(Serve, SlowClientsAreDroppedAndDoNotStopOthers) {
  ServerProcess server("http: {request_timeout_ms: 300, idle_timeout_ms: 300}\n");
  boost::asio::io_context ioc;
  std::vector<boost::asio::ip::tcp::socket> slow;
  for (int i = 0; i < 50; ++i) {
    slow.emplace_back(ioc);
    slow.back().connect({boost::asio::ip::make_address("127.0.0.1"), server.port()});
    boost::asio::write(slow.back(), boost::asio::buffer(std::string("GET /healthz HTTP/1.1\r\nHost: x\r\n")));
  }
  EXPECT_EQ(server.request(http::verb::get, "/healthz").result_int(), 200);
  // The server closes them after 300 ms (well before the default 10 s): a read sees EOF.
  const auto start = std::chrono::steady_clock::now();
  char c;
  boost::system::error_code ec;
  slow.front().read_some(boost::asio::buffer(&c, 1), ec);
  EXPECT_EQ(ec, boost::asio::error::eof);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  // Only the connection asking for the metrics is left.
  std::string m;
  for (int i = 0; i < 250 && m.find("floodgate_http_connections 1\n") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    m = server.request(http::verb::get, "/metrics").body();
  }
  EXPECT_NE(m.find("floodgate_http_connections 1\n"), std::string::npos) << m;
}

TEST(Serve, PipelinedRequestsAreAnsweredInOrder) {
  ServerProcess server("policies:\n  - {name: p, strategy: moving-window, limit: 2/minute, key: {query: k}}\n");
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::socket s(ioc);
  s.connect({boost::asio::ip::make_address("127.0.0.1"), server.port()});
  std::string three;
  for (int i = 0; i < 3; ++i) three += "GET /v1/auth?policy=p&k=pipe HTTP/1.1\r\nHost: x\r\n\r\n";
  boost::asio::write(s, boost::asio::buffer(three));
  boost::beast::flat_buffer buffer;
  std::vector<int> statuses;
  for (int i = 0; i < 3; ++i) {
    Response r;
    http::read(s, buffer, r);
    statuses.push_back(r.result_int());
  }
  EXPECT_EQ(statuses, (std::vector<int>{204, 204, 429}));
}

// 256 pipelined requests for the dashboard's script (21 KB each, 5.4 MB in all: more than a
// loopback socket's send buffer grows to, 4 MB at most by default) to a client that reads nothing at
// first, with a small receive buffer: the server's socket soon takes only part of an answer, and
// the rest waits for the client (the write path that does not complete at once). Every answer then
// arrives whole and in order.
TEST(Serve, AnswersTheSocketTakesOnlyInPartArriveWhole) {
  ServerProcess server("http: {max_pipelined: 256}\npolicies:\n  - {name: p, strategy: fixed-window, limit: 2/minute}\n");
  const Response one = server.request(http::verb::get, "/app.js");
  ASSERT_EQ(one.result_int(), 200);
  ASSERT_GT(one.body().size(), 10'000u);
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::socket s(ioc);
  s.open(boost::asio::ip::tcp::v4());
  s.set_option(boost::asio::socket_base::receive_buffer_size(4096));
  s.connect({boost::asio::ip::make_address("127.0.0.1"), server.port()});
  std::string requests;
  for (int i = 0; i < 256; ++i) requests += "GET /app.js HTTP/1.1\r\nHost: x\r\n\r\n";
  boost::asio::write(s, boost::asio::buffer(requests));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  boost::beast::flat_buffer buffer;
  for (int i = 0; i < 256; ++i) {
    Response r;
    boost::beast::error_code ec;
    http::read(s, buffer, r, ec);
    ASSERT_FALSE(ec) << "answer " << i << ": " << ec.message();
    EXPECT_EQ(r.result_int(), 200) << "answer " << i;
    EXPECT_TRUE(r.body() == one.body()) << "answer " << i << " differs (" << r.body().size() << " bytes)";
  }
}

// True when the socket has bytes to read within the timeout.
bool readable_within(boost::asio::ip::tcp::socket& s, std::chrono::milliseconds timeout) {
  pollfd fd{s.native_handle(), POLLIN, 0};
  return ::poll(&fd, 1, static_cast<int>(timeout.count())) == 1;
}

// `bytes` written on a connection of its own and the answer read back (`error` set when none came);
// with `await_end`, whether the server then ends the connection (within 2 s).
struct Exchange {
  Response response;
  std::string error;
  bool ended = false;
};
Exchange exchange(std::uint16_t port, const std::string& bytes, bool await_end = false) {
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::socket s(ioc);
  s.connect({boost::asio::ip::make_address("127.0.0.1"), port});
  Exchange out;
  boost::beast::error_code ec;
  boost::asio::write(s, boost::asio::buffer(bytes), ec);
  boost::beast::flat_buffer buffer;
  http::read(s, buffer, out.response, ec);
  if (ec) out.error = ec.message();
  if (!ec && await_end && readable_within(s, std::chrono::milliseconds(2000))) {
    char c;
    s.read_some(boost::asio::buffer(&c, 1), ec);
    out.ended = ec == boost::asio::error::eof;
  }
  return out;
}

// 20,000 small requests written at once, read by the client as they come: each is answered once,
// in order. The server parses a header already in its buffer in place (one read brings up to
// 64 KB, some 1,400 requests, the last of them often cut), writes each answer the socket takes at
// once in place and the rest asynchronously. The requests alternate between two policies, whose
// names the answers carry (RateLimit-Policy), so an answer to the wrong request shows; nothing
// may follow the last answer.
TEST(Serve, ThousandsOfPipelinedRequestsAreAnsweredInOrder) {
  ServerProcess server(
      "policies:\n"
      "  - {name: even, strategy: moving-window, limit: 10000/hour, key: {query: k}}\n"
      "  - {name: odd, strategy: moving-window, limit: 5000/hour, key: {query: k}}\n");
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::socket s(ioc);
  s.connect({boost::asio::ip::make_address("127.0.0.1"), server.port()});
  constexpr int kRequests = 20000;
  std::string requests;
  for (int i = 0; i < kRequests; ++i) {
    requests += std::string("GET /v1/auth?policy=") + (i % 2 == 0 ? "even" : "odd") + "&k=deep HTTP/1.1\r\nHost: x\r\n\r\n";
  }
  // Written from another thread while this one reads: neither side waits for the other's buffer.
  std::thread writer([&] {
    boost::system::error_code ec;
    boost::asio::write(s, boost::asio::buffer(requests), ec);
  });
  boost::beast::flat_buffer buffer;
  int wrong = 0;
  for (int i = 0; i < kRequests; ++i) {
    Response r;
    boost::beast::error_code ec;
    http::read(s, buffer, r, ec);
    if (ec) {
      ADD_FAILURE() << "answer " << i << ": " << ec.message();
      break;
    }
    // Even requests: all 10,000 within "even"'s limit. Odd ones: the first 5,000 of "odd"'s.
    const bool even = i % 2 == 0;
    const unsigned status = even || i / 2 < 5000 ? 204 : 429;
    const std::string value(r["RateLimit-Policy"]);
    const bool right = r.result_int() == status && value.starts_with(even ? "\"even\"" : "\"odd\"");
    if (!right && ++wrong <= 5) ADD_FAILURE() << "answer " << i << ": " << r.result_int() << " " << value;
  }
  writer.join();
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(buffer.size(), 0u) << "bytes after the last answer";
  EXPECT_FALSE(readable_within(s, std::chrono::milliseconds(300))) << "an answer more than requests";
}

// The bytes on the wire (the session writes the answer itself): a 204 has no Content-Length
// (RFC 9110 §8.6) and no Transfer-Encoding, and the pipelined 429 behind it follows at once.
TEST(Serve, NoContentAnswersCarryNoContentLengthOnTheWire) {
  ServerProcess server("policies:\n  - {name: p, strategy: fixed-window, limit: 1/minute, key: {query: k}}\n");
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::socket s(ioc);
  s.connect({boost::asio::ip::make_address("127.0.0.1"), server.port()});
  const std::string request = "GET /v1/auth?policy=p&k=wire HTTP/1.1\r\nHost: x\r\n\r\n";
  boost::asio::write(s, boost::asio::buffer(request + request));
  std::string wire;
  boost::system::error_code ec;
  while (wire.find("HTTP/1.1 429") == std::string::npos || !wire.ends_with("\r\n\r\n")) {
    ASSERT_TRUE(readable_within(s, std::chrono::milliseconds(5000))) << "no more answer: " << wire;
    char chunk[4096];
    const std::size_t n = s.read_some(boost::asio::buffer(chunk), ec);
    if (ec) break;
    wire.append(chunk, n);
  }
  ASSERT_FALSE(ec) << ec.message() << ": " << wire;
  const std::size_t second = wire.find("HTTP/1.1 429");
  const std::string first = wire.substr(0, second);
  EXPECT_TRUE(first.starts_with("HTTP/1.1 204 ")) << first;
  EXPECT_TRUE(first.ends_with("\r\n\r\n")) << first;
  EXPECT_EQ(first.find("Content-Length"), std::string::npos) << first;
  EXPECT_EQ(first.find("Transfer-Encoding"), std::string::npos) << first;
  EXPECT_NE(wire.find("Content-Length: 0\r\n", second), std::string::npos) << wire.substr(second);
}

// RFC 9110 §6.6.1: an origin server with a clock sends Date in every 2xx, 3xx and 4xx answer: an
// HTTP-date within a few seconds of this machine's clock, on answers of every kind.
TEST(Serve, EveryAnswerCarriesADate) {
  ServerProcess server("policies:\n  - {name: p, strategy: fixed-window, limit: 1/minute, key: {query: k}}\n");
  for (const char* target : {"/v1/auth?policy=p&k=d", "/v1/auth?policy=p&k=d", "/nope", "/healthz", "/v1/auth"}) {
    const Response r = server.request(http::verb::get, target);
    const std::string date(r[http::field::date]);
    std::tm tm{};
    const char* end = strptime(date.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
    ASSERT_TRUE(end != nullptr && *end == '\0') << target << " " << r.result_int() << ": \"" << date << "\"";
    EXPECT_LE(std::llabs(static_cast<long long>(timegm(&tm) - std::time(nullptr))), 5) << target << ": " << date;
  }
}

// RFC 9112 §3.2: 400 to an HTTP/1.1 request without Host, and to any request with two Host fields
// or an invalid one; an HTTP/1.0 request may go without. Each on a connection of its own.
TEST(Serve, RequestsWithoutAValidHostAreAnswered400) {
  ServerProcess server("policies:\n  - {name: p, strategy: fixed-window, limit: 2/minute}\n");
  const std::string get = "GET /healthz HTTP/1.1\r\n";
  for (const auto& [head, problem] : std::vector<std::pair<std::string, std::string>>{
           {get + "\r\n", "an HTTP/1.1 request needs a Host field"},
           {get + "Host: a\r\nHost: b\r\n\r\n", "more than one Host field"},
           {get + "Host: a b\r\n\r\n", "the Host field is not a host"},
           {get + "Host: a/b\r\n\r\n", "the Host field is not a host"},
           {get + "Host: [zz]\r\n\r\n", "the Host field is not a host"},     // not an IP literal
           {get + "Host: a:8o\r\n\r\n", "the Host field is not a host"},     // not a port
           {get + "Host: me@a\r\n\r\n", "the Host field is not a host"}}) {  // userinfo
    const Exchange e = exchange(server.port(), head, true);
    EXPECT_EQ(e.error, "") << head;
    EXPECT_EQ(e.response.result_int(), 400) << head;
    EXPECT_EQ(e.response.body(), "{\"error\": \"" + problem + "\"}\n") << head;
    EXPECT_TRUE(e.ended) << head;
  }
  for (const std::string& head : {std::string("GET /healthz HTTP/1.0\r\n\r\n"), get + "Host: [::1]:8080\r\n\r\n",
                                 get + "Host: floodgate.example_1.com:443\r\n\r\n", get + "Host: 127.0.0.1:80\r\n\r\n",
                                 get + "Host:\r\n\r\n"}) {  // empty: valid (RFC 9110 §7.2)
    const Exchange e = exchange(server.port(), head);
    EXPECT_EQ(e.error, "") << head;
    EXPECT_EQ(e.response.result_int(), 200) << head;
    EXPECT_EQ(e.response.body(), "ok\n") << head;
  }
}

// RFC 9112 §3.2.2: a server must accept a target in absolute form. It is the same resource as the
// origin form's: the same key's counter, the same routes; a scheme in any case, no path: "/".
TEST(Serve, TargetsInAbsoluteFormAreAccepted) {
  ServerProcess server("policies:\n  - {name: p, strategy: fixed-window, limit: 1/minute, key: {query: k}}\n");
  auto status = [&](const std::string& target) {
    const Exchange e = exchange(server.port(), "GET " + target + " HTTP/1.1\r\nHost: a\r\n\r\n");
    return e.error.empty() ? static_cast<int>(e.response.result_int()) : -1;
  };
  EXPECT_EQ(status("http://a:8080/v1/auth?policy=p&k=abs"), 204);
  EXPECT_EQ(status("/v1/auth?policy=p&k=abs"), 429);  // the same counter
  EXPECT_EQ(status("HTTPS://a/v1/auth?policy=p&k=abs"), 429);
  EXPECT_EQ(status("http://a/healthz"), 200);
  EXPECT_EQ(status("http://a"), 200);  // "/": the dashboard's page
  EXPECT_EQ(status("http://a?policy=p"), 200);
  EXPECT_EQ(status("ftp://a/healthz"), 404);
  // POST /v1/simulate's larger body limit holds for the absolute form too: a body over
  // max_body_bytes (16 KiB) reaches the admin check (401: no token sent); /v1/hit's is 413.
  auto post = [&](const std::string& target, std::size_t bytes) {
    const Exchange e = exchange(server.port(), "POST " + target + " HTTP/1.1\r\nHost: a\r\nContent-Length: " +
                                                   std::to_string(bytes) + "\r\n\r\n" + std::string(bytes, ' '));
    return e.error.empty() ? static_cast<int>(e.response.result_int()) : -1;
  };
  EXPECT_EQ(post("http://a/v1/simulate", 20'000), 401);
  EXPECT_EQ(post("/v1/simulate", 20'000), 401);
  EXPECT_EQ(post("http://a/v1/hit", 20'000), 413);
}

// A request whose header arrives whole but malformed (a field without its colon) is answered 400
// with what is wrong, then the connection ends; the server goes on serving.
TEST(Serve, AMalformedHeaderIsAnswered400) {
  ServerProcess server("policies:\n  - {name: p, strategy: fixed-window, limit: 2/minute}\n");
  const Exchange e = exchange(server.port(), "GET /healthz HTTP/1.1\r\nHost x\r\n\r\n", true);
  ASSERT_EQ(e.error, "");
  EXPECT_EQ(e.response.result_int(), 400);
  EXPECT_NE(e.response.body().find("malformed request"), std::string::npos) << e.response.body();
  EXPECT_TRUE(e.ended);
  EXPECT_EQ(server.request(http::verb::get, "/healthz").result_int(), 200);
}

// On one keep-alive connection: a request sent in pieces with pauses between them (each read takes
// less than the server asks for), then the next request only after a pause, then two requests in
// one write, then a request of exactly the server's first read with another behind it: each answered.
TEST(Serve, KeepAliveRequestsInPiecesAndAfterPausesAreAnswered) {
  // first-hit: a window that starts with the first request, so no clock boundary resets the count.
  ServerProcess server(
      "policies:\n  - {name: p, strategy: fixed-window, limit: 100/hour, anchor: first-hit, key: {query: k}}\n");
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::socket s(ioc);
  s.connect({boost::asio::ip::make_address("127.0.0.1"), server.port()});
  s.set_option(boost::asio::ip::tcp::no_delay(true));
  boost::beast::flat_buffer buffer;
  // The next answer; {0, ""} when none starts arriving within 3 s (a request left unanswered
  // fails the test instead of blocking it).
  auto answer = [&] {
    if (buffer.size() == 0 && !readable_within(s, std::chrono::milliseconds(3000))) {
      return std::make_pair(0u, std::string());
    }
    Response r;
    http::read(s, buffer, r);
    return std::make_pair(r.result_int(), std::string(r["RateLimit"]));
  };
  const std::string request = "GET /v1/auth?policy=p&k=pieces HTTP/1.1\r\nHost: x\r\n\r\n";
  for (const std::size_t cut : {std::size_t{1}, std::size_t{20}, request.size() - 1}) {
    boost::asio::write(s, boost::asio::buffer(request.data(), cut));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    boost::asio::write(s, boost::asio::buffer(request.data() + cut, request.size() - cut));
    EXPECT_EQ(answer().first, 204u) << "cut at " << cut;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  boost::asio::write(s, boost::asio::buffer(request));
  const auto fourth = answer();
  EXPECT_EQ(fourth.first, 204u);
  EXPECT_TRUE(fourth.second.starts_with("\"p\";r=96;")) << fourth.second;
  boost::asio::write(s, boost::asio::buffer(request + request));
  EXPECT_TRUE(answer().second.starts_with("\"p\";r=95;"));
  EXPECT_TRUE(answer().second.starts_with("\"p\";r=94;"));
  // A request of exactly the server's first read (1 KB) with the next one behind it in the same
  // write: the read that took the first one did not empty the socket, and the second is answered
  // without the client sending anything more.
  std::string padded = "GET /v1/auth?policy=p&k=pieces HTTP/1.1\r\nHost: x\r\nX-Pad: ";
  padded += std::string(1024 - padded.size() - 4, 'x') + "\r\n\r\n";
  ASSERT_EQ(padded.size(), 1024u);
  boost::asio::write(s, boost::asio::buffer(padded + request));
  EXPECT_TRUE(answer().second.starts_with("\"p\";r=93;"));
  EXPECT_TRUE(answer().second.starts_with("\"p\";r=92;"));
}

TEST(Serve, ExpectContinueIsAnsweredBeforeTheBody) {
  ServerProcess server("policies:\n  - {name: p, strategy: fixed-window, limit: 2/minute}\n");
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::socket s(ioc);
  s.connect({boost::asio::ip::make_address("127.0.0.1"), server.port()});
  const std::string body = R"({"policy": "p", "key": "expect"})";
  const std::string head = "POST /v1/hit HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                           "Expect: 100-Continue\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  boost::asio::write(s, boost::asio::buffer(head));
  // curl waits a second for the interim answer before sending the body anyway; the server answers
  // at once. Two seconds is far above a loopback round trip, and the server sends nothing else
  // while the body is missing.
  ASSERT_TRUE(readable_within(s, std::chrono::milliseconds(2000))) << "no 100 Continue";
  std::string interim;
  boost::asio::read_until(s, boost::asio::dynamic_buffer(interim), "\r\n\r\n");
  EXPECT_TRUE(interim.starts_with("HTTP/1.1 100 Continue\r\n")) << interim;
  boost::asio::write(s, boost::asio::buffer(body));
  boost::beast::flat_buffer buffer;
  Response r;
  http::read(s, buffer, r);
  EXPECT_EQ(r.result_int(), 200) << r.body();
  EXPECT_NE(r.body().find("\"allowed\": true"), std::string::npos) << r.body();
  // Without Expect, or with the body already sent, there is no interim answer.
  const std::string whole = "POST /v1/hit HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                            "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  boost::asio::write(s, boost::asio::buffer(whole));
  Response again;
  http::read(s, buffer, again);
  EXPECT_EQ(again.result_int(), 200) << again.body();
}

TEST(Serve, ConnectionsBeyondTheBoundAreClosed) {
  // One I/O thread: one acceptor, so the connections are accepted in the order they came.
  ServerProcess server("http: {max_connections: 3}\n", {"--threads", "1"});
  boost::asio::io_context ioc;
  std::vector<boost::asio::ip::tcp::socket> held;
  for (int i = 0; i < 3; ++i) {
    held.emplace_back(ioc);
    held.back().connect({boost::asio::ip::make_address("127.0.0.1"), server.port()});
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  boost::asio::ip::tcp::socket extra(ioc);
  extra.connect({boost::asio::ip::make_address("127.0.0.1"), server.port()});
  boost::asio::write(extra, boost::asio::buffer(std::string("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")));
  char c;
  boost::system::error_code ec;
  extra.read_some(boost::asio::buffer(&c, 1), ec);
  EXPECT_TRUE(ec == boost::asio::error::eof || ec == boost::asio::error::connection_reset) << ec.message();
  held.clear();  // closing them frees room (once the server has seen them closed)
  int status = 0;
  for (int i = 0; i < 250 && status != 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    try {
      status = server.request(http::verb::get, "/healthz").result_int();
    } catch (const std::exception&) {
      status = -1;  // refused while the closes are not yet seen
    }
  }
  EXPECT_EQ(status, 200);
}

TEST(Serve, ShippedExampleConfigurationsAreValid) {
  for (const char* file : {"examples/floodgate.yaml", "examples/nginx/floodgate.yaml"}) {
    const std::string cmd = std::string(FLOODGATE_BINARY) + " serve --check-config " +
                            FLOODGATE_SOURCE_DIR + "/" + file + " 2>&1";
    FILE* pipe = popen(cmd.c_str(), "r");
    std::string out;
    char buf[1024];
    for (std::size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
    EXPECT_EQ(WEXITSTATUS(pclose(pipe)), 0) << out;
    EXPECT_NE(out.find(": ok"), std::string::npos) << out;
  }
}

TEST(Serve, CheckConfigNamesFileLineAndReason) {
  const std::string path = ::testing::TempDir() + "/bad-" + std::to_string(getpid()) + ".yaml";
  std::ofstream(path) << "policies:\n  - name: api\n    strategy: gcra\n    limit: 10/fortnight\n";
  const std::string cmd = std::string(FLOODGATE_BINARY) + " serve --check-config " + path + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  char buf[1024];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = pclose(pipe);
  std::remove(path.c_str());
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_NE(out.find(path + ":4:"), std::string::npos) << out;
  EXPECT_NE(out.find("fortnight"), std::string::npos) << out;
}

}  // namespace
}  // namespace floodgate::testing
