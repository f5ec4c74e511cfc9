// Costs known after the response, limited two ways (ChargeSimulation): charged after the
// response lets concurrent requests through without bound; reserved and settled admits what fits.
#include "floodgate/sim/charge.hpp"

#include <limits>

#include <gtest/gtest.h>

#include "floodgate/sim/simulate.hpp"

namespace floodgate {
namespace {

constexpr Micros kS = kMicrosPerSecond;
constexpr Micros kMs = 1000;
// 2026-01-07T12:00:00Z: a minute boundary.
constexpr Micros kNoon = Micros{1767787200} * kS;

std::unique_ptr<ChargeSimulation> make(std::string limit, std::string lanes, std::string estimate,
                                       std::int64_t check_cost = 1) {
  ChargeOptions o;
  o.limits = {std::move(limit)};
  o.lanes = *parse_lanes(lanes);
  o.estimate = *Estimate::parse(estimate);
  o.check_cost = check_cost;
  auto sim = ChargeSimulation::make(o);
  EXPECT_TRUE(sim.ok()) << sim.status();
  return *std::move(sim);
}

// Five concurrent requests against 100 tokens per minute, with the tokens of the report of the
// overshoot in LiteLLM's TPM limit (58, 80, 175, 175, 175: 663 tokens).
TEST(ChargeSimulation, ConcurrentRequestsOvershootWhenChargedAfter) {
  auto sim = make("100/minute", "all", "100");
  const std::int64_t tokens[] = {58, 80, 175, 175, 175};
  const Micros durations[] = {2400 * kMs, 3100 * kMs, 5200 * kMs, 5000 * kMs, 4800 * kMs};
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(sim->add(kNoon + i * 10 * kMs, durations[i], "team-a", tokens[i]).ok());
  }
  auto r = sim->finish();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->requests, 5);
  EXPECT_EQ(r->keys, 1);
  ASSERT_EQ(r->rows.size(), simulation_lanes().size());
  for (const ChargeRow& row : r->rows) {
    SCOPED_TRACE(row.lane);
    // Charged after: no response has ended when the five start, so every test finds room.
    EXPECT_EQ(row.after.admitted, 5);
    EXPECT_EQ(row.after.denied, 0);
    EXPECT_EQ(row.after.used, 663);
    EXPECT_EQ(row.after.max_in_period, 663);
    EXPECT_EQ(row.after.max_over, 563);
    EXPECT_EQ(row.after.total_over, 563);
    EXPECT_EQ(row.after.periods_over, 1);
    // Reserved at 100: the first fills the budget, the other four are denied; it settles at 58.
    EXPECT_EQ(row.reserved.admitted, 1);
    EXPECT_EQ(row.reserved.denied, 4);
    EXPECT_EQ(row.reserved.used, 58);
    EXPECT_EQ(row.reserved.max_in_period, 58);
    EXPECT_EQ(row.reserved.max_over, 0);
    EXPECT_EQ(row.reserved.total_over, 0);
    EXPECT_EQ(row.amount, 100);
    EXPECT_EQ(row.period, 60 * kS);
    ASSERT_EQ(row.after_bins.size(), 1u);
    EXPECT_EQ(row.after_bins[0], 663);
    EXPECT_EQ(row.reserved_bins[0], 58);
    EXPECT_EQ(row.bin_start, kNoon);
  }
}

// Five of 130 at an estimate of 100: one admitted, 30 over (docs/algorithms.md, "What it bounds").
TEST(ChargeSimulation, ReservedOvershootIsTheEstimatesError) {
  auto sim = make("100/minute", "fixed-window", "100");
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(sim->add(kNoon, 3 * kS, "u", 130).ok());
  auto r = sim->finish();
  ASSERT_TRUE(r.ok());
  const ChargeRow& row = r->rows.at(0);
  EXPECT_EQ(row.after.used, 650);
  EXPECT_EQ(row.after.max_over, 550);
  EXPECT_EQ(row.reserved.admitted, 1);
  EXPECT_EQ(row.reserved.used, 130);
  EXPECT_EQ(row.reserved.max_over, 30);
}

