// The configuration schema (server/config/config.hpp): each hostile input that lies in the loader,
// refused with file:line:column and the field, or checked as `serve` would start it.
#include "server/config/config.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "server/rls/rules.hpp"

namespace floodgate::server {
namespace {

std::string error_of(const std::string& yaml) {
  auto c = parse_config(yaml, "cfg.yaml");
  return c.ok() ? "<ok>" : std::string(c.status().message());
}

std::string start_error_of(const std::string& yaml) {
  auto c = parse_config(yaml, "cfg.yaml");
  if (!c.ok()) return std::string(c.status().message());
  const absl::Status s = check_startup(*c);
  return s.ok() ? "<ok>" : std::string(s.message());
}

TEST(ConfigSchema, TimeoutsThatWouldOverflowChronoAreRefused) {
  for (const char* field : {"idle_timeout_ms", "request_timeout_ms", "write_timeout_ms", "drain_timeout_ms"}) {
    const std::string e = error_of(std::string("http:\n  ") + field + ": 10000000000000\n");
    EXPECT_EQ(e, std::string("cfg.yaml:2:") + std::to_string(5 + std::string(field).size()) + ": http." + field +
                     " must be a whole number from 1 to 86400000 (milliseconds), not 10000000000000");
  }
  EXPECT_EQ(error_of("http: {idle_timeout_ms: 86400000}\n"), "<ok>");
}

TEST(ConfigSchema, ThreadsAreBounded) {
  EXPECT_EQ(error_of("threads: 100000\n"), "cfg.yaml:1:10: threads must be a whole number from 1 to 1024, not 100000");
  EXPECT_EQ(error_of("threads: 4\n"), "<ok>");
  Config c;
  c.threads = 5000;  // --threads on the command line
  EXPECT_FALSE(check_startup(c).ok());
}

TEST(ConfigSchema, SizesAreNeverTruncated) {
  EXPECT_EQ(error_of("http: {max_header_bytes: 4294967297}\n"),
            "cfg.yaml:1:26: http.max_header_bytes must be a whole number from 1 to 1048576 (bytes), not 4294967297");
  EXPECT_NE(error_of("http: {max_body_bytes: -1}\n").find("http.max_body_bytes must be"), std::string::npos);
  EXPECT_NE(error_of("http: {max_pipelined: 1e3}\n").find("not \"1e3\""), std::string::npos);
}

TEST(ConfigSchema, DuplicateKeysAreErrorsAtEveryLevel) {
  EXPECT_EQ(error_of("listen: 127.0.0.1:1\nlisten: 127.0.0.1:2\n"),
            "cfg.yaml:2:1: duplicate key \"listen\" (each key may appear once in a map)");
  EXPECT_EQ(error_of("policies:\n  - name: a\n    limit: 1/second\n    limit: 2/second\n"),
            "cfg.yaml:4:5: duplicate key \"limit\" (each key may appear once in a map)");
  EXPECT_NE(error_of("policies:\n  - {name: a, limit: 1/second, overrides: {k: 1/minute, k: 2/minute}}\n")
                .find("duplicate key \"k\""),
            std::string::npos);
}

TEST(ConfigSchema, OneDocumentPerFile) {
  EXPECT_EQ(error_of("threads: 2\n---\nthreads: 100000\n"),
            "cfg.yaml:2:1: a second YAML document (after ---): a file holds one document");
  // A self-referential alias makes a cycle that yaml-cpp never frees (the fuzzer ran out of memory).
  EXPECT_NE(error_of("policies: &p [*p]\n").find("an alias (*name)"), std::string::npos);
}

TEST(ConfigSchema, CheckConfigChecksWhatStartChecks) {
  EXPECT_EQ(start_error_of("log_level: bogus\n"),
            "unknown log_level \"bogus\" (trace, debug, info, warn, error, critical, off)");
  EXPECT_NE(start_error_of("storage: bogus://x\n").find("unknown storage \"bogus://x\""), std::string::npos);
  EXPECT_NE(start_error_of("storage: memory://?max_keys=0\n").find("max_keys"), std::string::npos);
  EXPECT_NE(start_error_of("storage: redis://h:99999\n"), "<ok>");
  EXPECT_EQ(error_of("listen: 999.1.1.1:80\n"),
            "cfg.yaml:1:9: listen: listen address \"999.1.1.1:80\": \"999.1.1.1\" is not an IP address (e.g. "
            "127.0.0.1, 0.0.0.0 or [::1])");
  EXPECT_EQ(error_of("listen: \"[::1]:80\"\n"), "<ok>");
  // 1 per 100 years: exact in memory, beyond what the Redis scripts keep exactly.
  const std::string century = "policies:\n  - {name: slow, strategy: fixed-window, limit: 1 per 100 years}\n";
  EXPECT_EQ(start_error_of(century), "<ok>");
  EXPECT_NE(start_error_of("storage: redis://127.0.0.1:6379\n" + century).find("policy \"slow\""), std::string::npos);
  EXPECT_NE(start_error_of("storage: redis://127.0.0.1:6379\npolicies:\n  - {name: a, strategy: fixed-window, "
                           "limit: 1/second, overrides: {k: 1 per 100 years}}\n")
                .find("override"),
            std::string::npos);
}

TEST(ConfigSchema, ReservedAndMalformedNamesAreRefused) {
  for (const char* name : {"inline", "other", "\"inline gcra 10/minute\"", "\"a\\nb\"", "\"\""}) {
    EXPECT_NE(error_of(std::string("policies:\n  - {name: ") + name + ", limit: 1/second}\n").find("cfg.yaml:2:"),
              std::string::npos)
        << name;
  }
  EXPECT_EQ(error_of("policies:\n  - {name: \"inline-ish\", limit: 1/second}\n"), "<ok>");
}

TEST(ConfigSchema, HeaderNamesAreTokens) {
  EXPECT_NE(error_of("policies:\n  - {name: a, limit: 1/second, key: {header: \"X-Key\\r\\nX-Evil: 1\"}}\n")
                .find("is not an HTTP field name"),
            std::string::npos);
  EXPECT_NE(error_of("policies:\n  - {name: a, limit: 1/second, key: {header: \"X Key\"}}\n").find("cfg.yaml:2:"),
            std::string::npos);
  EXPECT_EQ(error_of("policies:\n  - {name: a, limit: 1/second, key: {header: X-Api-Key}}\n"), "<ok>");
  EXPECT_NE(error_of("policies:\n  - {name: a, limit: 1/second, key: {query: \"a\\nb\"}}\n"), "<ok>");
}

// The tls section holds paths only (load_tls checks the files): relative to the file, none empty,
// no unknown keys.
TEST(ConfigSchema, TlsPathsAreRelativeToTheFile) {
  auto c = parse_config("tls: {cert_file: a.crt, key_file: /etc/b.key, client_ca_file: ca/c.crt}\n", "/srv/fg/cfg.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->tls.cert_file, "/srv/fg/a.crt");
  EXPECT_EQ(c->tls.key_file, "/etc/b.key");
  EXPECT_EQ(c->tls.client_ca_file, "/srv/fg/ca/c.crt");
  EXPECT_TRUE(c->tls.enabled() && c->tls.mutual());
  EXPECT_EQ(error_of("tls: {cert_file: \"\"}\n"), "cfg.yaml:1:18: tls.cert_file is empty");
  EXPECT_NE(error_of("tls: {cert: a.crt}\n").find("unknown key \"cert\""), std::string::npos) << error_of("tls: {cert: a.crt}\n");
  EXPECT_FALSE(parse_config("", "cfg.yaml")->tls.enabled());
}

TEST(ConfigFile, OnlyBoundedRegularFiles) {
  const auto dir = std::filesystem::temp_directory_path() / ("fg-config-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto d = load_config(dir.string());
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("not a regular file"), std::string::npos) << d.status();
  auto z = load_config("/dev/zero");
  ASSERT_FALSE(z.ok());
  EXPECT_NE(z.status().message().find("not a regular file"), std::string::npos) << z.status();
  const auto big = dir / "big.yaml";
  std::ofstream(big) << "# " << std::string(2 * 1024 * 1024, 'x') << "\n";
  auto b = load_config(big.string());
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("larger than"), std::string::npos) << b.status();
  std::filesystem::remove_all(dir);
}

TEST(RlsSchema, ErrorsNameLineAndColumnAndDuplicatesAreRefused) {
  RlsConfig c;
  const absl::Status s = parse_rls_file("domain: d\ndomain: e\n", "rules.yaml", c);
  EXPECT_EQ(s.message(), "rules.yaml:2:1: duplicate key \"domain\" (each key may appear once in a map)");
  RlsConfig two;
  EXPECT_NE(parse_rls_file("domain: d\n---\ndomain: e\n", "rules.yaml", two).message().find("second YAML document"),
            std::string::npos);
}

TEST(RlsSchema, RulesAreCheckedAgainstTheStorage) {
  RlsConfig c;
  c.source = "rules";
  // capacity × period / amount = 1000 years: past the 142 years any bucket drains in (every store).
  const absl::Status long_drain = parse_rls_file(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: year, requests_per_unit: 1, "
      "algorithm: token-bucket, burst: 1000}\n",
      "rules.yaml", c);
  EXPECT_NE(long_drain.message().find("at most 2^52 µs (about 142 years)"), std::string_view::npos) << long_drain;
  ASSERT_TRUE(parse_rls_file("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: year, requests_per_unit: 1, "
                             "algorithm: token-bucket, burst: 100}\n",
                             "rules.yaml", c)
                  .ok());
  EXPECT_TRUE(check_rules_storage(c, "memory").ok());
  EXPECT_TRUE(check_rules_storage(c, "redis://127.0.0.1:6379").ok());
  EXPECT_FALSE(check_rules_storage(c, "redis://127.0.0.1:6379?no_such_option=1").ok());
}

// A `burst:` that would fill several limits is refused where it is written, naming the policy once
// and showing the notation that says which limit it belongs to.
TEST(ConfigSchema, APolicyWideBurstOverSeveralLimitsIsRefusedAtTheBurstLine) {
  EXPECT_EQ(error_of("policies:\n  - name: api\n    strategy: gcra\n    limit: 10/second; 1000/hour\n    burst: 20\n"),
            "cfg.yaml:5:12: policy \"api\": burst 20 would be the capacity of each of the limits 10/second, "
            "1000/hour; write it beside the limit it belongs to, e.g. \"10/second burst 20; 1000/hour\"");
  EXPECT_EQ(error_of("policies:\n  - {name: api, strategy: gcra, limit: 10/second burst 20; 1000/hour}\n"), "<ok>");
  // The policy is named once, and a limit's own problem still points at `limit:`.
  EXPECT_EQ(error_of("policies:\n  - {name: api, limit: 10/fortnight}\n").find("policy \"api\": policy"),
            std::string::npos);
  EXPECT_NE(error_of("policies:\n  - name: api\n    limit: 10/fortnight\n").find("cfg.yaml:3:12: policy \"api\": "),
            std::string::npos);
}

TEST(ConfigSchema, CalendarLimitsPassThroughAndOtherStrategiesRefuseThem) {
  auto c = parse_config(
      "policies:\n  - name: tokens\n    strategy: fixed-window\n"
      "    limit: 10/second; 1000000 per calendar month in Europe/Berlin anchored 31\n"
      "    overrides: {vip: 5000000 per calendar month in Europe/Berlin anchored 31}\n",
      "cfg.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  const Policy& p = *c->policies.at(0).policy;
  ASSERT_EQ(p.limits().size(), 2u);
  EXPECT_EQ(to_string(p.limits()[1]), "1000000/calendar month in Europe/Berlin anchored 31");
  EXPECT_EQ(to_string(c->policies.at(0).for_key("vip").limits()[0]), "5000000/calendar month in Europe/Berlin anchored 31");
  EXPECT_NE(error_of("policies:\n  - name: t\n    strategy: gcra\n    limit: 5/calendar day in UTC\n")
                .find("cfg.yaml:4:12: policy \"t\": limit \"5/calendar day in UTC\": calendar periods apply to the "
                      "fixed window aligned to the clock only"),
            std::string::npos)
      << error_of("policies:\n  - name: t\n    strategy: gcra\n    limit: 5/calendar day in UTC\n");
  EXPECT_NE(error_of("policies:\n  - name: t\n    strategy: fixed-window\n    limit: 5/calendar day in Europe/Nowhere\n")
                .find("cfg.yaml:4:12: policy \"t\": invalid limit \"5/calendar day in Europe/Nowhere\": unknown time zone"),
            std::string::npos)
      << error_of("policies:\n  - name: t\n    strategy: fixed-window\n    limit: 5/calendar day in Europe/Nowhere\n");
}

TEST(ConfigSchema, BudgetSlicesAreReadAndRefusedWhereTheyCannotKeepTheAlgorithm) {
  auto c = parse_config(
      "policies:\n  - name: hot\n    strategy: fixed-window\n    limit: 100000/second\n"
      "    budget_slice: {max_slice: 500, interval_ms: 50, share: 8}\n",
      "cfg.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->warnings.empty());
  const BudgetOptions& l = c->policies.at(0).policy->options().budget;
  EXPECT_EQ(l.max_slice, 500);
  EXPECT_EQ(l.interval, 50'000);
  EXPECT_EQ(l.share, 8);
  const std::string moving =
      error_of("policies:\n  - name: t\n    strategy: moving-window\n    limit: 5/second\n    budget_slice: {max_slice: 5}\n");
  EXPECT_NE(moving.find("cfg.yaml:5:19: policy \"t\": budget slices (budget_slice) apply to fixed-window (anchor clock), "
                        "sliding-window-counter, token-bucket and gcra, not moving-window"),
            std::string::npos)
      << moving;
  EXPECT_NE(error_of("policies:\n  - name: t\n    limit: 5/second\n    budget_slice: {interval_ms: 5}\n")
                .find("budget_slice needs max_slice"),
            std::string::npos);
  EXPECT_NE(error_of("policies:\n  - name: t\n    limit: 5/second\n    budget_slice: {max_slice: 0}\n")
                .find("budget_slice max_slice"),
            std::string::npos);
  EXPECT_NE(error_of("policies:\n  - name: t\n    limit: 5/second\n    budget_slice: {max_slice: 5, slice: 1}\n")
                .find("slice"),
            std::string::npos);
}

// budget_lease, the old spelling of budget_slice, is read the same for one release, with one
// warning naming where it is; giving both is refused; its errors name the spelling given.
TEST(ConfigSchema, BudgetLeaseIsTheOldSpellingOfBudgetSliceAndWarns) {
  auto c = parse_config(
      "policies:\n  - name: hot\n    strategy: fixed-window\n    limit: 100000/second\n"
      "    budget_lease: {max_slice: 500, interval_ms: 50, share: 8}\n"
      "  - name: new\n    limit: 10/second\n    budget_slice: {max_slice: 5}\n",
      "cfg.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  const BudgetOptions& l = c->policies.at(0).policy->options().budget;
  EXPECT_EQ(l.max_slice, 500);
  EXPECT_EQ(l.interval, 50'000);
  EXPECT_EQ(l.share, 8);
  EXPECT_EQ(c->policies.at(1).policy->options().budget.max_slice, 5);
  ASSERT_EQ(c->warnings.size(), 1u);
  EXPECT_EQ(c->warnings[0],
            "cfg.yaml:5:19: policy \"hot\": budget_lease is deprecated, write budget_slice (the old spelling is "
            "accepted until the next release)");
  EXPECT_NE(error_of("policies:\n  - name: t\n    limit: 5/second\n    budget_slice: {max_slice: 5}\n"
                     "    budget_lease: {max_slice: 5}\n")
                .find("cfg.yaml:5:19: policy \"t\": budget_lease is the old spelling of budget_slice"),
            std::string::npos);
  EXPECT_NE(error_of("policies:\n  - name: t\n    limit: 5/second\n    budget_lease: {interval_ms: 5}\n")
                .find("budget_lease needs max_slice"),
            std::string::npos);
  const std::string moving =
      error_of("policies:\n  - name: t\n    strategy: moving-window\n    limit: 5/second\n    budget_lease: {max_slice: 5}\n");
  EXPECT_NE(moving.find("cfg.yaml:5:19: policy \"t\": budget slices (budget_slice) apply to"), std::string::npos) << moving;
}

TEST(ConfigSchema, AKeySourceWithoutANameSaysSo) {
  EXPECT_EQ(error_of("policies:\n  - name: a\n    limit: 1/second\n    key: {header: }\n"),
            "cfg.yaml:4:10: policy \"a\": key header needs a name, e.g. {header: X-Api-Key}");
  EXPECT_NE(error_of("policies:\n  - name: a\n    limit: 1/second\n    key: {query: \"\"}\n").find("key query needs a name"),
            std::string::npos);
}

TEST(ConfigSchema, LogFormatIsTextOrJson) {
  EXPECT_EQ(error_of("log_format: json\n"), "<ok>");
  EXPECT_EQ(error_of("log_format: xml\n"), "cfg.yaml:1:13: log_format must be text or json");
}

}  // namespace
}  // namespace floodgate::server
