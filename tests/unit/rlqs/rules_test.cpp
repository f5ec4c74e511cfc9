// The RLQS rule files: what they mean and how a bad one is refused (file, line, column).
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "server/config/config.hpp"
#include "server/rlqs/fair_split.hpp"
#include "server/rlqs/rules.hpp"
#include "server/rlqs/settings.hpp"

namespace floodgate::server::rlqs {
namespace {

absl::StatusOr<Rules> parse(const std::string& yaml) {
  Rules r;
  r.source = "dir";
  if (auto s = parse_rules_file(yaml, "edge.yaml", r); !s.ok()) return s;
  return r;
}

constexpr const char* kEdge = R"(domain: edge
buckets:
  - match: {tenant: "*", api: chat}
    limit: 600/minute
    burst: 50
  - match: {api: admin}
    action: deny
  - match: {}
    action: allow
)";

TEST(RlqsRules, TheFirstMatchingRuleInFileOrderApplies) {
  auto r = parse(kEdge);
  ASSERT_TRUE(r.ok()) << r.status();
  const Rule* chat = r->find("edge", {{"tenant", "acme"}, {"api", "chat"}, {"extra", "x"}});
  ASSERT_NE(chat, nullptr);
  EXPECT_EQ(chat->action, Action::kLimit);
  EXPECT_DOUBLE_EQ(chat->per_second(), 10.0);
  EXPECT_EQ(chat->burst, 50);
  EXPECT_EQ(chat->name, "edge.yaml:3 edge");
  // "*" needs the entry to be there, with any value.
  const Rule* no_tenant = r->find("edge", {{"api", "chat"}});
  ASSERT_NE(no_tenant, nullptr);
  EXPECT_EQ(no_tenant->action, Action::kAllow);
  const Rule* admin = r->find("edge", {{"api", "admin"}, {"tenant", "acme"}});
  ASSERT_NE(admin, nullptr);
  EXPECT_EQ(admin->action, Action::kDeny);
  EXPECT_EQ(r->find("other", {{"api", "chat"}}), nullptr);  // no rule: the service allows
}

TEST(RlqsRules, BurstDefaultsToOneSecondOfTheRateAtLeastOne) {
  auto r = parse("domain: d\nbuckets:\n  - {match: {a: b}, limit: 600/minute}\n  - {match: {a: c}, limit: 1/hour}\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->domains.at("d")[0].burst, 10);
  EXPECT_EQ(r->domains.at("d")[1].burst, 1);
}

void expect_error(const std::string& yaml, const std::string& where, const std::string& what) {
  auto r = parse(yaml);
  ASSERT_FALSE(r.ok()) << yaml;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string m(r.status().message());
  EXPECT_NE(m.find(where), std::string::npos) << m;
  EXPECT_NE(m.find(what), std::string::npos) << m;
}

TEST(RlqsRules, BadFilesAreRefusedWithLineAndColumn) {
  expect_error("domain: d\nbuckets:\n  - match: {a: b}\n    limit: 10/fortnight\n", "edge.yaml:4:12", "buckets[0].limit");
  expect_error("domain: d\nbuckets:\n  - match: {a: b}\n    limit: 10/second\n    action: deny\n", "edge.yaml:5:13",
               "limit and action");
  expect_error("domain: d\nbuckets:\n  - match: {a: b}\n    action: maybe\n", "edge.yaml:4:13", "allow or deny");
  expect_error("domain: d\nbuckets:\n  - limit: 1/second\n", "edge.yaml:3:5", "needs a match");
  expect_error("domain: d\nbuckets:\n  - match: {a: b}\n", "edge.yaml:3:5", "needs a limit");
  expect_error("domain: d\nbuckets:\n  - match: {a: \"\"}\n    limit: 1/second\n", "edge.yaml:3:16", "match.a is empty");
  expect_error("domain: d\nbuckets:\n  - match: {a: b}\n    limit: 1/second\n    brust: 3\n", "edge.yaml:5:5", "brust");
  expect_error("domain: d\nbuckets:\n  - match: {a: b}\n    limit: 1/second\n    burst: 0\n", "edge.yaml:5:12",
               "buckets[0].burst");
  expect_error("domain: d\nbuckets:\n  - match: {a: b}\n    limit: 1/second; 10/minute\n", "edge.yaml:4:12", "one rate");
  expect_error("domain: d\nbuckets:\n  - match: {a: b}\n    limit: 1/month\n", "edge.yaml:4:12", "at least 1/day");
  expect_error("buckets: []\n", "edge.yaml:1:1", "domain is missing");
  expect_error("domain: d\nbuckets: {a: b}\n", "edge.yaml:2:10", "buckets must be a list");
}

TEST(RlqsRules, ADomainInTwoFilesIsRefused) {
  const auto dir = std::filesystem::temp_directory_path() / ("rlqs-rules-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "a.yaml") << "domain: d\nbuckets: [{match: {}, action: allow}]\n";
  std::ofstream(dir / "b.yaml") << "domain: d\nbuckets: [{match: {}, action: deny}]\n";
  auto r = load_rules(dir.string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("b.yaml:1:9: domain \"d\" is also in another file"), std::string::npos)
      << r.status();
  std::filesystem::remove(dir / "b.yaml");
  auto ok = load_rules(dir.string());
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)->domains.size(), 1u);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(load_rules(dir.string()).status().code(), absl::StatusCode::kNotFound);
}

TEST(RlqsRules, TheConfigurationFileNamesTheDirectory) {
  const auto dir = std::filesystem::temp_directory_path() / ("rlqs-config-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "floodgate.yaml").string();
  std::ofstream(file) << "listen: 127.0.0.1:8080\nrlqs:\n  config: rlqs.d\n";
  EXPECT_TRUE(load_config(file).ok());  // the main configuration accepts the section
  auto d = rules_dir_of(file);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, (dir / "rlqs.d").string());
  std::ofstream(file) << "rlqs:\n  confg: x\n";
  auto bad = rules_dir_of(file);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("floodgate.yaml:2:3: unknown key \"confg\" in rlqs"), std::string::npos)
      << bad.status();
  std::ofstream(file) << "listen: 127.0.0.1:8080\n";
  EXPECT_EQ(rules_dir_of(file).value_or("?"), "");
  EXPECT_EQ(rules_dir_of("").value_or("?"), "");
  std::filesystem::remove_all(dir);
}

TEST(RlqsShape, WholeSecondIntervalsOfAboutAHundredTokens) {
  Rule r;
  r.amount = 600;
  r.period = 60 * kMicrosPerSecond;  // 10/s
  r.burst = 10;
  Shape s = shape_of(r);
  EXPECT_EQ(s.fill_seconds, 10u);
  EXPECT_EQ(s.total, 100u);
  r.amount = 5000;
  r.period = kMicrosPerSecond;
  s = shape_of(r);
  EXPECT_EQ(s.fill_seconds, 1u);
  EXPECT_EQ(s.total, 5000u);
  r.amount = 1;
  r.period = 3600 * kMicrosPerSecond;  // slow rates: a longer interval, never more than the rate
  s = shape_of(r);
  EXPECT_EQ(s.fill_seconds, 86'400u);
  EXPECT_EQ(s.total, 24u);
}

}  // namespace
}  // namespace floodgate::server::rlqs
