// Rate-limit rules over xDS, end to end: a control plane of the test's own (control_plane.hpp)
// pushes RateLimitConfig resources to the real `floodgate serve`, checks every ACK and NACK it
// receives, and ShouldRateLimit calls show which rules are in force. The cases of envoyproxy/
// ratelimit's test/provider/xds_grpc_sotw_provider_test.go and the reload sequence of its
// test/integration/xds_sotw_integration_test.go, on the wire; then what it does beyond them.
#include <sys/socket.h>

#include <netinet/in.h>

#include <ctime>
#include <map>
#include <sstream>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/impl/codegen/client_unary_call.h>
#include <grpcpp/impl/codegen/sync_stream.h>

#include "../http/server_fixture.hpp"
#include "control_plane.hpp"
#include "envoy_gateway_shapes.hpp"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "server/config/config.hpp"
#include "server/xds/rules_resource.hpp"
#include "server/xds/sotw.hpp"

namespace floodgate::testing {
namespace {

namespace rlsv3 = ::envoy::service::ratelimit::v3;
using std::chrono::milliseconds;

rlconf::RateLimitDescriptor rule(const std::string& key, const std::string& value, rlconf::RateLimitUnit unit,
                                 std::uint32_t requests_per_unit,
                                 std::vector<rlconf::RateLimitDescriptor> children = {}) {
  rlconf::RateLimitDescriptor d;
  d.set_key(key);
  d.set_value(value);
  d.mutable_rate_limit()->set_unit(unit);
  d.mutable_rate_limit()->set_requests_per_unit(requests_per_unit);
  for (auto& c : children) *d.add_descriptors() = std::move(c);
  return d;
}

rlconf::RateLimitDescriptor unlimited(const std::string& key, const std::string& value,
                                      std::vector<rlconf::RateLimitDescriptor> children = {}) {
  rlconf::RateLimitDescriptor d;
  d.set_key(key);
  d.set_value(value);
  d.mutable_rate_limit()->set_unlimited(true);
  for (auto& c : children) *d.add_descriptors() = std::move(c);
  return d;
}

rlconf::RateLimitConfig domain(const std::string& name, const std::string& domain,
                               std::vector<rlconf::RateLimitDescriptor> descriptors) {
  rlconf::RateLimitConfig c;
  c.set_name(name);
  c.set_domain(domain);
  for (auto& d : descriptors) *c.add_descriptors() = std::move(d);
  return c;
}

// A port nobody listens on now (for a control plane started later).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t n = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  ::close(fd);
  return ntohs(a.sin_port);
}

// `floodgate serve` with rules from the control plane at `server`, its gRPC port read from a file.
class Floodgate {
 public:
  explicit Floodgate(const std::string& server, const std::string& extra_xds = "", const std::string& extra_rls = "",
                     const std::string& extra_top = "")
      : process_(extra_top + "rls:\n  listen: 127.0.0.1:0\n" + extra_rls +
                     "  xds:\n    server: " + server +
                     "\n    node_id: test-node\n    node_metadata: {zone: z1}\n    headers: {authorization: Bearer t0k}\n"
                     "    connect_retry_ms: 50\n    backoff: {initial_ms: 50, max_ms: 400, jitter: 0.2}\n" + extra_xds,
                 {"--grpc-port-file", port_file_}) {
    for (int i = 0; i < 500 && grpc_port_ == 0; ++i) {
      std::ifstream in(port_file_);
      if (!(in >> grpc_port_)) std::this_thread::sleep_for(milliseconds(10));
    }
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port_), grpc::InsecureChannelCredentials());
    stub_ = rlsv3::RateLimitService::NewStub(channel_);
  }

  // "OK -" (no rule), "OK 3/MINUTE left 2", "OVER_LIMIT 3/MINUTE left 0", "OK unlimited".
  std::string call(const std::string& d, const std::vector<std::pair<std::string, std::string>>& entries) {
    rlsv3::RateLimitRequest req;
    req.set_domain(d);
    auto* desc = req.add_descriptors();
    for (const auto& [k, v] : entries) {
      auto* e = desc->add_entries();
      e->set_key(k);
      e->set_value(v);
    }
    rlsv3::RateLimitResponse res;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    const grpc::Status s = stub_->ShouldRateLimit(&ctx, req, &res);
    if (!s.ok()) return "error " + s.error_message();
    const auto& st = res.statuses(0);
    std::string out = rlsv3::RateLimitResponse::Code_Name(st.code());
    if (!st.has_current_limit()) {
      return out + (st.limit_remaining() == std::numeric_limits<std::uint32_t>::max() ? " unlimited" : " -");
    }
    return out + " " + std::to_string(st.current_limit().requests_per_unit()) + "/" +
           rlsv3::RateLimitResponse::RateLimit::Unit_Name(st.current_limit().unit()) + " left " +
           std::to_string(st.limit_remaining());
  }

  // grpc.health.v1.Health/Check of the server (service ""), as raw bytes: the request is empty and
  // the answer is field 1 (status), a varint: 1 SERVING, 2 NOT_SERVING. -1: the call failed.
  int health() {
    grpc::Slice empty("", 0);
    grpc::ByteBuffer request(&empty, 1);
    grpc::ByteBuffer response;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    const grpc::internal::RpcMethod method("/grpc.health.v1.Health/Check", grpc::internal::RpcMethod::NORMAL_RPC);
    const grpc::Status s = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
        channel_.get(), method, &ctx, request, &response);
    std::vector<grpc::Slice> slices;
    if (!s.ok() || !response.Dump(&slices).ok()) return -1;
    std::string bytes;
    for (const auto& sl : slices) bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
    return bytes.size() == 2 && bytes[0] == 0x08 ? bytes[1] : 0;
  }

  ~Floodgate() { std::filesystem::remove(port_file_); }
  ServerProcess& process() { return process_; }
  [[nodiscard]] const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  int http(const std::string& path) { return process_.request(http::verb::get, path).result_int(); }

 private:
  static std::string grpc_port_file() {
    static int n = 0;
    return (std::filesystem::temp_directory_path() /
            ("floodgate-xds-grpc-" + std::to_string(getpid()) + "-" + std::to_string(n++)))
        .string();
  }
  std::string port_file_ = grpc_port_file();  // before process_, which is started with it
  ServerProcess process_;
  int grpc_port_ = 0;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<rlsv3::RateLimitService::Stub> stub_;
};

bool acked(const ControlPlane::Received& r, const std::string& version) {
  return r.stream != 0 && r.request.version_info() == version && !r.request.has_error_detail() &&
         r.request.type_url() == kRateLimitConfigType && r.request.node().id() == "test-node";
}

