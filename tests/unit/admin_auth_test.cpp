// The admin endpoints' bearer token: the check itself, where the token comes from, and the
// service's answers (401 with a challenge, 403 when none is configured, counted in /metrics).
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "floodgate/memory_storage.hpp"
#include "server/api/admin_auth.hpp"
#include "server/api/service.hpp"

namespace floodgate::server {
namespace {

constexpr std::string_view kToken = "s3cret-token_0123456789";

TEST(AdminAuth, OnlyTheConfiguredBearerTokenIsGranted) {
  EXPECT_EQ(check_admin("Bearer s3cret-token_0123456789", kToken), AdminAuth::kGranted);
  EXPECT_EQ(check_admin("bearer s3cret-token_0123456789", kToken), AdminAuth::kGranted);  // scheme: any case
  EXPECT_EQ(check_admin("Bearer s3cret-token_012345678", kToken), AdminAuth::kWrong);     // a prefix
  EXPECT_EQ(check_admin("Bearer s3cret-token_01234567890", kToken), AdminAuth::kWrong);   // longer
  EXPECT_EQ(check_admin("Bearer S3cret-token_0123456789", kToken), AdminAuth::kWrong);    // the token: exact
  EXPECT_EQ(check_admin("Basic czNjcmV0LXRva2VuXzAxMjM0NTY3ODk=", kToken), AdminAuth::kMissing);
  EXPECT_EQ(check_admin("Bearer", kToken), AdminAuth::kMissing);
  EXPECT_EQ(check_admin("", kToken), AdminAuth::kMissing);
  EXPECT_EQ(check_admin("Bearer ", ""), AdminAuth::kNotConfigured);
  EXPECT_EQ(check_admin("Bearer anything-at-all-0123", ""), AdminAuth::kNotConfigured);
}

TEST(AdminAuth, ShortOrOddTokensAreRefused) {
  EXPECT_TRUE(check_admin_token(kToken).ok());
  EXPECT_TRUE(check_admin_token("abcdefghijklmnop==").ok());
  EXPECT_FALSE(check_admin_token("short").ok());
  EXPECT_FALSE(check_admin_token("has a space in it, long enough").ok());
  EXPECT_FALSE(check_admin_token("abcdefgh=ijklmnopq").ok());  // '=' only at the end
}

TEST(AdminAuth, TheEnvironmentWinsOverTheFile) {
  const std::string file = ::testing::TempDir() + "/admin_token_test";
  std::ofstream(file) << "  from-the-file-0123456789\n";
  Config c;
  c.admin.token_file = file;
  ::unsetenv(kAdminTokenEnv);
  ASSERT_TRUE(resolve_admin_token(c).ok());
  EXPECT_EQ(c.admin.token, "from-the-file-0123456789");
  ::setenv(kAdminTokenEnv, "from-the-environment-01", 1);
  ASSERT_TRUE(resolve_admin_token(c).ok());
  EXPECT_EQ(c.admin.token, "from-the-environment-01");
  ::setenv(kAdminTokenEnv, "tiny", 1);
  const absl::Status bad = resolve_admin_token(c);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find(kAdminTokenEnv), std::string_view::npos) << bad;
  ::unsetenv(kAdminTokenEnv);
  c.admin.token_file = file + ".missing";
  EXPECT_NE(resolve_admin_token(c).message().find("cannot read"), std::string_view::npos);
  std::filesystem::remove(file);
}

class AdminEndpoints : public ::testing::Test {
 protected:
  Response call(std::shared_ptr<Service>& s, http::verb verb, const std::string& target,
                const std::string& authorization) {
    Request req{verb, target, 11};
    if (!authorization.empty()) req.set(http::field::authorization, authorization);
    if (verb == http::verb::post) req.body() = R"({"limit": "1/second", "trace": []})";
    req.prepare_payload();
    Response res;
    s->handle(req, res);
    return res;
  }
  std::shared_ptr<Service> service(std::string token) {
    auto c = parse_config("policies:\n  - {name: api, strategy: gcra, limit: 1/hour}\n", "test.yaml");
    EXPECT_TRUE(c.ok()) << c.status();
    c->admin.token = std::move(token);
    return std::make_shared<Service>(std::make_shared<const Config>(*c), std::make_shared<MemoryStorage>());
  }
  static std::string metrics(std::shared_ptr<Service>& s) {
    Request req{http::verb::get, "/metrics", 11};
    Response res;
    s->handle(req, res);
    return res.body();
  }
  const std::string bearer = "Bearer " + std::string(kToken);
};

TEST_F(AdminEndpoints, NeedTheTokenWhileDecisionsStayOpen) {
  auto s = service(std::string(kToken));
  const std::pair<http::verb, std::string> admin[] = {
      {http::verb::delete_, "/v1/keys?policy=api&key=k"},
      {http::verb::post, "/v1/simulate"},
      {http::verb::get, "/v1/live"},
      {http::verb::head, "/v1/live"}};
  for (const auto& [verb, target] : admin) {
    const Response none = call(s, verb, target, "");
    EXPECT_EQ(none.result_int(), 401) << target;
    EXPECT_EQ(none[http::field::www_authenticate], R"(Bearer realm="floodgate")") << target;
    const Response wrong = call(s, verb, target, "Bearer not-the-token-0123456");
    EXPECT_EQ(wrong.result_int(), 401) << target;
    EXPECT_EQ(wrong[http::field::www_authenticate], R"(Bearer realm="floodgate", error="invalid_token")");
    const int ok = call(s, verb, target, bearer).result_int();
    EXPECT_TRUE(ok == 200 || ok == 204) << target << " " << ok;
  }
  // The decision endpoints, health and metrics need nothing; the page's static files neither.
  Request hit{http::verb::post, "/v1/hit", 11};
  hit.body() = R"({"policy": "api", "key": "k"})";
  hit.prepare_payload();
  Response res;
  s->handle(hit, res);
  EXPECT_EQ(res.result_int(), 200);
  EXPECT_EQ(call(s, http::verb::get, "/readyz", "").result_int(), 200);
  EXPECT_EQ(call(s, http::verb::get, "/", "").result_int(), 200);
  const std::string text = metrics(s);
  EXPECT_NE(text.find("floodgate_http_unauthorized_total{reason=\"missing\"} 4\n"), std::string::npos) << text;
  EXPECT_NE(text.find("floodgate_http_unauthorized_total{reason=\"wrong\"} 4\n"), std::string::npos) << text;
}

TEST_F(AdminEndpoints, AreRefusedToEveryoneWithoutAConfiguredToken) {
  auto s = service("");
  const Response res = call(s, http::verb::get, "/v1/live", "Bearer ");
  EXPECT_EQ(res.result_int(), 403);
  EXPECT_NE(res.body().find(kAdminTokenEnv), std::string::npos) << res.body();
  EXPECT_EQ(call(s, http::verb::delete_, "/v1/keys?policy=api&key=k", bearer).result_int(), 403);
  EXPECT_NE(metrics(s).find("floodgate_http_unauthorized_total{reason=\"not_configured\"} 2\n"), std::string::npos);
}

}  // namespace
}  // namespace floodgate::server
