// The access-log readers of `floodgate simulate`: each format's lines, the key choice, times, bad
// lines counted and quoted, gzip'd files.
#include "floodgate/sim/access_log.hpp"

#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace floodgate {
namespace {

constexpr Micros kS = kMicrosPerSecond;
// 2000-10-10T20:55:36Z, the time of the nginx example lines below.
constexpr Micros kOct10 = Micros{971211336} * kS;

std::unique_ptr<LineParser> parser(LogFormat f, std::string key = "auto", std::string layout = "",
                                   std::string header = "") {
  LogReaderOptions o;
  o.key = *KeySpec::parse(key);
  o.layout = std::move(layout);
  auto p = LineParser::make(f, o, header);
  EXPECT_TRUE(p.ok()) << p.status();
  return *std::move(p);
}

std::string scratch(const std::string& name) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / ("floodgate-log-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

TEST(LogTime, EveryNotation) {
  EXPECT_EQ(parse_log_time("10/Oct/2000:13:55:36 -0700"), kOct10);
  EXPECT_EQ(parse_log_time("[10/Oct/2000:22:55:36 +0200]"), kOct10);
  EXPECT_EQ(parse_log_time("2000-10-10T20:55:36Z"), kOct10);
  EXPECT_EQ(parse_log_time("2000-10-10T20:55:36.250Z"), kOct10 + 250'000);
  EXPECT_EQ(parse_log_time("2000-10-10 22:55:36+02:00"), kOct10);
  EXPECT_EQ(parse_log_time("971211336.5"), kOct10 + 500'000);
  EXPECT_EQ(parse_log_time("971211336500"), kOct10 + 500'000);  // milliseconds
  EXPECT_EQ(parse_log_time("2024-02-29T00:00:00Z"), Micros{1709164800} * kS);  // a leap day
  for (auto bad : {"", "yesterday", "10/Foo/2000:13:55:36 -0700", "2000-13-10T20:55:36Z",
                   "2000-10-10T20:55:36 +99", "-5", "1e300"}) {
    EXPECT_FALSE(parse_log_time(bad).has_value()) << bad;
  }
}

TEST(KeySpec, PartsPrefixesAndErrors) {
  auto k = KeySpec::parse("ip/64 + $http_x_api_key");
  ASSERT_TRUE(k.ok()) << k.status();
  ASSERT_EQ(k->parts.size(), 2u);
  EXPECT_EQ(k->parts[0].field, "ip");
  EXPECT_EQ(k->parts[0].prefix_bits, 64);
  EXPECT_EQ(k->parts[1].field, "header:x-api-key");
  EXPECT_EQ(canonical_field("%REQ(X-Api-Key)%"), "header:x-api-key");
  EXPECT_EQ(canonical_field("$remote_addr"), "remote_addr");
  EXPECT_TRUE(KeySpec::parse("auto")->parts.empty());
  EXPECT_FALSE(KeySpec::parse("ip/129").ok());
  EXPECT_FALSE(KeySpec::parse("ip/x").ok());
  EXPECT_FALSE(KeySpec::parse("ip+").ok());
}

TEST(KeySpec, AddressesAndPrefixes) {
  EXPECT_EQ(client_address("2001:db8:1:2:3:4:5:6", 64), "2001:db8:1:2::/64");
  EXPECT_EQ(client_address("[2001:db8:1:2::9]:443", 64), "2001:db8:1:2::/64");
  EXPECT_EQ(client_address("203.0.113.9", 64), "203.0.113.9");  // IPv4 is kept whole by /64
  EXPECT_EQ(client_address("203.0.113.9", 24), "203.0.113.0/24");
  EXPECT_EQ(client_address("203.0.113.9:5555", -1), "203.0.113.9");
  // Found by log_line_fuzz: an empty first item of a list gave an empty key.
  EXPECT_EQ(client_address(",203.0.113.9", -1), "-");
  EXPECT_EQ(client_address("  ", 64), "-");
  EXPECT_EQ(client_address("198.51.100.1, 10.0.0.1", -1), "198.51.100.1");  // X-Forwarded-For
  EXPECT_EQ(client_address("not-an-address", 64), "not-an-address");
}

TEST(Combined, ALineTheKeyAndExtraFields) {
  const std::string line = R"(203.0.113.9 - frank [10/Oct/2000:13:55:36 -0700] "GET /a HTTP/1.1" 200 2326 "-" "curl/8" "key-1")";
  auto r = parser(LogFormat::kCombined)->parse(line);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->time, kOct10);
  EXPECT_EQ(r->key, "203.0.113.9");
  EXPECT_EQ(r->cost, 1);
  // A log_format with the API key logged after combined's fields.
  const std::string layout = std::string(kCombinedLogFormat) + R"( "$http_x_api_key")";
  auto k = parser(LogFormat::kCombined, "$http_x_api_key", layout)->parse(line);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->key, "key-1");
  auto joined = parser(LogFormat::kCombined, "ip/24+$http_user_agent")->parse(line);
  ASSERT_TRUE(joined.ok());
  EXPECT_EQ(joined->key, "203.0.113.0/24|curl/8");
  // A header that is not in the layout (or logged as "-"): the key "-", not an error.
  auto missing = parser(LogFormat::kCombined, "$http_x_api_key")->parse(line);
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->key, "-");
}

TEST(Combined, MalformedLinesSayWhy) {
  auto p = parser(LogFormat::kCombined);
  for (auto bad : {"", "garbage", R"(1.2.3.4 - - [yesterday] "GET / HTTP/1.1" 200 1 "-" "-")",
                   R"(1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1)"}) {
    EXPECT_FALSE(p->parse(bad).ok()) << bad;
  }
  auto bad_time = p->parse(R"(1.2.3.4 - - [yesterday] "GET / HTTP/1.1" 200 1 "-" "-")");
  EXPECT_NE(bad_time.status().message().find("bad time \"yesterday\""), std::string::npos) << bad_time.status();
}

TEST(Envoy, DefaultTextAndJson) {
  const std::string line =
      R"([2000-10-10T20:55:36.250Z] "GET /api HTTP/1.1" 200 - 0 12 3 2 "198.51.100.7, 10.0.0.2" "curl/8" "id-1" "example.com" "10.0.0.9:80")";
  auto r = parser(LogFormat::kEnvoy)->parse(line);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->time, kOct10 + 250'000);
  EXPECT_EQ(r->key, "198.51.100.7");  // the first X-Forwarded-For address
  auto by_host = parser(LogFormat::kEnvoy, "%REQ(:AUTHORITY)%")->parse(line);
  ASSERT_TRUE(by_host.ok());
  EXPECT_EQ(by_host->key, "example.com");
  auto custom = parser(LogFormat::kEnvoy, "$http_x_api_key", "%START_TIME% %REQ(X-API-KEY)% %DOWNSTREAM_REMOTE_ADDRESS%")
                    ->parse("2000-10-10T20:55:36Z k-9 [2001:db8::1]:5000");
  ASSERT_TRUE(custom.ok()) << custom.status();
  EXPECT_EQ(custom->key, "k-9");
  auto json = parser(LogFormat::kJsonl, "ip/64")->parse(
      R"({"start_time":"2000-10-10T20:55:36Z","downstream_remote_address":"[2001:db8:0:7::1]:5000","path":"/"})");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->key, "2001:db8:0:7::/64");
}

TEST(Jsonl, TheReplayTraceAndErrors) {
  auto p = parser(LogFormat::kJsonl);
  auto r = p->parse(R"({"t": 100.5, "key": "x", "cost": 2})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->time, 100'500'000);
  EXPECT_EQ(r->key, "x");
  EXPECT_EQ(r->cost, 2);
  EXPECT_FALSE(p->parse(R"({"t": 1, "key": "x", "cost": -1})").ok());
  EXPECT_FALSE(p->parse(R"({"key": "x"})").ok());  // no time
  EXPECT_FALSE(p->parse(R"({"t": 1})").ok());      // no key, no address
  EXPECT_FALSE(p->parse("[1, 2]").ok());
  EXPECT_FALSE(p->parse(R"({"t": 1, "key": ")" + std::string(2000, 'k') + "\"}").ok());  // keys ≤ 1024 bytes
  auto broken = p->parse(R"({"t": 1, "key")");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("not valid JSON"), std::string::npos);
}