// test/provider/xds_grpc_sotw_provider_test.go, each case on the wire.
TEST(Xds, EnvoyproxysProviderCasesOnTheWire) {
  ControlPlane cp;
  cp.push("1", {domain("foo", "foo", {rule("k1", "v1", rlconf::MINUTE, 3)})});
  Floodgate fg(cp.address());

  // The subscription: the node (id, metadata), the type, no version and no nonce yet; the headers.
  const auto first = cp.wait_for([](const auto& r) { return r.request.response_nonce().empty(); });
  ASSERT_EQ(first.stream, 1);
  EXPECT_EQ(first.request.node().id(), "test-node");
  EXPECT_EQ(first.request.node().metadata().fields().at("zone").string_value(), "z1");
  EXPECT_EQ(first.request.type_url(), kRateLimitConfigType);
  EXPECT_EQ(first.request.version_info(), "");
  EXPECT_EQ(first.request.resource_names_size(), 0);
  const auto headers = cp.stream_headers();
  ASSERT_EQ(headers.count("authorization"), 1u);
  EXPECT_EQ(headers.find("authorization")->second, "Bearer t0k");
  EXPECT_TRUE(acked(cp.answer_to("1"), "1"));

  // Initial rules.
  EXPECT_EQ(fg.call("foo", {{"k1", "v1"}}), "OK 3/MINUTE left 2");

  // An update replaces them.
  const std::string n2 = cp.push("2", {domain("foo", "foo", {rule("k2", "v2", rlconf::MINUTE, 5)})});
  EXPECT_TRUE(acked(cp.answer_to(n2), "2"));
  EXPECT_EQ(fg.call("foo", {{"k2", "v2"}}), "OK 5/MINUTE left 4");
  EXPECT_EQ(fg.call("foo", {{"k1", "v1"}}), "OK -");

  // Several domains.
  const std::string n3 = cp.push("3", {domain("foo", "foo", {rule("k1", "v1", rlconf::MINUTE, 10)}),
                                       domain("bar", "bar", {rule("k1", "v1", rlconf::MINUTE, 100)})});
  EXPECT_TRUE(acked(cp.answer_to(n3), "3"));
  // foo.k1_v1 is back with the same domain, path and unit, so the same state: version 1's call
  // still counts (a reload frees nothing; what is counted expires with its window, on every store).
  EXPECT_EQ(fg.call("foo", {{"k1", "v1"}}), "OK 10/MINUTE left 8");
  EXPECT_EQ(fg.call("bar", {{"k1", "v1"}}), "OK 100/MINUTE left 99");

  // Deeper limits, unlimited nodes, shadow and quota mode.
  auto shadow = rule("j2", "v2", rlconf::DAY, 15);
  shadow.set_shadow_mode(true);
  shadow.set_quota_mode(true);
  const std::string n4 = cp.push(
      "4", {domain("foo", "foo",
                   {rule("k1", "v1", rlconf::MINUTE, 10,
                         {unlimited("k2", ""), rule("k2", "v2", rlconf::HOUR, 15)}),
                    unlimited("j1", "v2", {unlimited("j2", ""), shadow})}),
            domain("bar", "bar", {rule("k1", "v1", rlconf::MINUTE, 100)})});
  EXPECT_TRUE(acked(cp.answer_to(n4), "4"));
  EXPECT_EQ(fg.call("foo", {{"k1", "v1"}, {"k2", "v2"}}), "OK 15/HOUR left 14");
  EXPECT_EQ(fg.call("foo", {{"k1", "v1"}, {"k2", "other"}}), "OK unlimited");
  EXPECT_EQ(fg.call("foo", {{"j1", "v2"}}), "OK unlimited");
  EXPECT_EQ(fg.call("foo", {{"j1", "v2"}, {"j2", "v2"}}), "OK 15/DAY left 14");
  // foo.k1_v1's count was kept by version 4 (the same domain, path and unit): the calls of
  // versions 1 and 3.
  EXPECT_EQ(fg.call("foo", {{"k1", "v1"}}), "OK 10/MINUTE left 7");

  // The same domain in two resources: refused without merge_domains (as a rules directory), with
  // the reason in error_detail, the version still in force and the response's nonce.
  const std::string n5 = cp.push("5", {domain("foo-1", "foo", {rule("k1", "v1", rlconf::MINUTE, 10)}),
                                       domain("foo-2", "foo", {rule("k1", "v2", rlconf::MINUTE, 100)})});
  const auto nack = cp.answer_to(n5);
  ASSERT_NE(nack.stream, 0);
  EXPECT_EQ(nack.request.version_info(), "4");
  ASSERT_TRUE(nack.request.has_error_detail());
  EXPECT_EQ(nack.request.error_detail().code(), 3);  // INVALID_ARGUMENT
  EXPECT_EQ(nack.request.error_detail().message(),
            "resource \"foo-2\": domain \"foo\" is already defined in resource \"foo-1\"");
  EXPECT_EQ(fg.call("bar", {{"k1", "v1"}}), "OK 100/MINUTE left 98");  // version 4 serves

  // A rule the rules parser refuses: named by resource and descriptor path.
  const std::string n6 = cp.push("6", {domain("foo", "foo", {rule("k1", "v1", rlconf::UNKNOWN, 10)})});
  const auto nack6 = cp.answer_to(n6);
  EXPECT_EQ(nack6.request.version_info(), "4");
  EXPECT_EQ(nack6.request.error_detail().message(),
            "resource \"foo\": the rate_limit of \"k1_v1\": invalid unit \"UNKNOWN\" (second, minute, hour, day, "
            "week, month, year)");
  EXPECT_EQ(fg.call("foo", {{"k1", "v1"}, {"k2", "v2"}}), "OK 15/HOUR left 13");

  // The next good version is taken.
  const std::string n7 = cp.push("7", {domain("foo", "foo", {rule("k3", "", rlconf::SECOND, 2)})});
  EXPECT_TRUE(acked(cp.answer_to(n7), "7"));
  EXPECT_EQ(fg.call("foo", {{"k3", "a"}}), "OK 2/SECOND left 1");
  const std::string metrics = fg.process().request(http::verb::get, "/metrics").body();
  EXPECT_NE(metrics.find("floodgate_xds_updates_total{result=\"applied\"} 5"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("floodgate_xds_updates_total{result=\"refused\"} 2"), std::string::npos);
}

// The same domain twice with merge_domains (envoyproxy's MERGE_DOMAIN_CONFIG): joined.
TEST(Xds, TheSameDomainTwiceMergesWithMergeDomains) {
  ControlPlane cp;
  cp.push("3", {domain("foo-1", "foo", {rule("k1", "v1", rlconf::MINUTE, 10)}),
                domain("foo-2", "foo", {rule("k1", "v2", rlconf::MINUTE, 100)})});
  Floodgate fg(cp.address(), "", "  merge_domains: true\n");
  EXPECT_TRUE(acked(cp.answer_to("1"), "3"));
  EXPECT_EQ(fg.call("foo", {{"k1", "v1"}}), "OK 10/MINUTE left 9");
  EXPECT_EQ(fg.call("foo", {{"k1", "v2"}}), "OK 100/MINUTE left 99");
}

// test/integration/xds_sotw_integration_test.go's reload sequence (testConfigReload).
TEST(Xds, EnvoyproxysReloadSequence) {
  auto basic = [] {
    return std::vector<rlconf::RateLimitConfig>{
        domain("basic", "basic",
               {rule("key1", "", rlconf::SECOND, 50), rule("key1_local", "", rlconf::SECOND, 50),
                rule("one_per_minute", "", rlconf::MINUTE, 1)}),
        domain("another", "another",
               {rule("key2", "", rlconf::MINUTE, 20), rule("key3", "", rlconf::HOUR, 10),
                rule("key2_local", "", rlconf::MINUTE, 20), rule("key3_local", "", rlconf::HOUR, 10),
                rule("key4", "", rlconf::DAY, 20), rule("key4_local", "", rlconf::DAY, 20)})};
  };
  ControlPlane cp;
  cp.push("1", basic());
  Floodgate fg(cp.address());
  EXPECT_TRUE(acked(cp.answer_to("1"), "1"));
  EXPECT_EQ(fg.call("reload", {{"block", "foo"}}), "OK -");

  auto more = basic();
  more.push_back(domain("reload", "reload",
                        {rule("key1", "", rlconf::SECOND, 50), rule("block", "", rlconf::SECOND, 0),
                         rule("one_per_minute", "", rlconf::MINUTE, 1)}));
  const std::string n2 = cp.push("2", more);
  EXPECT_TRUE(acked(cp.answer_to(n2), "2"));
  EXPECT_EQ(fg.call("reload", {{"key1", "foo"}}), "OK 50/SECOND left 49");
  EXPECT_EQ(fg.call("reload", {{"block", "foo"}}), "OVER_LIMIT 0/SECOND left 0");

  const std::string n3 = cp.push("3", basic());
  EXPECT_TRUE(acked(cp.answer_to(n3), "3"));
  EXPECT_EQ(fg.call("reload", {{"key1", "foo"}}), "OK -");
  EXPECT_EQ(fg.call("another", {{"key2", "x"}}), "OK 20/MINUTE left 19");
}

// FORCE_START_WITHOUT_INITIAL_CONFIG: serving before any rules, not ready; ready once they come.
TEST(Xds, StartsWithoutRulesNotReadyUntilTheyCome) {
  const int port = free_port();
  Floodgate fg("127.0.0.1:" + std::to_string(port), "    start_without_rules: true\n",
               "  healthcheck_needs_rules: true\n");
  EXPECT_EQ(fg.call("foo", {{"k1", "v1"}}), "OK -");  // no rules: no limit
  EXPECT_EQ(fg.http("/readyz"), 503);
  EXPECT_EQ(fg.http("/healthcheck"), 500);
  EXPECT_EQ(fg.http("/livez"), 200);
  EXPECT_EQ(fg.health(), 2);  // NOT_SERVING

  ControlPlane cp(port);
  cp.push("1", {domain("foo", "foo", {rule("k1", "v1", rlconf::MINUTE, 3)})});
  EXPECT_TRUE(acked(cp.answer_to("1"), "1"));
  for (int i = 0; i < 100 && fg.http("/readyz") != 200; ++i) std::this_thread::sleep_for(milliseconds(20));
  EXPECT_EQ(fg.http("/readyz"), 200);
  EXPECT_EQ(fg.http("/healthcheck"), 200);
  EXPECT_EQ(fg.health(), 1);  // SERVING
  EXPECT_EQ(fg.call("foo", {{"k1", "v1"}}), "OK 3/MINUTE left 2");
}

// A lost stream: the rules in force keep serving; the next stream says which version it has.
TEST(Xds, ALostStreamIsOpenedAgainAndTheRulesKeepServing) {
  auto cp = std::make_unique<ControlPlane>();
  const int port = cp->port();
  cp->push("1", {domain("foo", "foo", {rule("k1", "v1", rlconf::MINUTE, 3)})});
  Floodgate fg(cp->address());
  EXPECT_TRUE(acked(cp->answer_to("1"), "1"));
  cp.reset();  // the control plane goes away
  EXPECT_EQ(fg.call("foo", {{"k1", "v1"}}), "OK 3/MINUTE left 2");
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(fg.call("foo", {{"k1", "v1"}}), "OK 3/MINUTE left 1");

  ControlPlane again(port);
  again.push("2", {domain("foo", "foo", {rule("k1", "v1", rlconf::MINUTE, 30)})});
  const auto resubscribe = again.wait_for([](const auto& r) { return r.request.response_nonce().empty(); });
  ASSERT_NE(resubscribe.stream, 0);
  EXPECT_EQ(resubscribe.request.version_info(), "1");  // the version in force, no nonce
  EXPECT_TRUE(acked(again.answer_to("1"), "2"));
  EXPECT_EQ(fg.call("foo", {{"k1", "v1"}}), "OK 30/MINUTE left 27");  // the usage is kept
}

// Without start_without_rules (envoyproxy's default) the listeners open only with rules in force.
TEST(Xds, WaitsForTheFirstRulesBeforeListening) {
  ControlPlane cp;
  cp.push("1", {domain("foo", "foo", {rule("k1", "v1", rlconf::MINUTE, 3)})});
  Floodgate fg(cp.address());
  EXPECT_EQ(fg.http("/readyz"), 200);  // its first answer already
  EXPECT_EQ(fg.call("foo", {{"k1", "v1"}}), "OK 3/MINUTE left 2");
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// TLS to the control plane, with a client certificate (the control plane requires one), the
// server's name checked as rls.xds.tls.server_name says.
TEST(Xds, MutualTlsToTheControlPlane) {
  const auto certs = std::filesystem::temp_directory_path() / ("floodgate-xds-certs-" + std::to_string(getpid()));
  const std::string make = std::string(FLOODGATE_SOURCE_DIR) + "/tests/support/make_test_certs.sh " + certs.string() +
                           " >/dev/null 2>&1";
  ASSERT_EQ(std::system(make.c_str()), 0);
  grpc::SslServerCredentialsOptions o(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  o.pem_root_certs = read_file(certs / "ca.crt");
  o.pem_key_cert_pairs.push_back({read_file(certs / "server.key"), read_file(certs / "server.crt")});
  ControlPlane cp(0, grpc::SslServerCredentials(o));
  cp.push("1", {domain("foo", "foo", {rule("k1", "v1", rlconf::MINUTE, 3)})});
  const std::string tls = "    tls: {ca_file: " + (certs / "ca.crt").string() + ", cert_file: " +
                          (certs / "client.crt").string() + ", key_file: " + (certs / "client.key").string();
  {
    // A name the certificate does not have: no handshake, no request.
    Floodgate wrong("localhost:" + std::to_string(cp.port()), tls + ", server_name: other.example}\n    start_without_rules: true\n");
    EXPECT_EQ(cp.wait_for([](const auto&) { return true; }, milliseconds(500)).stream, 0);
    EXPECT_EQ(wrong.http("/readyz"), 503);
  }
  Floodgate fg("127.0.0.1:" + std::to_string(cp.port()), tls + ", server_name: localhost}\n");
  EXPECT_TRUE(acked(cp.answer_to("1"), "1"));
  EXPECT_EQ(fg.call("foo", {{"k1", "v1"}}), "OK 3/MINUTE left 2");
  std::filesystem::remove_all(certs);
}

// Envoy Gateway's rate-limit Deployment, its environment as it sets it (internal/infrastructure/
// kubernetes/ratelimit in envoyproxy/gateway), with the addresses of this test: it starts without
// rules, not ready and not healthy, exports metrics on a listener of its own, logs JSON, and
// becomes ready when the control plane sends the rules.
TEST(Xds, EnvoyGatewaysEnvironment) {
  const int cp_port = free_port();
  const int metrics_port = free_port();
  // Its certificates: one pair serves floodgate's gRPC listener and its xDS client, as /certs does.
  const auto certs = std::filesystem::temp_directory_path() / ("floodgate-xds-eg-certs-" + std::to_string(getpid()));
  ASSERT_EQ(std::system((std::string(FLOODGATE_SOURCE_DIR) + "/tests/support/make_test_certs.sh " + certs.string() +
                         " >/dev/null 2>&1").c_str()),
            0);
  const std::string crt = (certs / "server.crt").string(), key = (certs / "server.key").string(),
                    ca = (certs / "ca.crt").string();
  const std::map<std::string, std::string> env = {
      {"GRPC_SERVER_USE_TLS", "true"}, {"GRPC_SERVER_TLS_CERT", crt}, {"GRPC_SERVER_TLS_KEY", key},
      {"GRPC_SERVER_TLS_CA_CERT", ca}, {"CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"},
      {"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", crt}, {"CONFIG_GRPC_XDS_CLIENT_TLS_KEY", key},
      {"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", ca},
      {"CONFIG_TYPE", "GRPC_XDS_SOTW"}, {"CONFIG_GRPC_XDS_NODE_ID", "envoy-ratelimit"},
      {"CONFIG_GRPC_XDS_SERVER_URL", "127.0.0.1:" + std::to_string(cp_port)},
      {"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", "50ms"}, {"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "50ms"},
      {"FORCE_START_WITHOUT_INITIAL_CONFIG", "true"}, {"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "true"},
      {"USE_PROMETHEUS", "true"}, {"PROMETHEUS_ADDR", ":" + std::to_string(metrics_port)},
      {"LOG_FORMAT", "json"}, {"LOG_LEVEL", "info"}, {"RUNTIME_IGNOREDOTFILES", "true"},
      {"RUNTIME_WATCH_ROOT", "false"}, {"USE_STATSD", "false"}, {"REDIS_SOCKET_TYPE", "tcp"},
      {"REDIS_URL", "127.0.0.1:1"}};
  for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
  const std::string grpc_port_file =
      (std::filesystem::temp_directory_path() / ("floodgate-xds-eg-" + std::to_string(getpid()))).string();
  ServerProcess fg("", {"--envoyproxy-env", "--storage", "memory", "--grpc-listen", "127.0.0.1:0",
                        "--grpc-port-file", grpc_port_file});
  for (const auto& [k, v] : env) unsetenv(k.c_str());
  int grpc_port = 0;
  for (int i = 0; i < 500 && grpc_port == 0; ++i) {
    std::ifstream in(grpc_port_file);
    if (!(in >> grpc_port)) std::this_thread::sleep_for(milliseconds(10));
  }
  std::filesystem::remove(grpc_port_file);
  ASSERT_NE(grpc_port, 0) << fg.log_text();
  // GET on the metrics listener (it closes the connection after its answer): {status, body}.
  auto get = [](int port, const std::string& path) {
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::socket socket(ioc);
    socket.connect(boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"),
                                                  static_cast<std::uint16_t>(port)));
    boost::asio::write(socket, boost::asio::buffer("GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    std::string text;
    boost::system::error_code ec;
    boost::asio::read(socket, boost::asio::dynamic_buffer(text), ec);  // to the end of the stream
    const std::size_t body = text.find("\r\n\r\n");
    const int status = text.size() > 12 ? std::atoi(text.substr(9, 3).c_str()) : 0;
    return std::pair<int, std::string>(status, body == std::string::npos ? "" : text.substr(body + 4));
  };
  EXPECT_EQ(fg.request(http::verb::get, "/healthcheck").result_int(), 500);
  EXPECT_EQ(fg.request(http::verb::get, "/readyz").result_int(), 503);
  const auto before = get(metrics_port, "/metrics");
  EXPECT_EQ(before.first, 200);
  EXPECT_NE(before.second.find("floodgate_xds_updates_total{result=\"applied\"} 0"), std::string::npos);
  EXPECT_EQ(get(metrics_port, "/other").first, 404);

  grpc::SslServerCredentialsOptions cp_tls(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  cp_tls.pem_root_certs = read_file(ca);
  cp_tls.pem_key_cert_pairs.push_back({read_file(key), read_file(crt)});
  ControlPlane cp(cp_port, grpc::SslServerCredentials(cp_tls));
  cp.push("1", {domain("ratelimit", "default/eg/http", {rule("rule-0-match-0", "", rlconf::HOUR, 3)})});
  const auto ack = cp.answer_to("1");
  EXPECT_EQ(ack.request.node().id(), "envoy-ratelimit");
  EXPECT_EQ(ack.request.version_info(), "1");
  for (int i = 0; i < 100 && fg.request(http::verb::get, "/healthcheck").result_int() != 200; ++i) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(fg.request(http::verb::get, "/healthcheck").result_int(), 200);
  EXPECT_EQ(fg.request(http::verb::get, "/readyz").result_int(), 200);
  EXPECT_NE(get(metrics_port, "/metrics").second.find("floodgate_xds_updates_total{result=\"applied\"} 1"),
            std::string::npos);
  // ShouldRateLimit over TLS with a client certificate (Envoy's); without one the call is refused.
  grpc::SslCredentialsOptions client_tls;
  client_tls.pem_root_certs = read_file(ca);
  const auto anonymous = rlsv3::RateLimitService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port), grpc::SslCredentials(client_tls)));
  client_tls.pem_cert_chain = read_file(certs / "client.crt");
  client_tls.pem_private_key = read_file(certs / "client.key");
  auto stub = rlsv3::RateLimitService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port), grpc::SslCredentials(client_tls)));
  rlsv3::RateLimitRequest req;
  req.set_domain("default/eg/http");
  auto* e = req.add_descriptors()->add_entries();
  e->set_key("rule-0-match-0");
  e->set_value("rule-0-match-0");
  rlsv3::RateLimitResponse res;
  grpc::ClientContext ctx;
  const grpc::Status answered = stub->ShouldRateLimit(&ctx, req, &res);
  ASSERT_TRUE(answered.ok()) << answered.error_message();
  EXPECT_EQ(res.statuses(0).current_limit().requests_per_unit(), 3u);
  EXPECT_EQ(res.statuses(0).limit_remaining(), 2u);
  grpc::ClientContext ctx2;
  ctx2.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  EXPECT_FALSE(anonymous->ShouldRateLimit(&ctx2, req, &res).ok());
  // Every log line is one JSON object; the variables floodgate does not honour are named.
  std::istringstream log(fg.log_text());
  std::string line;
  int lines = 0;
  while (std::getline(log, line)) {
    ++lines;
    EXPECT_TRUE(line.starts_with("{\"time\":") && line.ends_with("}")) << line;
  }
  EXPECT_GT(lines, 3);
  EXPECT_NE(fg.log_text().find("RUNTIME_IGNOREDOTFILES is not honoured"), std::string::npos);
  std::filesystem::remove_all(certs);
}

// SIGTERM: /healthcheck answers 500 while the calls in flight drain (here a health Watch, which
// holds the gRPC server's drain until its deadline), then the process exits.
TEST(Xds, HealthcheckFailsFromSigtermWhileCallsDrain) {
  ControlPlane cp;
  cp.push("1", {domain("foo", "foo", {rule("k1", "v1", rlconf::MINUTE, 3)})});
  Floodgate fg(cp.address(), "", "", "http:\n  drain_timeout_ms: 1500\n");
  ASSERT_TRUE(acked(cp.answer_to("1"), "1"));
  EXPECT_EQ(fg.http("/healthcheck"), 200);
  grpc::ClientContext ctx;
  grpc::Slice empty("", 0);
  const grpc::ByteBuffer request(&empty, 1);
  const grpc::internal::RpcMethod watch("/grpc.health.v1.Health/Watch", grpc::internal::RpcMethod::SERVER_STREAMING);
  std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
      grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(fg.channel().get(), watch, &ctx, request));
  grpc::ByteBuffer first;
  ASSERT_TRUE(reader->Read(&first));  // SERVING: the Watch is in flight
  const auto start = std::chrono::steady_clock::now();
  kill(fg.process().pid(), SIGTERM);
  int status = 0;
  for (int i = 0; i < 50 && status != 500; ++i) {
    status = fg.http("/healthcheck");
    if (status != 500) std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(status, 500);
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1500));  // before the drain ended
  ctx.TryCancel();
}