// A response that ends at t is charged before a request that starts at t is decided.
TEST(ChargeSimulation, EndsComeBeforeStartsAtTheSameInstant) {
  for (Micros gap : {Micros{0}, Micros{1}}) {
    SCOPED_TRACE(gap);
    auto sim = make("100/minute", "fixed-window", "100");
    ASSERT_TRUE(sim->add(kNoon, 2 * kS, "u", 100).ok());
    ASSERT_TRUE(sim->add(kNoon + 2 * kS - gap, kS, "u", 40).ok());
    auto r = sim->finish();
    ASSERT_TRUE(r.ok());
    const ChargeRow& row = r->rows.at(0);
    // gap 0: the first's 100 are charged at 2 s, then the second is tested: no room. gap 1 µs:
    // it starts while the first is in flight and passes.
    EXPECT_EQ(row.after.admitted, gap == 0 ? 1 : 2);
    EXPECT_EQ(row.after.used, gap == 0 ? 100 : 140);
    EXPECT_EQ(row.after.total_over, gap == 0 ? 0 : 40);
    // Reserved: the first holds 100 from its start, whatever the gap.
    EXPECT_EQ(row.reserved.admitted, 1);
    EXPECT_EQ(row.reserved.used, 100);
  }
}

// Charged after, the check at the start passes while usage < limit (check cost 1), or ≤ limit
// (check cost 0).
TEST(ChargeSimulation, TheCheckAtTheStart) {
  for (std::int64_t check : {1, 0}) {
    SCOPED_TRACE(check);
    auto sim = make("100/minute", "fixed-window", "100", check);
    ASSERT_TRUE(sim->add(kNoon, kS, "u", 100).ok());          // ends at 1 s: usage 100
    ASSERT_TRUE(sim->add(kNoon + 2 * kS, kS, "u", 10).ok());  // usage = limit
    ASSERT_TRUE(sim->add(kNoon + 61 * kS, kS, "u", 10).ok()); // the next minute
    auto r = sim->finish();
    ASSERT_TRUE(r.ok());
    const ChargeRow& row = r->rows.at(0);
    EXPECT_EQ(row.after.admitted, check == 1 ? 2 : 3);
    EXPECT_EQ(row.after.max_in_period, check == 1 ? 100 : 110);
    EXPECT_EQ(row.after.total_over, check == 1 ? 0 : 10);
    EXPECT_EQ(row.after.periods_over, check == 1 ? 0 : 1);
  }
}

// Several keys and periods: the overshoot is counted per key and per period, and summed.
TEST(ChargeSimulation, OvershootPerKeyAndPeriod) {
  auto sim = make("100/minute", "fixed-window", "50");
  // minute 0: a 3 × 60 concurrently, b 1 × 60; minute 1: a 2 × 70 concurrently.
  ASSERT_TRUE(sim->add(kNoon + 1 * kS, 5 * kS, "a", 60).ok());
  ASSERT_TRUE(sim->add(kNoon + 1 * kS, 5 * kS, "a", 60).ok());
  ASSERT_TRUE(sim->add(kNoon + 2 * kS, 5 * kS, "b", 60).ok());
  ASSERT_TRUE(sim->add(kNoon + 3 * kS, 5 * kS, "a", 60).ok());
  ASSERT_TRUE(sim->add(kNoon + 70 * kS, 5 * kS, "a", 70).ok());
  ASSERT_TRUE(sim->add(kNoon + 70 * kS, 5 * kS, "a", 70).ok());
  auto r = sim->finish();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->keys, 2);
  const ChargeRow& row = r->rows.at(0);
  EXPECT_EQ(row.after.admitted, 6);
  EXPECT_EQ(row.after.max_in_period, 180);
  EXPECT_EQ(row.after.max_over, 80);
  EXPECT_EQ(row.after.total_over, 80 + 40);  // a: 180 and 140; b: 60
  EXPECT_EQ(row.after.periods_over, 2);
  // Reserved at 50: a's first two fit (100), its third is denied; b's one fits; minute 1: two fit.
  EXPECT_EQ(row.reserved.admitted, 5);
  EXPECT_EQ(row.reserved.denied, 1);
  EXPECT_EQ(row.reserved.max_in_period, 140);
  EXPECT_EQ(row.reserved.total_over, 20 + 40);  // a: 120 and 140
  ASSERT_EQ(row.after_bins.size(), 2u);
  EXPECT_EQ(row.after_bins[0], 180);
  EXPECT_EQ(row.after_bins[1], 140);
  EXPECT_EQ(row.reserved_bins[0], 120);
  EXPECT_EQ(row.reserved_bins[1], 140);
}