TEST(Csv, HeaderQuotesAndColumnCount) {
  auto p = parser(LogFormat::kCsv, "user", "", "timestamp,Client IP,user,path");
  auto r = p->parse(R"(2000-10-10T20:55:36Z,203.0.113.9,"smith, j ""jo""",/a)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->key, R"(smith, j "jo")");
  EXPECT_EQ(r->time, kOct10);
  auto ip = parser(LogFormat::kCsv, "auto", "", "timestamp,client_ip,path")->parse("971211336,203.0.113.9,/");
  ASSERT_TRUE(ip.ok()) << ip.status();
  EXPECT_EQ(ip->key, "203.0.113.9");
  EXPECT_FALSE(p->parse("2000-10-10T20:55:36Z,1.2.3.4,u").ok());        // 3 fields, header has 4
  EXPECT_FALSE(p->parse(R"(2000-10-10T20:55:36Z,1.2.3.4,"u,/a)").ok());  // an unclosed quote
}

TEST(Detect, FromTheFirstLine) {
  EXPECT_EQ(detect_log_format(R"({"t": 1, "key": "a"})"), LogFormat::kJsonl);
  EXPECT_EQ(detect_log_format(R"(::1 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" 200 1 "-" "x")"), LogFormat::kCombined);
  EXPECT_EQ(detect_log_format(R"([2000-10-10T20:55:36.250Z] "GET / HTTP/1.1" 200 - 0 1 1 - "-" "-" "-" "h" "-")"), LogFormat::kEnvoy);
  EXPECT_EQ(detect_log_format("time,ip"), LogFormat::kCsv);
  EXPECT_EQ(detect_log_format("hello world"), LogFormat::kAuto);
}

// A file with a bad line in the middle, read gzip'd: the good lines come through in order, the bad
// one is counted and quoted with its line number, and an out-of-order time is taken as the latest.
TEST(LogReader, GzipBadLinesAndReordering) {
  const std::string path = scratch("access.log.gz");
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  const std::string lines =
      "1.1.1.1 - - [10/Oct/2000:13:55:36 -0700] \"GET / HTTP/1.1\" 200 1 \"-\" \"-\"\n"
      "\n"
      "this is not a log line\n"
      "2.2.2.2 - - [10/Oct/2000:13:55:38 -0700] \"GET / HTTP/1.1\" 200 1 \"-\" \"-\"\n"
      "3.3.3.3 - - [10/Oct/2000:13:55:37 -0700] \"GET / HTTP/1.1\" 200 1 \"-\" \"-\"";
  gzwrite(f, lines.data(), static_cast<unsigned>(lines.size()));
  gzclose(f);
  auto reader = LogReader::open(path, {});
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->format(), LogFormat::kCombined);
  std::vector<LogRecord> got;
  while (auto r = (*reader)->next()) got.push_back(*r);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].key, "1.1.1.1");
  EXPECT_EQ(got[2].key, "3.3.3.3");
  EXPECT_EQ(got[2].time, kOct10 + 2 * kS);  // logged before 2.2.2.2's: taken at the latest time
  const LogStats& st = (*reader)->stats();
  EXPECT_EQ(st.lines, 4);
  EXPECT_EQ(st.records, 3);
  EXPECT_EQ(st.bad, 1);
  EXPECT_EQ(st.reordered, 1);
  ASSERT_EQ(st.examples.size(), 1u);
  EXPECT_NE(st.examples[0].find("line 3:"), std::string::npos) << st.examples[0];
  EXPECT_NE(st.examples[0].find("this is not a log line"), std::string::npos) << st.examples[0];
}

TEST(LogReader, LongLinesMissingFilesAndUnknownFormats) {
  const std::string path = scratch("long.jsonl");
  std::ofstream(path) << R"({"t": 1, "key": "a"})" << "\n{" << std::string(100'000, ' ') << "\n"
                      << R"({"t": 2, "key": "b"})";
  auto reader = LogReader::open(path, {});
  ASSERT_TRUE(reader.ok()) << reader.status();
  int n = 0;
  while ((*reader)->next()) ++n;
  EXPECT_EQ(n, 2);
  EXPECT_EQ((*reader)->stats().bad, 1);
  EXPECT_NE((*reader)->stats().examples.at(0).find("longer than 65536 bytes"), std::string::npos);
  EXPECT_FALSE(LogReader::open(scratch("missing.log"), {}).ok());
  const std::string odd = scratch("odd.log");
  std::ofstream(odd) << "hello world\n";
  auto unknown = LogReader::open(odd, {});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("cannot tell the log format"), std::string::npos);
}

TEST(LogDuration, UnitsAndSuffixes) {
  EXPECT_EQ(parse_log_duration("0.350", kS), 350'000);       // nginx's $request_time
  EXPECT_EQ(parse_log_duration("350", 1000), 350'000);       // Envoy's %DURATION%
  EXPECT_EQ(parse_log_duration("1.5s", 1000), 1'500'000);    // a unit of its own wins
  EXPECT_EQ(parse_log_duration("250ms", kS), 250'000);
  EXPECT_EQ(parse_log_duration("2m", kS), 120 * kS);
  EXPECT_EQ(parse_log_duration("0", kS), 0);
  EXPECT_EQ(parse_log_duration("23h", kS), 23 * 3600 * kS);
  for (auto bad : {"", "-", "soon", "-1", "1.5 parsecs", "24h", "nan", "1e300"}) {
    EXPECT_FALSE(parse_log_duration(bad, kS).has_value()) << bad;
  }
  EXPECT_EQ(default_duration_unit("request_time"), kS);
  EXPECT_EQ(default_duration_unit("duration"), 1000);
  EXPECT_EQ(default_duration_unit("latency_ms"), 1000);
  EXPECT_EQ(default_duration_unit("took_us"), 1);
}

std::unique_ptr<LineParser> cost_parser(LogFormat f, std::string cost_field, std::string duration_field,
                                        bool require_duration = false, std::string layout = "",
                                        std::string header = "") {
  LogReaderOptions o;
  o.cost_field = canonical_field(cost_field);
  o.require_cost = true;
  o.duration_field = duration_field == "auto" ? duration_field : canonical_field(duration_field);
  o.require_duration = require_duration;
  o.layout = std::move(layout);
  auto p = LineParser::make(f, o, header);
  EXPECT_TRUE(p.ok()) << p.status();
  return *std::move(p);
}

TEST(CostAndDuration, JsonFieldsAndTheirUnits) {
  auto p = cost_parser(LogFormat::kJsonl, "total_tokens", "auto");
  auto r = p->parse(R"({"t": 1, "key": "a", "total_tokens": 130, "duration_ms": 2500})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->cost, 130);
  EXPECT_EQ(r->duration, 2500 * 1000);
  r = p->parse(R"({"t": 1, "key": "a", "total_tokens": 7, "request_time": 0.35})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->duration, 350'000);
  r = p->parse(R"({"t": 1, "key": "a", "total_tokens": 7, "duration": 350})");  // Envoy: ms
  EXPECT_EQ(r->duration, 350'000);
  r = p->parse(R"({"t": 1, "key": "a", "total_tokens": 7, "duration_ms": "1.5s"})");
  EXPECT_EQ(r->duration, 1'500'000);
  r = p->parse(R"({"t": 1, "key": "a", "total_tokens": 7, "request_time": "-"})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->duration.has_value());

  // Errors name the field and quote the value.
  auto bad = p->parse(R"({"t": 1, "key": "a", "total_tokens": 7, "duration_ms": "soon"})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "bad duration \"soon\" in field duration_ms (a number of milliseconds, or with a unit: 350ms, 1.5s; "
            "at most 23 hours)");
  bad = p->parse(R"({"t": 1, "key": "a", "total_tokens": "12.5"})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "bad cost \"12.5\" in field total_tokens (a whole number from 0 to 2^53)");
  bad = p->parse(R"({"t": 1, "key": "a", "cost": 5})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "no cost field \"total_tokens\" (choose one with --cost-field)");

  auto strict = cost_parser(LogFormat::kJsonl, "cost", "auto", true);
  bad = strict->parse(R"({"t": 1, "key": "a", "cost": 5})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("no duration (no field request_time, upstream_response_time"),
            std::string_view::npos) << bad.status();
  auto named = cost_parser(LogFormat::kJsonl, "cost", "took", true);
  bad = named->parse(R"({"t": 1, "key": "a", "cost": 5, "took": "-"})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("no duration field \"took\""), std::string_view::npos) << bad.status();
  auto took = named->parse(R"({"t": 1, "key": "a", "cost": 5, "took": 2})");  // seconds by default
  ASSERT_TRUE(took.ok()) << took.status();
  EXPECT_EQ(took->duration, 2 * kS);
}

TEST(CostAndDuration, NginxLayoutAndCsvColumns) {
  auto nginx = cost_parser(LogFormat::kCombined, "$upstream_http_x_total_tokens", "$request_time", true,
                           R"($remote_addr [$time_local] "$request" $status $request_time $upstream_http_x_total_tokens)");
  auto r = nginx->parse(R"(10.0.0.1 [10/Oct/2000:13:55:36 -0700] "POST /v1/chat HTTP/1.1" 200 2.750 412)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->cost, 412);
  EXPECT_EQ(r->duration, 2'750'000);
  auto csv = cost_parser(LogFormat::kCsv, "Tokens", "Latency (ms)", true, "", "time,key,Tokens,Latency (ms)");
  // A CSV column named with spaces; its unit is seconds unless told (it does not end in _ms).
  r = csv->parse("2000-10-10T20:55:36Z,u1,99,0.5");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->cost, 99);
  EXPECT_EQ(r->duration, 500'000);
  auto bad = csv->parse("2000-10-10T20:55:36Z,u1,lots,0.5");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "bad cost \"lots\" in field tokens (a whole number from 0 to 2^53)");
}

TEST(LogReader, StrictStopsAtTheFirstBadLineAndNamesIt) {
  const std::string path = scratch("tokens.jsonl");
  std::ofstream(path) << R"({"t": 1, "key": "a", "tokens": 10, "duration_ms": 100})" << "\n"
                      << R"({"t": 2, "key": "a", "tokens": 20, "duration_ms": 100})" << "\n"
                      << R"({"t": 3, "key": "a", "tokens": -4, "duration_ms": 100})" << "\n"
                      << R"({"t": 4, "key": "a", "tokens": 40, "duration_ms": 100})" << "\n";
  LogReaderOptions o;
  o.cost_field = "tokens";
  o.require_cost = true;
  o.duration_field = "auto";
  o.strict = true;
  auto reader = LogReader::open(path, o);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<LogRecord> got;
  while (auto r = (*reader)->next()) got.push_back(*r);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].cost, 20);
  EXPECT_EQ(got[1].duration, 100'000);
  EXPECT_FALSE((*reader)->next().has_value());
  const absl::Status s = (*reader)->status();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), path + ": line 3: bad cost \"-4\" in field tokens (a whole number from 0 to 2^53): " +
                             R"({"t": 3, "key": "a", "tokens": -4, "duration_ms": 100})");
}

}  // namespace
}  // namespace floodgate
