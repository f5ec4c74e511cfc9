// `floodgate simulate` through the real binary: the summary table's numbers for known traces, the
// chart is well-formed XML (xmllint) with one mark per request, and bad input is named.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace {

namespace fs = std::filesystem;

struct CliRun {
  int exit_code;
  std::string output;  // stdout and stderr
};

CliRun run(const std::string& args) {
  const std::string cmd = std::string(FLOODGATE_BINARY) + " simulate " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = pclose(pipe);
  return {WEXITSTATUS(status), out};
}

std::string scratch(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("floodgate-simulate-" + std::to_string(getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

struct Row {
  long allowed, blocked, max_in_period, worst_burst, keys_blocked;
};

// strategy → its row of the summary table ("name allowed blocked max burst").
std::map<std::string, Row> table(const std::string& output) {
  std::map<std::string, Row> rows;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string name, rest;
    Row r{};
    if (fields >> name >> r.allowed >> r.blocked >> r.max_in_period >> r.worst_burst >> r.keys_blocked &&
        !(fields >> rest) &&
        name.find_first_not_of("abcdefghijklmnopqrstuvwxyz-") == std::string::npos) {
      rows[name] = r;
    }
  }
  return rows;
}

// The first number of `output` followed by " requests over".
long requests(const std::string& output) {
  const std::size_t at = output.find(" requests over");
  if (at == std::string::npos) return -1;
  std::size_t begin = at;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(output[begin - 1]))) --begin;
  return std::stol(output.substr(begin, at - begin));
}