// --- without sockets -------------------------------------------------------------------------

TEST(XdsSotw, AcksWithTheVersionAndNonceAndNacksWithTheVersionInForce) {
  server::XdsSettings s;
  s.node_id = "n";
  server::XdsSotw sotw(s, kRateLimitConfigType);
  EXPECT_EQ(sotw.subscribe().version_info(), "");
  xds::DiscoveryResponse r;
  r.set_type_url(kRateLimitConfigType);
  r.set_version_info("v1");
  r.set_nonce("a");
  auto ack = sotw.on_response(r, [](const auto&) { return absl::OkStatus(); });
  EXPECT_EQ(ack.version_info(), "v1");
  EXPECT_EQ(ack.response_nonce(), "a");
  EXPECT_FALSE(ack.has_error_detail());
  r.set_version_info("v2");
  r.set_nonce("b");
  auto nack = sotw.on_response(r, [](const auto&) { return absl::InvalidArgumentError("no"); });
  EXPECT_EQ(nack.version_info(), "v1");
  EXPECT_EQ(nack.response_nonce(), "b");
  EXPECT_EQ(nack.error_detail().message(), "no");
  EXPECT_EQ(sotw.subscribe().version_info(), "v1");
  r.set_type_url("type.googleapis.com/envoy.config.cluster.v3.Cluster");
  r.set_nonce("c");
  bool applied = false;
  auto other = sotw.on_response(r, [&](const auto&) {
    applied = true;
    return absl::OkStatus();
  });
  EXPECT_FALSE(applied);
  EXPECT_EQ(other.type_url(), "type.googleapis.com/envoy.config.cluster.v3.Cluster");
  EXPECT_EQ(other.version_info(), "v1");
  EXPECT_TRUE(other.has_error_detail());
}