// The mean estimate learns each key's costs from its settled requests.
TEST(ChargeSimulation, MeanEstimateFollowsTheKeysCosts) {
  auto sim = make("100/minute", "fixed-window", "mean:10");
  // Requests of 40, one after the other: the first reserves 10 (none of the key's costs is known
  // yet) and settles at 40; the next ones reserve the mean, 40.
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(sim->add(kNoon + i * 2 * kS, kS, "u", 40).ok());
  auto r = sim->finish();
  ASSERT_TRUE(r.ok());
  const ChargeRow& row = r->rows.at(0);
  // used 40 after the first; the second reserves 40 (80), the third 40 (120 > 100): denied.
  EXPECT_EQ(row.reserved.admitted, 2);
  EXPECT_EQ(row.reserved.denied, 2);
  EXPECT_EQ(row.reserved.used, 80);
  EXPECT_EQ(row.reserved.total_over, 0);
  // Charged after, sequential requests stop at the limit too: 40, 80 pass; at 120 nothing does.
  EXPECT_EQ(row.after.admitted, 3);
  EXPECT_EQ(row.after.used, 120);
  EXPECT_EQ(row.after.max_over, 20);
}

TEST(ChargeSimulation, TheChartBinsMergeAsTheLogGrows) {
  ChargeOptions o;
  o.limits = {"10/second"};
  o.lanes = {"fixed-window"};
  o.estimate = *Estimate::parse("5");
  o.columns = 16;
  auto sim = *ChargeSimulation::make(o);
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(sim->add(kNoon + i * kS, 100 * kMs, "k", 3 + i % 5).ok());
  auto r = sim->finish();
  ASSERT_TRUE(r.ok());
  const ChargeRow& row = r->rows.at(0);
  EXPECT_EQ(row.bin_width, 4 * kS);  // 40 periods into at most 16 bins
  ASSERT_EQ(row.after_bins.size(), 10u);
  EXPECT_EQ(row.after_bins[0], 6);   // the largest of 3, 4, 5, 6
  EXPECT_EQ(row.after_bins[1], 7);   // of 7, 3, 4, 5
  // Alone in its second, each reservation of 5 fits and settles at its actual cost: the same usage.
  EXPECT_EQ(row.reserved_bins, row.after_bins);
  const std::string svg = render_charge_svg(*r, "t");
  EXPECT_NE(svg.find("class=\"charge-chart\""), std::string::npos);
  EXPECT_NE(svg.find("limit 10"), std::string::npos);
}