std::size_t occurrences(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool xml_well_formed(const std::string& path) {
  if (std::system("command -v xmllint >/dev/null 2>&1") != 0) {
    ADD_FAILURE() << "xmllint is missing (libxml2-utils; scripts/deps.sh --test installs it)";
    return false;
  }
  return std::system(("xmllint --noout '" + path + "'").c_str()) == 0;
}

// Three requests at 9 s and four at 10 s against 3 per 10 s (times in a replay trace are seconds
// since the epoch; simulate makes them relative to the first, so the windows are [9, 19) for the
// first-hit window but [0, 10), [10, 20) for the clock-aligned one).
TEST(SimulateCli, TableOfAKnownTraceAndAValidSvg) {
  const std::string trace = scratch("edge.jsonl");
  std::ofstream(trace) << "{\"t\": 9, \"key\": \"a\"}\n{\"t\": 9, \"key\": \"a\"}\n{\"t\": 9, \"key\": \"a\"}\n"
                          "{\"t\": 10, \"key\": \"a\"}\n{\"t\": 10, \"key\": \"a\"}\n"
                          "{\"t\": 10, \"key\": \"a\"}\n{\"t\": 10, \"key\": \"a\"}\n";
  // Relative to the first request the edge is at 1 s: shift the trace so that it stays at 10 s.
  const std::string shifted = scratch("edge-shifted.jsonl");
  std::ofstream(shifted) << "{\"t\": 0, \"key\": \"z\", \"cost\": 0}\n" << read(trace);
  const std::string svg = scratch("edge.svg");
  const CliRun r = run("--limit '3 per 10 seconds' --traffic " + shifted + " --out " + svg);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("8 requests over 10.0 s"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("max in 10.0s"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("worst burst (3.333334s)"), std::string::npos) << r.output;
  const auto rows = table(r.output);
  ASSERT_EQ(rows.size(), 7u) << r.output;
  // The cost-0 request is allowed by every strategy and counts as allowed, not in the bursts.
  EXPECT_EQ(rows.at("fixed-window").allowed, 1 + 6);
  EXPECT_EQ(rows.at("fixed-window").blocked, 1);
  EXPECT_EQ(rows.at("fixed-window").max_in_period, 6);  // 2 × the limit across the edge
  EXPECT_EQ(rows.at("fixed-window").worst_burst, 6);
  for (auto name : {"fixed-window-first-hit", "moving-window", "sliding-window-counter",
                    "token-bucket", "leaky-bucket", "gcra"}) {
    EXPECT_EQ(rows.at(name).allowed, 1 + 3) << name;
    EXPECT_EQ(rows.at(name).blocked, 4) << name;
    EXPECT_EQ(rows.at(name).max_in_period, 3) << name;
    EXPECT_EQ(rows.at(name).worst_burst, 3) << name;
  }
  EXPECT_NE(r.output.find("wrote " + svg), std::string::npos);
  EXPECT_TRUE(xml_well_formed(svg));
  const std::string chart = read(svg);
  EXPECT_EQ(occurrences(chart, "class=\"lane\""), 7u);
  EXPECT_EQ(occurrences(chart, "a3 3 0 1 0 6 0"), 7u + 6 * 4);  // one circle per admitted request
  EXPECT_EQ(occurrences(chart, "l6 6m0 -6l-6 6"), 1u + 6 * 4);  // one cross per blocked request
}

TEST(SimulateCli, PoissonWithABurstAsHtml) {
  const std::string html = scratch("chart.html");
  const CliRun r = run("--limit 10/minute --burst 10 --strategies gcra,fixed-window --seed 42 "
                    "--traffic 'poisson:rate=1/s,duration=120s+burst:n=20,at=60s' --out " + html);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = table(r.output);
  ASSERT_EQ(rows.size(), 2u) << r.output;
  const long total = requests(r.output);
  ASSERT_GT(total, 0) << r.output;
  for (const auto& [name, row] : rows) {
    EXPECT_EQ(row.allowed + row.blocked, total) << name;
    // 10/minute over 120 s admits at most 2 windows' worth plus the bucket's burst.
    EXPECT_LE(row.allowed, 30) << name;
    EXPECT_GE(row.allowed, 10) << name;
  }
  EXPECT_LE(rows.at("gcra").max_in_period, 20);   // burst 10 + 10 refilled within a minute
  EXPECT_LE(rows.at("fixed-window").max_in_period, 20);
  // The same seed gives the same table.
  const CliRun again = run("--limit 10/minute --burst 10 --strategies gcra,fixed-window --seed 42 "
                        "--traffic 'poisson:rate=1/s,duration=120s+burst:n=20,at=60s'");
  EXPECT_EQ(table(again.output).at("gcra").allowed, rows.at("gcra").allowed);
  const std::string page = read(html);
  EXPECT_EQ(page.rfind("<!doctype html>", 0), 0u);
  EXPECT_NE(page.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  const std::string svg_only = scratch("from-html.svg");
  std::ofstream(svg_only) << page.substr(page.find("<svg"), page.find("</svg>") + 6 - page.find("<svg"));
  EXPECT_TRUE(xml_well_formed(svg_only));
}

TEST(SimulateCli, BadInputIsNamed) {
  CliRun r = run("--limit 3/minute --traffic 'poisson:rate=fast,duration=60s'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("bad rate \"fast\""), std::string::npos) << r.output;
  r = run("--limit 3/fortnight --traffic 'burst:n=3,at=0s'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("\"fortnight\""), std::string::npos) << r.output;
  r = run("--limit 3/minute --strategies gcra,lottery --traffic 'burst:n=3,at=0s'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("unknown strategy \"lottery\""), std::string::npos) << r.output;
  r = run("--limit 3/minute --traffic 'burst:n=3,at=0s'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(burst:n=3,at=0s), 1 key\n"), std::string::npos) << r.output;
  r = run("--limit 3/minute --traffic 'poison:rate=1/second,duration=10s'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("unknown kind \"poison\""), std::string::npos) << r.output;
  r = run("--limit 3/minute --traffic 'burst:n=3,at=0s' --out chart.png");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("must end in .svg or .html"), std::string::npos) << r.output;
  const std::string bad = scratch("bad.jsonl");
  std::ofstream(bad) << "{\"t\": 1, \"key\": \"a\"}\n{\"t\": 2, \"key\n";
  r = run("--limit 3/minute --traffic " + bad);
  EXPECT_EQ(r.exit_code, 0) << r.output;  // a bad line is counted and quoted, not fatal
  EXPECT_NE(r.output.find("1 line skipped"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("line 2: not valid JSON"), std::string::npos) << r.output;
  const std::string all_bad = scratch("all-bad.jsonl");
  std::ofstream(all_bad) << "{\"t\": 1}\n{\"t\": 2}\n";
  r = run("--limit 3/minute --traffic " + all_bad);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("no request could be read"), std::string::npos) << r.output;
}