TEST(XdsSotw, TheBackoffGrowsToItsMaximumWithinItsJitter) {
  server::XdsSettings s;
  s.backoff_initial = milliseconds(100);
  s.backoff_max = milliseconds(1000);
  s.backoff_jitter = 0;
  std::vector<long> got;
  for (unsigned f = 1; f <= 6; ++f) got.push_back(server::xds_backoff(s, f, 0.3).count());
  EXPECT_EQ(got, (std::vector<long>{100, 200, 400, 800, 1000, 1000}));
  s.backoff_jitter = 0.5;
  EXPECT_EQ(server::xds_backoff(s, 2, 0.0).count(), 100);   // 200 − 50 %
  EXPECT_EQ(server::xds_backoff(s, 2, 0.5).count(), 200);
  EXPECT_EQ(server::xds_backoff(s, 2, 0.999).count(), 300);  // just under 200 + 50 %
}

TEST(XdsResources, FloodgatesAdditionsTravelInTheDescriptorsMetadata) {
  auto d = rule("user", "", rlconf::SECOND, 10);
  auto& fields = *d.mutable_metadata()->mutable_fields();
  auto& ours = *fields["floodgate"].mutable_struct_value()->mutable_fields();
  ours["algorithm"].set_string_value("token-bucket");
  ours["burst"].set_number_value(25);
  ours["fail"].set_string_value("closed");
  fields["team"].set_string_value("payments");
  google::protobuf::RepeatedPtrField<google::protobuf::Any> resources;
  resources.Add()->PackFrom(domain("r", "api", {d}));
  auto rules = server::rules_from_resources(resources, false);
  ASSERT_TRUE(rules.ok()) << rules.status();
  const server::RlsRule& r = *(*rules)->rules.at(0);
  EXPECT_EQ(r.strategy, Strategy::kTokenBucket);
  EXPECT_EQ(r.options.burst, 25u);
  EXPECT_EQ(r.options.fail, FailMode::kClosed);
  ASSERT_NE(r.metadata, nullptr);
  EXPECT_EQ(r.metadata->names, (std::vector<std::string>{"team"}));  // "floodgate" is not Envoy's

  ours["bucket"].set_number_value(1);
  resources.Clear();
  resources.Add()->PackFrom(domain("r", "api", {d}));
  EXPECT_EQ(std::string(server::rules_from_resources(resources, false).status().message()),
            "resource \"r\": descriptor \"user\": unknown key \"bucket\" in metadata.floodgate (known: algorithm, "
            "burst, fail, calendar, reservation, share_threshold, value_to_metric)");
  ours.erase("bucket");
  ours["burst"].set_number_value(0);
  resources.Clear();
  resources.Add()->PackFrom(domain("r", "api", {d}));
  EXPECT_EQ(std::string(server::rules_from_resources(resources, false).status().message()),
            "resource \"r\": the rate_limit of \"user\": burst must be a whole number from 1 to 9007199254740992, not 0");
}