// Settled reservations leave the bounded table as the log goes; requests in flight past the bound
// end the simulation with ResourceExhausted.
TEST(ChargeSimulation, ReservationsInFlightAreBounded) {
  ChargeOptions o;
  o.limits = {"10/second"};
  o.lanes = {"fixed-window", "gcra"};
  o.estimate = *Estimate::parse("1");
  o.max_reservations = 4;
  auto sim = *ChargeSimulation::make(o);
  for (int i = 0; i < 10'000; ++i) ASSERT_TRUE(sim->add(kNoon + i * 200 * kMs, 10 * kMs, "k", 1).ok()) << i;
  auto r = sim->finish();
  ASSERT_TRUE(r.ok()) << r.status();
  for (const ChargeRow& row : r->rows) {
    EXPECT_EQ(row.after.admitted, 10'000) << row.lane;
    EXPECT_EQ(row.reserved.admitted, 10'000) << row.lane;
    EXPECT_EQ(row.reserved.max_in_period, 5) << row.lane;
    EXPECT_EQ(row.reserved.total_over, 0) << row.lane;
  }
  auto busy = *ChargeSimulation::make(o);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(busy->add(kNoon, kS, "k" + std::to_string(i), 1).ok());
  const absl::Status s = busy->add(kNoon, kS, "k4", 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("more than 4 reservations in flight"), std::string_view::npos) << s;
}

// 1,024 concurrent requests of 2^53 tokens each (the most a log line may say): their sum, 2^63,
// does not fit a signed 64-bit total. The totals saturate at 2^63 − 1; before, they wrapped
// (undefined behaviour: the sanitizer build aborted).
TEST(ChargeSimulation, TotalsSaturateInsteadOfWrapping) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  ChargeOptions o;
  o.limits = {"100/minute"};
  o.lanes = {"fixed-window", "sliding-window-counter", "gcra"};
  o.estimate = *Estimate::parse("100");
  o.max_reservations = 2048;
  auto sim = *ChargeSimulation::make(o);
  for (int i = 0; i < 1024; ++i) ASSERT_TRUE(sim->add(kNoon + i, 3 * kS, "k", kMaxAmount).ok()) << i;
  auto r = sim->finish();
  ASSERT_TRUE(r.ok()) << r.status();
  for (const ChargeRow& row : r->rows) {
    SCOPED_TRACE(row.lane);
    EXPECT_EQ(row.after.admitted, 1024);  // every check at the start found room: nothing had ended
    EXPECT_EQ(row.after.used, kMax);
    EXPECT_EQ(row.after.max_in_period, kMax);
    EXPECT_EQ(row.after.max_over, kMax - 100);
    EXPECT_EQ(row.after.total_over, kMax - 100);
    EXPECT_EQ(row.after_bins.at(0), kMax);
    // Reserved at 100: the first fills the budget; it settles at 2^53, exactly.
    EXPECT_EQ(row.reserved.admitted, 1);
    EXPECT_EQ(row.reserved.used, kMaxAmount);
    EXPECT_EQ(row.reserved.max_over, kMaxAmount - 100);
  }
}

TEST(ChargeSimulation, BadInputIsNamed) {
  EXPECT_FALSE(Estimate::parse("").ok());
  EXPECT_FALSE(Estimate::parse("-1").ok());
  EXPECT_FALSE(Estimate::parse("mean:").ok());
  EXPECT_FALSE(Estimate::parse("average").ok());
  auto e = Estimate::parse("tokens");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("\"tokens\""), std::string_view::npos);
  EXPECT_TRUE(Estimate::parse("mean:100").ok());
  EXPECT_TRUE(Estimate::parse("mean:100")->mean);

  ChargeOptions o;
  o.estimate.units = 1;
  EXPECT_FALSE(ChargeSimulation::make(o).ok());  // no limit
  o.limits = {"10/banana"};
  EXPECT_FALSE(ChargeSimulation::make(o).ok());
  o.limits = {"10/second"};
  o.check_cost = 2;
  EXPECT_FALSE(ChargeSimulation::make(o).ok());
  o.check_cost = 1;
  auto sim = *ChargeSimulation::make(o);
  ASSERT_TRUE(sim->add(kNoon, kS, "k", 1).ok());
  EXPECT_FALSE(sim->add(kNoon - 1, kS, "k", 1).ok());           // time goes backwards
  EXPECT_FALSE(sim->add(kNoon, -1, "k", 1).ok());                // negative duration
  EXPECT_FALSE(sim->add(kNoon, 24 * 3600 * kS, "k", 1).ok());    // over 23 hours
  EXPECT_FALSE(sim->add(kNoon, kS, "", 1).ok());                 // empty key
  EXPECT_FALSE(sim->add(kNoon, kS, "k", -5).ok());               // negative cost
  EXPECT_TRUE(sim->finish().ok());
}

// A calendar limit runs on the clock-aligned fixed window only: every other lane is skipped and
// named (the simulation used to stop at the first-hit lane), the fixed window runs; a list of lanes
// none of which can run it is still an error.
TEST(ChargeSimulation, CalendarLimitSkipsTheLanesThatCannotRunIt) {
  auto sim = make("100 per calendar day in UTC", "all", "10");
  ASSERT_TRUE(sim->add(kNoon, kS, "k", 30).ok());
  auto r = sim->finish();
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->rows.size(), 1u);
  EXPECT_EQ(r->rows[0].lane, "fixed-window");
  ASSERT_EQ(r->skipped.size(), 6u);
  EXPECT_NE(r->skipped[0].find("lane fixed-window-first-hit skipped"), std::string::npos) << r->skipped[0];
  EXPECT_NE(r->skipped[0].find("calendar"), std::string::npos) << r->skipped[0];

  ChargeOptions o;
  o.limits = {"100 per calendar day in UTC"};
  o.lanes = *parse_lanes("gcra,moving-window");
  o.estimate.units = 10;
  auto none = ChargeSimulation::make(o);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no lane of the simulation can run it"), std::string_view::npos)
      << none.status();
}

}  // namespace
}  // namespace floodgate