// A key field no line has would put every request under "-": refused, naming the log's fields. A
// focus key no request has is a warning.
TEST(SimulateCli, AKeyFieldNoLineHasIsRefusedAndAnUnknownFocusWarned) {
  const std::string log = scratch("keys.jsonl");
  std::ofstream(log) << "{\"t\": 1, \"ip\": \"10.0.0.1\", \"user\": \"a\"}\n"
                     << "{\"t\": 2, \"ip\": \"10.0.0.2\", \"user\": \"b\"}\n"
                     << "{\"t\": 3, \"ip\": \"10.0.0.2\"}\n";
  CliRun r = run("--limit 3/minute --traffic " + log + " --key ipp");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--key ipp: no request of"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("fields: t, ip, user"), std::string::npos) << r.output;
  r = run("--limit 3/minute --traffic " + log + " --key user");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("warning: --key user: 1 of 3 requests lack a field"), std::string::npos) << r.output;
  r = run("--limit 3/minute --traffic " + log + " --key user --focus nobody");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("warning: --focus \"nobody\": no request has this key"), std::string::npos) << r.output;
}

// strategy → its two rows of a --charge table: [0] charged after, [1] reserved+settled, each
// {admitted, denied, used, max in period, over (max), over (total)}.
std::map<std::string, std::array<std::array<long, 6>, 2>> charge_table(const std::string& output) {
  std::map<std::string, std::array<std::array<long, 6>, 2>> rows;
  std::istringstream in(output);
  for (std::string text; std::getline(in, text);) {
    std::istringstream fields(text);
    std::vector<std::string> w;
    for (std::string f; fields >> f;) w.push_back(f);
    std::size_t numbers = 0;
    int mode = -1;
    if (w.size() == 9 && w[1] == "charged" && w[2] == "after") {
      mode = 0;
      numbers = 3;
    } else if (w.size() == 8 && w[1] == "reserved+settled") {
      mode = 1;
      numbers = 2;
    }
    if (mode < 0) continue;
    std::array<long, 6> row{};
    bool ok = true;
    for (std::size_t i = 0; i < 6; ++i) {
      ok = ok && w[numbers + i].find_first_not_of("0123456789") == std::string::npos;
      if (ok) row[i] = std::stol(w[numbers + i]);
    }
    if (ok) rows[w[0]][static_cast<std::size_t>(mode)] = row;
  }
  return rows;
}

std::string example(const std::string& name) {
  return (fs::path(FLOODGATE_CONFORMANCE_DIR).parent_path().parent_path() / "examples" / "llm" / name).string();
}

// Five concurrent requests against 100 tokens per minute (58, 80, 175, 175, 175 tokens, as in the
// report of LiteLLM's TPM limit overshoot): charged after, all pass and 663 tokens are used;
// reserved at 100, one is admitted.
TEST(SimulateCli, ChargeOnConcurrentRequests) {
  const std::string svg = scratch("charge.svg");
  const CliRun r = run("--charge --traffic " + example("concurrent-burst.jsonl") +
                       " --cost-field total_tokens --estimate 100 --limit 100/minute --out " + svg);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("5 requests over 5.22 s"), std::string::npos) << r.output;
  const auto rows = charge_table(r.output);
  ASSERT_EQ(rows.size(), 7u) << r.output;
  for (const auto& [lane, modes] : rows) {
    EXPECT_EQ(modes[0], (std::array<long, 6>{5, 0, 663, 663, 563, 563})) << lane;
    EXPECT_EQ(modes[1], (std::array<long, 6>{1, 4, 58, 58, 0, 0})) << lane;
  }
  EXPECT_TRUE(xml_well_formed(svg));
  const std::string chart = read(svg);
  EXPECT_EQ(occurrences(chart, "class=\"charge-row\""), 7u);
  EXPECT_EQ(occurrences(chart, "<title>663</title>"), 7u);
  EXPECT_EQ(occurrences(chart, "<title>58</title>"), 7u);

  const std::string html = scratch("charge.html");
  const CliRun page = run("--charge --traffic " + example("concurrent-burst.jsonl") +
                          " --cost-field total_tokens --estimate 130 --limit 100/minute -s fixed-window --out " + html);
  ASSERT_EQ(page.exit_code, 0) << page.output;
  const auto one = charge_table(page.output);
  // An estimate of 130 is more than the limit: no reservation ever fits.
  EXPECT_EQ(one.at("fixed-window")[1], (std::array<long, 6>{0, 5, 0, 0, 0, 0}));
  const std::string text = read(html);
  EXPECT_NE(text.find("<pre class=\"table\">"), std::string::npos);
  EXPECT_NE(text.find("class=\"charge-chart\""), std::string::npos);
}