// A reservation and a calendar period as they travel: metadata.floodgate.reservation
// {id_key, ttl_ms} beside the rate_limit, metadata.floodgate.calendar {time_zone, anchor_day} in
// it; read into the same rule fields as a file's keys, and refused by the same checks.
TEST(XdsResources, ReservationAndCalendarTravelInTheDescriptorsMetadata) {
  auto user = rule("user", "", rlconf::HOUR, 100);
  auto& reservation = *(*user.mutable_metadata()->mutable_fields())["floodgate"]
                           .mutable_struct_value()->mutable_fields();
  auto& res = *reservation["reservation"].mutable_struct_value()->mutable_fields();
  res["id_key"].set_string_value("request_id");
  res["ttl_ms"].set_number_value(60000);
  auto tenant = rule("tenant", "", rlconf::MONTH, 1000);
  auto& cal = *(*(*tenant.mutable_metadata()->mutable_fields())["floodgate"].mutable_struct_value()
                     ->mutable_fields())["calendar"].mutable_struct_value()->mutable_fields();
  cal["time_zone"].set_string_value("Europe/Berlin");
  cal["anchor_day"].set_number_value(31);
  const auto parse = [&] {
    google::protobuf::RepeatedPtrField<google::protobuf::Any> resources;
    resources.Add()->PackFrom(domain("ai", "ai", {user, tenant}));
    return server::rules_from_resources(resources, false);
  };
  auto rules = parse();
  ASSERT_TRUE(rules.ok()) << rules.status();
  const server::RlsDomain& ai = *(*rules)->find("ai");
  const server::RlsRule& u = *ai.root.children.at(server::rls_default_key("user"))->rule;
  EXPECT_EQ(u.reservation_id_key, "request_id");
  EXPECT_EQ(u.reservation_ttl, 60000 * 1000);
  EXPECT_EQ(ai.reservation_id_keys, std::vector<std::string>{"request_id"});
  EXPECT_EQ(u.metadata, nullptr);  // "floodgate" is not Envoy's
  const server::RlsRule& t = *ai.root.children.at(server::rls_default_key("tenant"))->rule;
  ASSERT_TRUE(t.calendar);
  EXPECT_EQ(t.calendar.unit, CalendarUnit::kMonth);
  EXPECT_EQ(t.calendar.anchor_day, 31);
  EXPECT_EQ(t.calendar.zone.name(), "Europe/Berlin");

  const auto refused = [&] { return std::string(parse().status().message()); };
  res["ttl_ms"].set_number_value(0);
  EXPECT_EQ(refused(), "resource \"ai\": the reservation of \"user\": ttl_ms must be a whole number from 1 to "
                       "86400000, not 0");
  res["ttl_ms"].set_number_value(60000);
  res["key"].set_string_value("request_id");
  EXPECT_EQ(refused(), "resource \"ai\": unknown key \"key\" in the reservation of \"user\" (known: id_key, ttl_ms)");
  res.erase("key");
  res.erase("id_key");
  EXPECT_EQ(refused(), "resource \"ai\": the reservation of \"user\" needs an id_key: the descriptor key that "
                       "carries the request's id");
  res["id_key"].set_string_value("request_id");
  reservation["reservation"].set_string_value("request_id");
  EXPECT_EQ(refused(), "resource \"ai\": the reservation of \"user\" must be a map with id_key (and ttl_ms)");
  // A reservation needs a rate_limit on its descriptor, as in a file.
  auto bare = user;
  bare.clear_rate_limit();
  google::protobuf::RepeatedPtrField<google::protobuf::Any> resources;
  resources.Add()->PackFrom(domain("ai", "ai", {bare}));
  EXPECT_EQ(std::string(server::rules_from_resources(resources, false).status().message()),
            "resource \"ai\": descriptor \"user\": metadata.floodgate.reservation needs a rate_limit on the "
            "descriptor");
  google::protobuf::Value id_only;
  (*id_only.mutable_struct_value()->mutable_fields())["id_key"].set_string_value("request_id");
  reservation["reservation"] = id_only;  // ttl_ms is optional
  ASSERT_TRUE(parse().ok()) << parse().status();

  cal["time_zone"].set_string_value("Mars/Olympus");
  EXPECT_EQ(refused(), "resource \"ai\": the rate_limit of \"tenant\": calendar.time_zone: unknown time zone "
                       "\"Mars/Olympus\": expected an IANA name such as Europe/Berlin or UTC, found in the system's "
                       "zoneinfo (/usr/share/zoneinfo, Debian's tzdata)");
  cal["time_zone"].set_string_value("Europe/Berlin");
  cal["anchor_day"].set_number_value(32);
  EXPECT_EQ(refused(), "resource \"ai\": the rate_limit of \"tenant\": calendar.anchor_day must be a whole number "
                       "from 1 to 31, not 32");
  cal["anchor_day"].set_number_value(1);
  tenant.mutable_rate_limit()->set_unit(rlconf::MINUTE);
  EXPECT_EQ(refused(), "resource \"ai\": the rate_limit of \"tenant\": calendar applies to unit day, week, month "
                       "or year only");
}

