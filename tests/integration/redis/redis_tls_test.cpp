// TLS to Redis (rediss://) against the fixture's servers (start-tls): the server is verified
// against the CA file and its name, a wrong CA or name is refused with OpenSSL's reason (never a
// decision), `tls_insecure=true` skips the check, a server that requires a client certificate gets
// one, and Redis 7's AUTH user password works over it.
#include <gtest/gtest.h>

#include "floodgate/limiter.hpp"
#include "test_support.hpp"

namespace floodgate::redis::testing {
namespace {

int port_of(const std::string& file) {
  return std::stoi(read_file(single_dir() + "/" + file));
}

std::string url(const std::string& user_info, const std::string& port_file, const std::string& query) {
  return "rediss://" + user_info + "127.0.0.1:" + std::to_string(port_of(port_file)) + "?timeout_ms=2000&" + query;
}

std::string file(const std::string& name) { return tls_dir() + "/" + name; }

absl::Status open_status(const std::string& text) {
  auto s = open_storage(text);
  return s.status();
}

TEST(RedisTls, DecisionsOverTlsAsAnAclUser) {
  auto storage = open_storage(url("floodgate:s3cret@", "tls_port", "tls_ca_file=" + file("ca.crt") +
                                                                        "&prefix=" + unique_prefix("tls")));
  ASSERT_TRUE(storage.ok()) << storage.status();
  auto policy = Policy::make("p", Strategy::kFixedWindow, "3/hour");
  ASSERT_TRUE(policy.ok()) << policy.status();
  Limiter limiter(*storage);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.hit(*policy, "k")->allowed) << i;
  const auto denied = limiter.hit(*policy, "k");
  ASSERT_TRUE(denied.ok());
  EXPECT_FALSE(denied->allowed);
  EXPECT_FALSE(denied->degraded);
}

TEST(RedisTls, AWrongPasswordIsRefusedByAuth) {
  const absl::Status s = open_status(url("floodgate:nope@", "tls_port", "tls_ca_file=" + file("ca.crt")));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("AUTH failed"), std::string_view::npos) << s;
}

TEST(RedisTls, AServerSignedByAnotherCaIsRefused) {
  const absl::Status s = open_status(url("", "tls_port", "tls_ca_file=" + file("other-ca.crt")));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("certificate verify failed"), std::string_view::npos) << s;
  // Without a CA file the system store is used, which does not know the test CA either.
  const absl::Status system = open_status(url("", "tls_port", "pool=1"));
  EXPECT_NE(system.message().find("certificate verify failed"), std::string_view::npos) << system;
}

TEST(RedisTls, TheServerNameIsChecked) {
  const std::string ca = "tls_ca_file=" + file("ca.crt");
  const absl::Status wrong = open_status(url("", "tls_port", ca + "&tls_server_name=redis.example.org"));
  EXPECT_EQ(wrong.code(), absl::StatusCode::kUnavailable) << wrong;
  EXPECT_NE(wrong.message().find("certificate verify failed"), std::string_view::npos) << wrong;
  EXPECT_NE(wrong.message().find("hostname mismatch"), std::string_view::npos) << wrong;
  EXPECT_TRUE(open_status(url("", "tls_port", ca + "&tls_server_name=localhost")).ok());  // in its SAN
}

TEST(RedisTls, InsecureSkipsTheVerificationOnlyWhenAskedFor) {
  EXPECT_TRUE(open_status(url("", "tls_port", "tls_ca_file=" + file("other-ca.crt") + "&tls_insecure=true")).ok());
}

TEST(RedisTls, AServerThatRequiresAClientCertificateGetsOne) {
  const std::string ca = "tls_ca_file=" + file("ca.crt");
  const absl::Status without = open_status(url("", "mtls_port", ca));
  EXPECT_EQ(without.code(), absl::StatusCode::kUnavailable) << without;
  const absl::Status with = open_status(
      url("", "mtls_port", ca + "&tls_cert_file=" + file("client.crt") + "&tls_key_file=" + file("client.key")));
  EXPECT_TRUE(with.ok()) << with;
}

TEST(RedisTls, BadOptionsAreClearErrors) {
  const absl::Status plain = open_status("redis://127.0.0.1:1?tls_ca_file=/x");
  EXPECT_EQ(plain.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(plain.message().find("needs TLS: use rediss://"), std::string_view::npos) << plain;
  const absl::Status missing = open_status(url("", "tls_port", "tls_ca_file=/nonexistent/ca.crt"));
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument) << missing;
  EXPECT_NE(missing.message().find("/nonexistent/ca.crt"), std::string_view::npos) << missing;
  EXPECT_EQ(open_status(url("", "tls_port", "tls_insecure=yes")).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace floodgate::redis::testing