// Lines without a duration, a bad cost or duration, and options that make no sense are named.
TEST(SimulateCli, ChargeBadInputIsNamed) {
  const std::string log = scratch("tokens.jsonl");
  std::ofstream(log) << "{\"t\": 1, \"key\": \"a\", \"tokens\": 10, \"latency_ms\": 100}\n"
                     << "{\"t\": 2, \"key\": \"a\", \"tokens\": 20}\n";
  CliRun r = run("--charge --limit 100/minute --traffic " + log + " --cost-field tokens --estimate 10");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(log + ": line 2: no duration (no field request_time"), std::string::npos) << r.output;
  r = run("--charge --limit 100/minute --traffic " + log + " --cost-field tokens --estimate 10 --duration 2s");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(charge_table(r.output).size(), 7u) << r.output;
  r = run("--charge --limit 100/minute --traffic " + log + " --estimate 10 --duration 2s");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(": line 1: no cost field \"cost\" (choose one with --cost-field)"), std::string::npos)
      << r.output;

  const std::string bad = scratch("bad-tokens.csv");
  std::ofstream(bad) << "time,key,tokens,request_time\n"
                     << "2026-01-07T12:00:00Z,a,10,0.5\n"
                     << "2026-01-07T12:00:01Z,a,ten,0.5\n";
  r = run("--charge --limit 100/minute --traffic " + bad + " --cost-field tokens --estimate 10");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(bad + ": line 3: bad cost \"ten\" in field tokens"), std::string::npos) << r.output;
  std::ofstream(bad) << "time,key,tokens,request_time\n"
                     << "2026-01-07T12:00:00Z,a,10,0.5\n"
                     << "2026-01-07T12:00:01Z,a,10,later\n";
  r = run("--charge --limit 100/minute --traffic " + bad + " --cost-field tokens --estimate 10");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(bad + ": line 3: bad duration \"later\" in field request_time"), std::string::npos)
      << r.output;

  r = run("--charge --limit 100/minute --traffic " + log + " --cost-field tokens --duration 2s");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--charge needs --estimate"), std::string::npos) << r.output;
  r = run("--charge --limit 100/minute --traffic " + log + " --cost-field tokens --estimate lots");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--estimate \"lots\""), std::string::npos) << r.output;
  r = run("--charge --limit 100/minute --traffic " + log + " --cost-field tokens --estimate 1 --duration soon");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--duration \"soon\""), std::string::npos) << r.output;
  r = run("--charge --limit 100/minute --traffic " + log + " --cost-field tokens --estimate 1 --duration-unit hours");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--duration-unit \"hours\": give s, ms or us"), std::string::npos) << r.output;
  r = run("--charge --limit 100/minute --traffic " + log + " --cost-field tokens --estimate 1 --duration 1s "
          "--check-cost 5");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--check-cost 5"), std::string::npos) << r.output;
  r = run("--limit 100/minute --traffic " + log + " --estimate 10");  // an option of --charge alone
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--estimate requires --charge"), std::string::npos) << r.output;
  r = run("--charge --limit 100/minute --traffic burst:n=5,at=0 --estimate 1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--charge needs a log with a cost per request"), std::string::npos) << r.output;
}

}  // namespace