using Entries = std::vector<std::pair<std::string, std::string>>;

// One descriptor of `entries` with `hits` (the hits_addend of Envoy's rate limit on the route) in
// `domain_name`: "OK left 20", the code and limit_remaining of its status; `out` gets the answer.
std::string hits_call(const std::shared_ptr<grpc::Channel>& channel, const std::string& domain_name,
                      const Entries& entries, std::uint64_t hits, rlsv3::RateLimitResponse* out = nullptr) {
  rlsv3::RateLimitRequest req;
  req.set_domain(domain_name);
  auto* d = req.add_descriptors();
  for (const auto& [k, v] : entries) {
    auto* e = d->add_entries();
    e->set_key(k);
    e->set_value(v);
  }
  d->mutable_hits_addend()->set_value(hits);
  rlsv3::RateLimitResponse answer;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  const grpc::Status s = rlsv3::RateLimitService::NewStub(channel)->ShouldRateLimit(&ctx, req, &answer);
  if (!s.ok()) return "error " + s.error_message();
  if (out != nullptr) *out = answer;
  return rlsv3::RateLimitResponse::Code_Name(answer.statuses(0).code()) + " left " +
         std::to_string(answer.statuses(0).limit_remaining());
}

// Over the wire: a reservation rule pushed by the control plane reserves the estimate of the
// request's first call and settles the usage at its second (Envoy's apply_on_stream_done call,
// the same request id); a calendar rule's month ends at its anchor day, not after 30 days.
TEST(Xds, AReservationAndACalendarRulePushedOverXds) {
  auto user = rule("user", "", rlconf::HOUR, 100);
  auto& ours = *(*user.mutable_metadata()->mutable_fields())["floodgate"].mutable_struct_value()->mutable_fields();
  auto& res = *ours["reservation"].mutable_struct_value()->mutable_fields();
  res["id_key"].set_string_value("request_id");
  res["ttl_ms"].set_number_value(600000);
  auto tenant = rule("tenant", "", rlconf::MONTH, 1000);
  auto& cal = *(*(*tenant.mutable_metadata()->mutable_fields())["floodgate"].mutable_struct_value()
                     ->mutable_fields())["calendar"].mutable_struct_value()->mutable_fields();
  cal["time_zone"].set_string_value("UTC");
  cal["anchor_day"].set_number_value(15);
  ControlPlane cp;
  cp.push("1", {domain("ai", "ai", {user, tenant})});
  Floodgate fg(cp.address());
  EXPECT_TRUE(acked(cp.answer_to("1"), "1"));

  // "OK left 20": the code and limit_remaining of the call's only descriptor.
  const auto call = [&](const Entries& entries, std::uint64_t hits, rlsv3::RateLimitResponse* out = nullptr) {
    return hits_call(fg.channel(), "ai", entries, hits, out);
  };
  // Request 1 reserves its estimate of 80; request 2's 30 does not fit beside it and reserves
  // nothing; request 1's stream ends having used 10 (a refund of 70); request 2 sent again fits
  // now and its stream ends having used 50 (20 more than its estimate).
  EXPECT_EQ(call({{"user", "u"}, {"request_id", "r1"}}, 80), "OK left 20");
  EXPECT_EQ(call({{"user", "u"}, {"request_id", "r2"}}, 30), "OVER_LIMIT left 20");
  EXPECT_EQ(call({{"user", "u"}, {"request_id", "r1"}}, 10), "OK left 90");
  EXPECT_EQ(call({{"user", "u"}, {"request_id", "r3"}}, 30), "OK left 60");
  EXPECT_EQ(call({{"user", "u"}, {"request_id", "r3"}}, 50), "OK left 40");
  // A second settle of r1 changes nothing; the id's entry is not part of the counter's key.
  EXPECT_EQ(call({{"user", "u"}, {"request_id", "r1"}}, 99), "OK left 40");
  EXPECT_EQ(call({{"user", "u"}, {"request_id", "r4"}}, 40), "OK left 0");
  EXPECT_EQ(call({{"user", "v"}, {"request_id", "r4"}}, 1), "OK left 99");  // another user's own counter

  // The calendar month (UTC, from the 15th): duration_until_reset is the time to the next 15th
  // at 00:00, computed here from the civil calendar.
  rlsv3::RateLimitResponse r;
  const std::time_t now = std::time(nullptr);
  ASSERT_EQ(call({{"tenant", "t"}}, 1, &r), "OK left 999");
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::tm end{};
  end.tm_year = tm.tm_year;
  end.tm_mon = tm.tm_mday >= 15 ? tm.tm_mon + 1 : tm.tm_mon;  // timegm normalises month 12
  end.tm_mday = 15;
  const std::int64_t expected = static_cast<std::int64_t>(timegm(&end) - now);
  EXPECT_NEAR(static_cast<double>(r.statuses(0).duration_until_reset().seconds()), static_cast<double>(expected), 2.0);
  EXPECT_EQ(r.statuses(0).current_limit().unit(), rlsv3::RateLimitResponse::RateLimit::MONTH);

  // A calendar the validator refuses is NACKed naming the resource and the field; version 1 serves.
  cal["time_zone"].set_string_value("Mars/Olympus");
  const std::string n2 = cp.push("2", {domain("ai", "ai", {user, tenant})});
  const auto nack = cp.answer_to(n2);
  EXPECT_EQ(nack.request.version_info(), "1");
  EXPECT_EQ(nack.request.error_detail().message(),
            "resource \"ai\": the rate_limit of \"tenant\": calendar.time_zone: unknown time zone \"Mars/Olympus\": "
            "expected an IANA name such as Europe/Berlin or UTC, found in the system's zoneinfo (/usr/share/zoneinfo, "
            "Debian's tzdata)");
  EXPECT_EQ(call({{"tenant", "t"}}, 1), "OK left 998");
}

