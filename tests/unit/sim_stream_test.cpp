// The streaming simulation: the same decisions as simulate(), counts per time bin that stay
// bounded, per-key figures, marks for small traces and a focus key, and the report.
#include "floodgate/sim/stream.hpp"

#include <gtest/gtest.h>

namespace floodgate {
namespace {

constexpr Micros kS = kMicrosPerSecond;

std::unique_ptr<StreamingSimulation> make(std::vector<std::string> limits, std::vector<std::string> lanes = {},
                                          std::size_t columns = 600, std::size_t max_marks = 20'000,
                                          std::string focus = "") {
  StreamOptions o;
  o.limits = std::move(limits);
  o.lanes = std::move(lanes);
  o.columns = columns;
  o.max_marks = max_marks;
  o.focus = std::move(focus);
  auto s = StreamingSimulation::make(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

std::size_t occurrences(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// A mixed trace: ten keys at one request a second, "hot" at 20 a second.
std::vector<TraceEvent> mixed(int seconds) {
  std::vector<TraceEvent> out;
  for (int s = 0; s < seconds; ++s) {
    for (int k = 0; k < 10; ++k) out.push_back({s * kS + k * 1000, "user-" + std::to_string(k), 1});
    for (int i = 0; i < 20; ++i) out.push_back({s * kS + 50'000 * i + 500, "hot", 1});
  }
  std::stable_sort(out.begin(), out.end(), [](const TraceEvent& a, const TraceEvent& b) { return a.t < b.t; });
  return out;
}

TEST(StreamingSimulation, AgreesWithSimulateRowByRow) {
  const auto trace = mixed(30);
  SimulateOptions so;
  so.limit = "5/second";
  auto whole = simulate(so, trace);
  ASSERT_TRUE(whole.ok()) << whole.status();
  auto s = make({"5/second"});
  for (const TraceEvent& e : trace) ASSERT_TRUE(s->add(e.t, e.key, e.cost).ok());
  const StreamResult r = s->result();
  ASSERT_EQ(r.rows.size(), whole->size());
  for (std::size_t i = 0; i < r.rows.size(); ++i) {
    const LaneSummary expect = summarize((*whole)[i], trace, 5, kS);
    const StreamRow& row = r.rows[i];
    EXPECT_EQ(row.lane, (*whole)[i].name);
    EXPECT_EQ(row.summary.allowed, expect.allowed) << row.lane;
    EXPECT_EQ(row.summary.blocked, expect.blocked) << row.lane;
    EXPECT_EQ(row.summary.max_in_period, expect.max_in_period) << row.lane;
    EXPECT_EQ(row.summary.worst_burst, expect.worst_burst) << row.lane;
    std::int64_t a = 0, b = 0;
    for (const BinCount& c : row.bins) {
      a += c.allowed;
      b += c.blocked;
    }
    EXPECT_EQ(a, expect.allowed) << row.lane;  // the bins hold every request once
    EXPECT_EQ(b, expect.blocked) << row.lane;
    EXPECT_EQ(row.keys_blocked, 1) << row.lane;  // only "hot" goes over 5/second
    ASSERT_EQ(row.marks.size(), trace.size());   // a small trace: every decision kept
    EXPECT_EQ(row.marks[5].allowed, (*whole)[i].steps[5].allowed);
  }
  EXPECT_EQ(r.keys, 11);
  ASSERT_EQ(r.top.size(), 1u);
  EXPECT_EQ(r.top[0].key, "hot");
  EXPECT_EQ(r.top[0].requests, 600);
}

TEST(StreamingSimulation, BinsDoubleAndStayBounded) {
  auto s = make({"1/second"}, {"gcra"}, 100);
  // 10,000 requests over 10,000 s: the 1 ms bins double until 100 of them span the trace.
  for (int i = 0; i < 10'000; ++i) ASSERT_TRUE(s->add(i * kS, "k", 1).ok());
  const StreamResult r = s->result();
  EXPECT_LE(r.bins, 100u);
  EXPECT_GE(r.bins, 50u);
  EXPECT_EQ(r.bin_width, Micros{1000} << 17);  // 131.072 s
  EXPECT_EQ(r.rows[0].bins.size(), r.bins);
  EXPECT_EQ(r.rows[0].bins[0].allowed, 132);  // the requests at 0 … 131 s
  EXPECT_EQ(r.rows[0].summary.allowed, 10'000);
}

TEST(StreamingSimulation, SeveralLimitsAndHours) {
  auto s = make({"2/minute", "2/minute; 3/hour"}, {"moving-window"});
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(s->add(Micros{7200} * kS + i * 61 * kS, "a", 1).ok());
  const StreamResult r = s->result();
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0].limit, "2/minute");
  EXPECT_EQ(r.rows[0].summary.allowed, 10);
  EXPECT_EQ(r.rows[1].summary.allowed, 3);
  EXPECT_EQ(r.rows[1].summary.blocked, 7);
  EXPECT_EQ(r.rows[1].blocked_by_hour[2], 7);  // 02:00 UTC
}

TEST(StreamingSimulation, MarksGiveWayToTheFocusKey) {
  auto s = make({"5/second"}, {"gcra"}, 600, 100, "hot");
  for (const TraceEvent& e : mixed(10)) ASSERT_TRUE(s->add(e.t, e.key, e.cost).ok());
  const StreamResult r = s->result();
  EXPECT_FALSE(r.all_marked);
  ASSERT_EQ(r.marked.size(), 100u);  // bounded by max_marks
  for (const TraceEvent& e : r.marked) EXPECT_EQ(e.key, "hot");
  EXPECT_EQ(r.rows[0].marks.size(), r.marked.size());
}

// A focus draws that key's requests alone on a small trace too (not every request).
TEST(StreamingSimulation, AFocusKeepsItsKeyAloneAtAnySize) {
  auto s = make({"5/second"}, {"gcra"}, 600, 100'000, "hot");
  const auto trace = mixed(10);
  std::size_t hot = 0;
  for (const TraceEvent& e : trace) {
    ASSERT_TRUE(s->add(e.t, e.key, e.cost).ok());
    hot += e.key == "hot" ? 1 : 0;
  }
  ASSERT_LT(trace.size(), 100'000u);
  ASSERT_GT(hot, 0u);
  ASSERT_LT(hot, trace.size());
  const StreamResult r = s->result();
  EXPECT_FALSE(r.all_marked);
  EXPECT_EQ(r.marked.size(), hot);
  for (const TraceEvent& e : r.marked) EXPECT_EQ(e.key, "hot");
  EXPECT_EQ(r.rows[0].marks.size(), hot);
}

TEST(StreamingSimulation, RejectsBadInput) {
  StreamOptions o;
  EXPECT_FALSE(StreamingSimulation::make(o).ok());  // no limit
  o.limits = {"3/fortnight"};
  EXPECT_FALSE(StreamingSimulation::make(o).ok());
  auto s = make({"1/second"});
  ASSERT_TRUE(s->add(5 * kS, "a", 1).ok());
  EXPECT_FALSE(s->add(4 * kS, "a", 1).ok());   // backwards
  EXPECT_FALSE(s->add(6 * kS, "", 1).ok());    // no key
  EXPECT_FALSE(s->add(6 * kS, "a", -1).ok());  // negative cost
}

// A moving-window row whose logs outgrow max_log_bytes ends the simulation with the store's
// ResourceExhausted, never a request counted as blocked (`floodgate simulate` reports the error).
TEST(StreamingSimulation, AMovingWindowPastItsLogBoundIsAnError) {
  StreamOptions o;
  o.limits = {"1000000/hour"};
  o.lanes = {"gcra", "moving-window"};
  o.max_log_bytes = 1024;  // 64 entries of 16 bytes: the buffer's growth to 128 does not fit
  auto s = StreamingSimulation::make(o);
  ASSERT_TRUE(s.ok()) << s.status();
  absl::Status failed;
  int added = 0;
  for (; added < 1000 && failed.ok(); ++added) failed = (*s)->add(added * 10, "k", 1);
  EXPECT_EQ(failed.code(), absl::StatusCode::kResourceExhausted) << failed;
  EXPECT_NE(failed.message().find("max_log_bytes"), std::string_view::npos) << failed;
  EXPECT_EQ(added, 65);  // 64 entries fit, the 65th needs a bigger buffer
  const StreamResult r = (*s)->result();
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[1].summary.allowed, 64);
  EXPECT_EQ(r.rows[1].summary.blocked, 0);
}

TEST(Report, TablesChartAndEscapedKeys) {
  auto s = make({"5/second"}, {"gcra", "fixed-window"}, 600, 20'000);
  auto trace = mixed(20);
  for (TraceEvent& e : trace) {
    if (e.key == "hot") e.key = "<script>x</script>";
  }
  for (const TraceEvent& e : trace) ASSERT_TRUE(s->add(Micros{1'700'000'000} * kS + e.t, e.key, e.cost).ok());
  const StreamResult r = s->result();
  const std::string html = render_report_html(r, "report", {"a note"});
  EXPECT_EQ(html.rfind("<!doctype html>", 0), 0u);
  EXPECT_EQ(html.find("<script"), std::string::npos);  // keys are text, never markup
  EXPECT_NE(html.find("&lt;script&gt;x&lt;/script&gt;"), std::string::npos);
  EXPECT_EQ(occurrences(html, "<tr data-row="), 2u);
  EXPECT_NE(html.find("id=\"top-keys\""), std::string::npos);
  EXPECT_NE(html.find("id=\"hours\""), std::string::npos);
  EXPECT_NE(html.find("class=\"bins-chart\""), std::string::npos);
  EXPECT_NE(html.find("id=\"marks\""), std::string::npos);  // a small trace: request by request too
  EXPECT_EQ(html.find("src="), std::string::npos);  // nothing to fetch
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
  EXPECT_NE(html.find(">9.1%<"), std::string::npos);  // keys ever blocked: 1 of 11
}

// A calendar limit through every lane: the clock-aligned fixed window runs it, the other lanes are
// skipped with a note each instead of failing the whole simulation.
TEST(StreamingSimulation, CalendarLimitSkipsTheLanesThatCannotRunIt) {
  auto sim = make({"100 per calendar month in Europe/Berlin"});
  ASSERT_TRUE(sim->add(Micros{1767787200} * kS, "k", 1).ok());
  const StreamResult r = sim->result();
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].lane, "fixed-window");
  ASSERT_EQ(r.skipped.size(), 6u);
  EXPECT_NE(r.skipped.back().find("lane gcra skipped"), std::string::npos) << r.skipped.back();
}

}  // namespace
}  // namespace floodgate