namespace {

// The row of the --concurrency table: admitted, denied, max held, limit, freed at ttl.
std::vector<long> concurrency_row(const std::string& output) {
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string name;
    std::vector<long> row(5);
    if (fields >> name && name == "concurrency" && fields >> row[0] >> row[1] >> row[2] >> row[3] >> row[4]) return row;
  }
  return {};
}

}  // namespace

// Each request of the log holds a lease from its start for its latency: two at 1 s lasting 3 s fill
// N = 2, the one at 2 s is denied, the one at 5 s comes after both ended.
TEST(SimulateCli, ConcurrencyLaneOfALog) {
  const std::string log = scratch("inflight.jsonl");
  std::ofstream(log) << "{\"t\": 1, \"key\": \"a\", \"latency_ms\": 3000}\n"
                     << "{\"t\": 1, \"key\": \"a\", \"latency_ms\": 3000}\n"
                     << "{\"t\": 2, \"key\": \"a\", \"latency_ms\": 100}\n"
                     << "{\"t\": 5, \"key\": \"a\", \"latency_ms\": 100}\n";
  const std::string svg = scratch("concurrency.svg");
  CliRun r = run("--concurrency 2 --traffic " + log + " --out " + svg);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(concurrency_row(r.output), (std::vector<long>{3, 1, 2, 2, 0})) << r.output;
  EXPECT_NE(r.output.find("concurrency 2 concurrent for 1 day"), std::string::npos) << r.output;
  EXPECT_TRUE(xml_well_formed(svg));
  const std::string chart = read(svg);
  EXPECT_EQ(occurrences(chart, "a3 3 0 1 0 6 0a3 3"), 3u);
  EXPECT_EQ(occurrences(chart, "l6 6m0 -6l-6 6"), 1u);
  EXPECT_NE(chart.find("limit 2</text>"), std::string::npos);

  // A lease of 2 s frees itself before the 3 s requests end: the request at 2 s is still denied
  // (both leases live until 3 s), the freed count says so.
  r = run("--concurrency 2 --lease-ttl 2s --traffic " + log);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(concurrency_row(r.output), (std::vector<long>{3, 1, 2, 2, 2})) << r.output;

  const std::string html = scratch("concurrency.html");
  r = run("--concurrency 5 --traffic burst:n=20,at=0 --duration 1s --out " + html);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(concurrency_row(r.output), (std::vector<long>{5, 15, 5, 5, 0})) << r.output;
  const std::string page = read(html);
  EXPECT_NE(page.find("<pre class=\"table\">"), std::string::npos);
  EXPECT_NE(page.find("class=\"concurrency-chart\""), std::string::npos);
}

TEST(SimulateCli, ConcurrencyBadInputIsNamed) {
  const std::string log = scratch("inflight-bad.jsonl");
  std::ofstream(log) << "{\"t\": 1, \"key\": \"a\", \"latency_ms\": 300}\n"
                     << "{\"t\": 2, \"key\": \"a\"}\n";
  CliRun r = run("--concurrency 2 --traffic " + log);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(log + ": line 2: no duration"), std::string::npos) << r.output;
  r = run("--concurrency 0 --traffic " + log + " --duration 1s");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--concurrency 0: give the most requests"), std::string::npos) << r.output;
  r = run("--concurrency 2 --traffic " + log + " --duration -5s");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--duration \"-5s\""), std::string::npos) << r.output;
  r = run("--concurrency 2 --traffic burst:n=5,at=0");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("needs --duration"), std::string::npos) << r.output;
  r = run("--concurrency 2 --lease-ttl never --traffic burst:n=5,at=0 --duration 1s");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--lease-ttl \"never\""), std::string::npos) << r.output;
  r = run("--concurrency 2 --limit 3/minute --traffic burst:n=5,at=0 --duration 1s");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--limit does not apply"), std::string::npos) << r.output;
  r = run("--limit 3/minute --lease-ttl 5s --traffic burst:n=5,at=0");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--lease-ttl needs --concurrency"), std::string::npos) << r.output;
  r = run("--limit 3/minute --duration 5s --traffic burst:n=5,at=0");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("need --charge or --concurrency"), std::string::npos) << r.output;
  r = run("--traffic burst:n=5,at=0");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--limit is required"), std::string::npos) << r.output;
}