// The file of `fg` rewritten as `next` and reloaded (SIGHUP): waits until the reloads counted with
// `result` ("ok", "failed") reach `count`.
void reload_with(Floodgate& fg, const std::string& next, const std::string& result, int count) {
  fg.process().write_config(next);
  kill(fg.process().pid(), SIGHUP);  // the file's watcher may reload it too: counts are at least
  const std::string name = "floodgate_config_reloads_total{result=\"" + result + "\"} ";
  auto reloads = [&] {
    const std::string m = fg.process().request(http::verb::get, "/metrics").body();
    const auto at = m.find(name);
    return at == std::string::npos ? 0 : std::stoi(m.substr(at + name.size()));
  };
  for (int i = 0; i < 200 && reloads() < count; ++i) std::this_thread::sleep_for(milliseconds(20));
  EXPECT_GE(reloads(), count) << name;
  std::this_thread::sleep_for(milliseconds(50));  // a second reload of the same file, if any, is done
}

// An overlay in floodgate's file turns a rule Envoy Gateway pushes into GCRA with a burst, by the
// BackendTrafficPolicy's namespace/name and rule index; the push is shaped as Envoy Gateway's
// testdata (envoy_gateway_shapes.hpp: distinct-match.yaml, then multiple-rules.yaml). A fixed
// window of 5 per second would let 5 calls in at once; GCRA with burst 2 lets 2 in, then one every
// 200 ms (evenly spaced), and says when the next one fits.
TEST(Xds, AnOverlayGivesEnvoyGatewaysRuleGcraWithABurst) {
  ControlPlane cp;
  cp.push("1", {envoy_gateway::distinct_match()});
  Floodgate fg(cp.address(), "",
               "  overlays:\n"
               "    - match: {policy: test-namespace/test-policy-1, rule: 0}\n"
               "      algorithm: gcra\n      burst: 2\n"
               "    - match: {policy: test-namespace/test-polcy-1}\n      algorithm: gcra\n");
  ASSERT_TRUE(acked(cp.answer_to("1"), "1"));
  const std::string policy_rule = "test-namespace/test-policy-1/rule/0";
  auto code = [](const std::string& answer) { return answer.substr(0, answer.find(' ')); };
  // What Envoy sends for the route's actions: the route, the policy's rule, the selector's value.
  auto burst_then_spaced = [&](const std::string& match_value) {
    auto call = [&] {
      return fg.call("first-listener",
                     {{"first-route", "first-route"}, {policy_rule, policy_rule}, {"rule-0-match-0", match_value}});
    };
    // GCRA at 5/second with a burst of 2 (an emission interval of 200 ms): what it promises holds
    // for calls within 400 ms of the first. A round a stalled machine stretched beyond that is
    // not a verdict: the bucket fills again (600 ms) and the round is repeated.
    for (int round = 0; round < 5; ++round) {
      const auto t0 = std::chrono::steady_clock::now();
      const std::string first = call(), second = call(), third = call();
      std::this_thread::sleep_for(milliseconds(260));  // one emission interval later
      const std::string fourth = call(), fifth = call();
      if (std::chrono::steady_clock::now() - t0 >= milliseconds(390)) {
        std::this_thread::sleep_for(milliseconds(600));
        continue;
      }
      EXPECT_EQ(first, "OK 5/SECOND left 1");
      EXPECT_EQ(second, "OK 5/SECOND left 0");
      EXPECT_EQ(code(third), "OVER_LIMIT");  // a fixed window of 5 would allow it
      EXPECT_EQ(code(fourth), "OK");
      EXPECT_EQ(code(fifth), "OVER_LIMIT");
      return;
    }
    ADD_FAILURE() << "five rounds in a row took longer than 390 ms";
  };
  burst_then_spaced("alice");
  std::string metrics = fg.process().request(http::verb::get, "/metrics").body();
  EXPECT_NE(metrics.find("floodgate_xds_overlays_unmatched 1\n"), std::string::npos) << metrics;  // the typo

  // Envoy Gateway pushes the policy with a second rule: the overlay is applied again to rule 0,
  // and rule 1, which it does not name, stays a fixed window.
  const std::string n2 = cp.push("2", {envoy_gateway::multiple_rules()});
  ASSERT_TRUE(acked(cp.answer_to(n2), "2"));
  burst_then_spaced("rule-0-match-0");
  const std::string rule1 = "test-namespace/test-policy-1/rule/1";
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(code(fg.call("first-listener", {{"first-route", "first-route"}, {rule1, rule1},
                                              {"rule-1-match-0", "rule-1-match-0"}})), "OK");
  }
  metrics = fg.process().request(http::verb::get, "/metrics").body();
  EXPECT_NE(metrics.find("floodgate_xds_overlays_unmatched 1\n"), std::string::npos) << metrics;

  // A reload with a bad overlay is refused naming its field: the overlay in force stays.
  const std::string file = (fg.process().dir() / "floodgate.yaml").string();
  const std::string text = read_file(file);
  using Edits = std::vector<std::pair<std::string, std::string>>;
  auto reload = [&](const Edits& edits, const std::string& result, int count) {
    std::string next = text;
    for (const auto& [from, to] : edits) next.replace(next.find(from), from.size(), to);
    reload_with(fg, next, result, count);
  };
  reload({{"burst: 2", "burst: 0"}}, "failed", 1);
  EXPECT_NE(fg.process().log_text().find("rls.overlays[0].burst must be a whole number from 1 to"), std::string::npos);
  std::this_thread::sleep_for(milliseconds(500));  // the bucket full again
  burst_then_spaced("rule-0-match-0");
  // A reload that changes the overlays reads the push in force again: a burst of 3 now, and the
  // typo fixed (the second overlay names rule 1: nothing unmatched).
  reload({{"burst: 2", "burst: 3"}, {"test-polcy-1}\n      algorithm: gcra", "test-policy-1, rule: 1}\n      fail: closed"}},
         "ok", 1);
  std::this_thread::sleep_for(milliseconds(700));
  const std::vector<std::pair<std::string, std::string>> rule0{
      {"first-route", "first-route"}, {policy_rule, policy_rule}, {"rule-0-match-0", "rule-0-match-0"}};
  for (int i = 0; i < 3; ++i) EXPECT_EQ(code(fg.call("first-listener", rule0)), "OK") << i;
  EXPECT_EQ(code(fg.call("first-listener", rule0)), "OVER_LIMIT");
  EXPECT_NE(fg.process().request(http::verb::get, "/metrics").body().find("floodgate_xds_overlays_unmatched 0\n"),
            std::string::npos);
}

const std::string kPolicyRule = "test-namespace/test-policy-1/rule/0";

