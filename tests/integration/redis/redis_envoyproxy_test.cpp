// Rolling migration from envoyproxy/ratelimit (docs/envoy.md): with key_layout=envoyproxy the gRPC
// service's fixed-window rules count in envoyproxy's own Redis keys, so its pods and floodgate's
// enforce one total. A raw client stands in for envoyproxy: INCRBY then EXPIRE on the key string
// its limiter/cache_key.go builds (prefix + domain "_" key "_" value "_" + window start).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "floodgate/clock.hpp"
#include "server/rls/service.hpp"
#include "server/rls/rules.hpp"
#include "support/rls_request.hpp"
#include "test_support.hpp"

namespace floodgate::redis {
namespace {

using server::RlsService;
using Response = envoy::service::ratelimit::v3::RateLimitResponse;

constexpr const char* kRules = R"(
domain: d
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: path
    value: "/api/*"
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: tb
    rate_limit: {unit: hour, requests_per_unit: 10, algorithm: token_bucket}
)";

// 2023-11-14T22:15:23.456789Z: inside an hour and a minute.
constexpr Micros kNow = 1'700'000'123'456'789;
constexpr const char* kHour = "1699999200";
constexpr const char* kMinute = "1700000100";

class RedisEnvoyproxy : public ::testing::Test {
 protected:
  // A service over Redis with envoyproxy's layout (prefix_) or, `layout` false, floodgate's.
  std::unique_ptr<RlsService> service(bool layout, bool cluster = false) {
    auto config = std::make_shared<server::RlsConfig>();
    EXPECT_TRUE(server::parse_rls_file(kRules, "rules.yaml", *config).ok());
    const std::string query = layout ? "key_layout=envoyproxy&envoyproxy_prefix=" + prefix_ : "prefix=" + prefix_;
    auto storage = testing::open_url(cluster ? testing::cluster_url(query) : testing::single_url(query));
    const server::RlsSettings settings;  // named: GCC 12 -O3 takes a temporary's strings for uninitialized
    auto s = std::make_unique<RlsService>(storage, clock_, settings);
    s->reload(config);
    return s;
  }
  // Requests of one descriptor admitted before the first OVER_LIMIT (at most `max`).
  static int admitted(RlsService& s, const floodgate::testing::RlsEntries& entries, int max = 20) {
    for (int i = 0; i < max; ++i) {
      Response r;
      EXPECT_TRUE(s.should_rate_limit(floodgate::testing::rls_request("d", {entries}), r).ok());
      if (r.overall_code() != Response::OK) return i;
    }
    return max;
  }

  const std::string prefix_ = testing::unique_prefix("erl");
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(kNow);
  // The single server, connected on first use: the cluster's tests run with only the cluster up.
  testing::Raw& raw() {
    if (!raw_) raw_ = std::make_unique<testing::Raw>(testing::single_port());
    return *raw_;
  }
  std::unique_ptr<testing::Raw> raw_;
};

// envoyproxy's pods have counted 7 of 10 this hour: floodgate admits the 3 left, and envoyproxy's
// next INCRBY finds the window full. Without the layout floodgate would admit 10 more (the double
// limit this option exists to prevent).
TEST_F(RedisEnvoyproxy, EnvoyproxysCountsAreEnforcedByFloodgate) {
  const std::string key = prefix_ + "d_k_v_" + kHour;
  EXPECT_EQ(raw().cmd({"INCRBY", key, "7"}), "7");
  EXPECT_EQ(raw().cmd({"EXPIRE", key, "3600"}), "1");
  auto shared = service(true);
  EXPECT_EQ(admitted(*shared, {{"k", "v"}}), 3);
  EXPECT_EQ(raw().cmd({"GET", key}), "10");  // a refused request is not counted
  EXPECT_EQ(raw().cmd({"INCRBY", key, "1"}), "11");  // envoyproxy: 11 > 10, over limit
  auto separate = service(false);
  EXPECT_EQ(admitted(*separate, {{"k", "v"}}), 10);
}

// The same in a cluster: envoyproxy's keys have no hash tag, each goes to its own slot's master
// (the stand-in writes to the node that owns it, as envoyproxy's cluster client does).
TEST_F(RedisEnvoyproxy, EnvoyproxysCountsAreSharedInACluster) {
  const std::string key = prefix_ + "d_k_v_" + kHour;
  std::unique_ptr<testing::Raw> owner;
  for (const int port : testing::cluster_ports()) {
    auto raw = std::make_unique<testing::Raw>(port);
    if (raw->cmd({"GET", key}).find("MOVED") == std::string::npos) owner = std::move(raw);
  }
  ASSERT_NE(owner, nullptr);
  EXPECT_EQ(owner->cmd({"INCRBY", key, "6"}), "6");
  auto shared = service(true, true);
  EXPECT_EQ(admitted(*shared, {{"k", "v"}}), 4);
  EXPECT_EQ(owner->cmd({"GET", key}), "10");
}

// floodgate's hits land at envoyproxy's key, with its TTL (one unit); a share_threshold wildcard
// counts every value in the pattern's key, as envoyproxy names it.
TEST_F(RedisEnvoyproxy, FloodgatesHitsAreVisibleAtEnvoyproxysKey) {
  auto s = service(true);
  Response r;
  ASSERT_TRUE(s->should_rate_limit(floodgate::testing::rls_request("d", {{{"k", "v"}}}, 4), r).ok());
  EXPECT_EQ(r.overall_code(), Response::OK);
  const std::string key = prefix_ + "d_k_v_" + kHour;
  EXPECT_EQ(raw().cmd({"GET", key}), "4");
  const int ttl = std::stoi(raw().cmd({"TTL", key}));
  EXPECT_TRUE(ttl > 3590 && ttl <= 3600) << ttl;

  EXPECT_EQ(admitted(*s, {{"path", "/api/a"}}, 3), 3);
  EXPECT_EQ(admitted(*s, {{"path", "/api/b"}}), 2);  // 5 a minute, shared by every /api/ path
  const std::string shared = prefix_ + "d_path_/api/*_" + kMinute;
  EXPECT_EQ(raw().cmd({"GET", shared}), "5");
  const int minute_ttl = std::stoi(raw().cmd({"TTL", shared}));
  EXPECT_TRUE(minute_ttl > 50 && minute_ttl <= 60) << minute_ttl;

  // Another algorithm keeps floodgate's keys: nothing in envoyproxy's.
  EXPECT_EQ(admitted(*s, {{"tb", "x"}}, 2), 2);
  EXPECT_EQ(raw().cmd({"EXISTS", prefix_ + "d_tb_x_" + kHour}), "0");
}

}  // namespace
}  // namespace floodgate::redis