// An overlay reads Envoy Gateway's `unit: DAY` as a calendar day in a time zone: the day resets at
// the zone's midnight (Asia/Kolkata: UTC+5:30 all year), not at envoyproxy's midnight UTC. A rule
// of a unit without a calendar period is refused at the push and at a reload, naming the field.
TEST(Xds, AnOverlayGivesEnvoyGatewaysDailyRuleACalendarDayInItsZone) {
  ControlPlane cp;
  cp.push("1", {envoy_gateway::distinct_match(3, rlconf::DAY)});
  Floodgate fg(cp.address(), "",
               "  overlays:\n"
               "    - match: {policy: test-namespace/test-policy-1, rule: 0}\n"
               "      calendar: {time_zone: Asia/Kolkata}\n");
  ASSERT_TRUE(acked(cp.answer_to("1"), "1"));
  const Entries alice{{"first-route", "first-route"}, {kPolicyRule, kPolicyRule}, {"rule-0-match-0", "alice"}};
  rlsv3::RateLimitResponse r;
  const std::time_t now = std::time(nullptr);
  ASSERT_EQ(hits_call(fg.channel(), "first-listener", alice, 1, &r), "OK left 2");
  const std::int64_t into_local_day = (static_cast<std::int64_t>(now) + 19'800) % 86'400;
  EXPECT_NEAR(static_cast<double>(r.statuses(0).duration_until_reset().seconds()),
              static_cast<double>(86'400 - into_local_day), 2.0);
  EXPECT_EQ(r.statuses(0).current_limit().unit(), rlsv3::RateLimitResponse::RateLimit::DAY);
  EXPECT_EQ(r.statuses(0).current_limit().requests_per_unit(), 3u);  // Envoy Gateway's rate

  // The policy's rate becomes 5 per second: no calendar second exists, the push is refused
  // naming the overlay's field, and the day rule keeps deciding.
  const std::string n2 = cp.push("2", {envoy_gateway::distinct_match()});
  const auto nack = cp.answer_to(n2);
  EXPECT_EQ(nack.request.version_info(), "1");
  EXPECT_EQ(nack.request.error_detail().message(),
            "resource \"first-listener\": rls.overlays[0].calendar: descriptor \"first-route_first-route." +
                kPolicyRule + "_" + kPolicyRule + ".rule-0-match-0\" has unit SECOND, which has no calendar period "
                "(day, week, month or year)");
  EXPECT_EQ(hits_call(fg.channel(), "first-listener", alice, 1), "OK left 1");

  // A reload whose overlay gives the day an anchor day (months only) is refused: the old overlay
  // keeps serving.
  const std::string file = (fg.process().dir() / "floodgate.yaml").string();
  std::string next = read_file(file);
  next.replace(next.find("Asia/Kolkata}"), 13, "Asia/Kolkata, anchor_day: 3}");
  reload_with(fg, next, "failed", 1);
  EXPECT_NE(fg.process().log_text().find("rls.overlays[0].calendar.anchor_day applies to unit month only; descriptor"),
            std::string::npos);
  ASSERT_EQ(hits_call(fg.channel(), "first-listener", alice, 1, &r), "OK left 0");
  EXPECT_NEAR(static_cast<double>(r.statuses(0).duration_until_reset().seconds()),
              static_cast<double>(86'400 - (static_cast<std::int64_t>(std::time(nullptr)) + 19'800) % 86'400), 2.0);
}

// Envoy Gateway's rule with a Distinct selector on x-user-id and one on x-request-id, and a
// response cost (so that Envoy calls again when the stream ends, the same entries): an overlay
// makes its 2 per minute 2 requests in progress per user, each lease released by that second call.
TEST(Xds, AnOverlayGivesEnvoyGatewaysRuleAConcurrencyLimitReleasedAtTheStreamsEnd) {
  ControlPlane cp;
  cp.push("1", {envoy_gateway::distinct_user_and_request_id(2, rlconf::MINUTE)});
  Floodgate fg(cp.address(), "",
               "  overlays:\n"
               "    - match: {policy: test-namespace/test-policy-1, rule: 0}\n"
               "      algorithm: concurrency\n      reservation: {id_key: rule-0-match-1}\n");
  ASSERT_TRUE(acked(cp.answer_to("1"), "1"));
  // Envoy's call, at the request and again at the stream's end: route, policy rule, the user, the id.
  const auto call = [&](const std::string& user, const std::string& id) {
    return hits_call(fg.channel(), "first-listener",
                     {{"first-route", "first-route"}, {kPolicyRule, kPolicyRule}, {"rule-0-match-0", user},
                      {"rule-0-match-1", id}}, 1);
  };
  EXPECT_EQ(call("alice", "r1"), "OK left 1");
  EXPECT_EQ(call("alice", "r2"), "OK left 0");
  EXPECT_EQ(call("alice", "r3"), "OVER_LIMIT left 0");  // a third in progress; 2 per minute would say the same
  EXPECT_EQ(call("bob", "r4"), "OK left 1");             // bob's own slots
  EXPECT_EQ(call("alice", "r1"), "OK left 1");           // r1's stream ends: its lease is released
  EXPECT_EQ(call("alice", "r3"), "OK left 0");           // within the minute: a rate would refuse a third
  EXPECT_EQ(call("alice", "r5"), "OVER_LIMIT left 0");
  EXPECT_EQ(call("alice", "r2"), "OK left 1");
  EXPECT_EQ(call("alice", "r3"), "OK left 2");
}

// Envoy AI Gateway's token budget on a rule Envoy Gateway pushes: the request's call carries the
// estimate (the rule's request cost), the call when the stream ends the usage (its response cost,
// hits_addend from the dynamic metadata io.envoy.ai_gateway:llm_total_token). An overlay's
// reservation on the x-request-id selector reserves the estimate, then settles the usage.
TEST(Xds, AnOverlayGivesEnvoyGatewaysRuleATokenBudgetReservedThenSettled) {
  ControlPlane cp;
  cp.push("1", {envoy_gateway::distinct_user_and_request_id(100, rlconf::HOUR)});
  Floodgate fg(cp.address(), "",
               "  overlays:\n"
               "    - match: {policy: test-namespace/test-policy-1, rule: 0}\n"
               "      reservation: {id_key: rule-0-match-1, ttl_ms: 600000}\n");
  ASSERT_TRUE(acked(cp.answer_to("1"), "1"));
  const auto call = [&](const std::string& user, const std::string& id, std::uint64_t tokens) {
    return hits_call(fg.channel(), "first-listener",
                     {{"first-route", "first-route"}, {kPolicyRule, kPolicyRule}, {"rule-0-match-0", user},
                      {"rule-0-match-1", id}}, tokens);
  };
  // r1 reserves its estimate of 80; r2's 30 does not fit beside it (each request id counted apart
  // would let it in); r1 ends having used 10 (70 refunded); r3 fits, and ends using 50.
  EXPECT_EQ(call("alice", "r1", 80), "OK left 20");
  EXPECT_EQ(call("alice", "r2", 30), "OVER_LIMIT left 20");
  EXPECT_EQ(call("alice", "r1", 10), "OK left 90");
  EXPECT_EQ(call("alice", "r3", 30), "OK left 60");
  EXPECT_EQ(call("alice", "r3", 50), "OK left 40");
  EXPECT_EQ(call("alice", "r1", 99), "OK left 40");  // a second settle of r1 changes nothing
  EXPECT_EQ(call("bob", "r4", 1), "OK left 99");     // bob's own budget
}


}  // namespace
}  // namespace floodgate::testing
