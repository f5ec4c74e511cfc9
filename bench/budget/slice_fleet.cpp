// A fleet of instances sharing one hot key through budget slices, on a simulated clock.
//
// Each instance is a real Limiter (the slice code of src/budget/) on one MemoryStorage seen through
// a wrapper that counts its calls; a ManualClock is the fleet's clock. Time advances in ticks of
// 1 ms; each instance gets Poisson arrivals at its share of a demand that changes over the run
// (below, at and above the limit). A store call that takes or renews a slice keeps the instance
// busy for the store's latency (its requests wait, as its threads wait for the slice's lock);
// an exact-path call does not (a service has many requests in flight).
//
//   slice_fleet [--instances 500] [--seconds 6] [--limit 200000] [--max-slice 100]
//               [--interval-ms 100] [--latency-us 500] [--strategy fixed-window]
//               [--csv out.csv] [--svg out.svg] [--seed 1]
//
// Prints one JSON line: max admitted in a window against the limit (buckets: the most admitted up
// to a time beyond capacity + rate·t from full, which must be ≤ 0), the most units held in
// slices while some request was denied against the bound (instances × max_slice), the largest
// shortfall of a window whose demand exceeded the limit, decisions per store call.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "floodgate/limiter.hpp"
#include "floodgate/memory_storage.hpp"

namespace {

using floodgate::Decision;
using floodgate::Effect;
using floodgate::Micros;
using floodgate::Policy;
using floodgate::Storage;

// Counts the calls of one instance; the shared store answers.
class CountingStorage final : public Storage {
 public:
  explicit CountingStorage(std::shared_ptr<Storage> inner) : inner_(std::move(inner)) {}
  absl::StatusOr<Decision> apply(const Policy& p, std::string_view key, std::int64_t cost, Effect e,
                                 Micros now) override {
    ++calls;
    return inner_->apply(p, key, cost, e, now);
  }
  absl::Status clear(const Policy& p, std::string_view key) override { return inner_->clear(p, key); }
  absl::StatusOr<Decision> reserve(const Policy& p, std::string_view key, std::int64_t cost, std::string_view id,
                                   Micros ttl, Effect e, Micros now) override {
    ++calls;
    ++slice_calls;
    return inner_->reserve(p, key, cost, id, ttl, e, now);
  }
  absl::StatusOr<Decision> settle(const Policy& p, std::string_view key, std::string_view id, std::int64_t actual,
                                  Micros now) override {
    ++calls;
    return inner_->settle(p, key, id, actual, now);
  }
  void apply_batch(std::span<const BatchItem> items, Micros now, std::span<absl::StatusOr<Decision>> out) override {
    ++calls;
    for (const BatchItem& i : items) slice_calls += i.effect == Effect::kReserve ? 1 : 0;
    inner_->apply_batch(items, now, out);
  }
  std::uint64_t calls = 0;
  std::uint64_t slice_calls = 0;  // calls that took a slice (the instance waits for them)

 private:
  std::shared_ptr<Storage> inner_;
};

struct Args {
  int instances = 500;
  int seconds = 6;
  std::int64_t limit = 200000;
  std::int64_t max_slice = 100;
  Micros interval_ms = 100;
  Micros latency_us = 500;
  std::string strategy = "fixed-window";
  std::string csv;
  std::string svg;
  unsigned seed = 1;
};

// The demand as a multiple of the limit at `t` seconds: below, at, well above, below, above.
double demand_factor(double t) {
  if (t < 1) return 0.5;
  if (t < 2) return 1.0;
  if (t < 4) return 2.0;
  if (t < 5) return 0.7;
  return 1.3;
}

struct Sample {
  double t_s;
  std::int64_t admitted_window;  // admitted so far in the current window (1 s)
  std::int64_t held;             // units in all slices
  bool denied;                   // some request was denied in this tick
};

std::string svg_chart(const std::vector<Sample>& samples, const Args& a, std::int64_t bound) {
  constexpr double kWidth = 1000, kLeft = 80, kRight = 20, kTop = 56, kPanel = 220, kGap = 50;
  const double plot = kWidth - kLeft - kRight;
  const double span = a.seconds;
  const double height = kTop + 2 * kPanel + kGap + 40;
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" viewBox=\"0 0 {0:.0f} "
      "{1:.0f}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n"
      "<text x=\"10\" y=\"20\" font-size=\"15\" font-weight=\"bold\">Budget slices: {2} instances, {3} {4}/s, "
      "max slice {5}, store latency {6} µs</text>\n",
      kWidth, height, a.instances, a.strategy, a.limit, a.max_slice, a.latency_us);
  const auto x = [&](double t) { return kLeft + t / span * plot; };
  const auto panel = [&](double y0, const char* title, std::int64_t cap, const char* cap_name, const char* colour,
                         auto value) {
    const double top = std::max<double>(static_cast<double>(cap) * 1.15, 1);
    const auto y = [&](double v) { return y0 + kPanel - v / top * kPanel; };
    std::string s = fmt::format("<text x=\"10\" y=\"{:.0f}\" font-weight=\"bold\">{}</text>\n", y0 - 8, title);
    s += fmt::format("<rect x=\"{:.0f}\" y=\"{:.0f}\" width=\"{:.0f}\" height=\"{:.0f}\" fill=\"#f4f4f4\"/>\n", kLeft,
                     y0, plot, kPanel);
    s += fmt::format("<line x1=\"{0:.0f}\" x2=\"{1:.0f}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#D55E00\" "
                     "stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/><text x=\"{1:.0f}\" y=\"{3:.1f}\" "
                     "text-anchor=\"end\" fill=\"#a33d00\">{4} {5}</text>\n",
                     kLeft, kLeft + plot, y(static_cast<double>(cap)), y(static_cast<double>(cap)) - 4, cap_name, cap);
    std::string path;
    for (const Sample& m : samples) {
      path += fmt::format("{}{:.1f} {:.1f}", path.empty() ? "M" : "L", x(m.t_s), y(static_cast<double>(value(m))));
    }
    s += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.2\"/>\n", path, colour);
    for (int i = 0; i <= 4; ++i) {
      const double v = top * i / 4;
      s += fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\" fill=\"#333\">{:.0f}</text>\n", kLeft - 6,
                       y(v) + 4, v);
    }
    return s;
  };
  out += panel(kTop + 10, "admitted in the current 1 s window, against the limit", a.limit, "limit", "#009E73",
               [](const Sample& m) { return m.admitted_window; });
  out += panel(kTop + kPanel + kGap + 10, "units held in the instances' slices, against the bound", bound,
               "bound = instances × max slice =", "#0072B2", [](const Sample& m) { return m.held; });
  const double axis = kTop + 2 * kPanel + kGap + 14;
  for (int t = 0; t <= a.seconds; ++t) {
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.0f}\" text-anchor=\"middle\" fill=\"#333\">{}s</text>\n", x(t),
                       axis + 14, t);
  }
  out += "</svg>\n";
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const std::string v = argv[i + 1];
    if (k == "--instances") a.instances = std::stoi(v);
    else if (k == "--seconds") a.seconds = std::stoi(v);
    else if (k == "--limit") a.limit = std::stoll(v);
    else if (k == "--max-slice") a.max_slice = std::stoll(v);
    else if (k == "--interval-ms") a.interval_ms = std::stoll(v);
    else if (k == "--latency-us") a.latency_us = std::stoll(v);
    else if (k == "--strategy") a.strategy = v;
    else if (k == "--csv") a.csv = v;
    else if (k == "--svg") a.svg = v;
    else if (k == "--seed") a.seed = static_cast<unsigned>(std::stoul(v));
    else {
      std::cerr << "unknown option " << k << "\n";
      return 2;
    }
  }
  const auto strategy = floodgate::parse_strategy(a.strategy);
  if (!strategy.ok()) {
    std::cerr << strategy.status() << "\n";
    return 2;
  }
  floodgate::PolicyOptions o;
  o.budget = floodgate::BudgetOptions{a.max_slice, a.interval_ms * 1000, 4};
  o.blocked_cache = 1000;  // as a service would: a denied key is denied locally until its window ends
  const auto policy = Policy::make("hot", *strategy, fmt::format("{}/second", a.limit), o);
  if (!policy.ok()) {
    std::cerr << policy.status() << "\n";
    return 2;
  }
  constexpr Micros kStart = 1'700'000'000LL * floodgate::kMicrosPerSecond;
  constexpr Micros kTick = 1000;
  auto clock = std::make_shared<floodgate::ManualClock>(kStart);
  auto store = std::make_shared<floodgate::MemoryStorage>();
  std::vector<std::shared_ptr<CountingStorage>> wrappers;
  std::vector<std::unique_ptr<floodgate::Limiter>> fleet;
  for (int i = 0; i < a.instances; ++i) {
    wrappers.push_back(std::make_shared<CountingStorage>(store));
    fleet.push_back(std::make_unique<floodgate::Limiter>(wrappers.back(), clock));
  }
  std::mt19937_64 rng(a.seed);
  // Instances differ: weights from 0.25 to 1.75 (a load balancer is never even).
  std::vector<double> weight(a.instances);
  double total_weight = 0;
  for (auto& w : weight) total_weight += (w = 0.25 + 1.5 * std::uniform_real_distribution<>(0, 1)(rng));
  std::vector<std::int64_t> pending(a.instances, 0);
  std::vector<Micros> busy_until(a.instances, 0);
  std::vector<int> order(a.instances);
  for (int i = 0; i < a.instances; ++i) order[i] = i;

  std::vector<Sample> samples;
  std::int64_t admitted_window = 0, demand_window = 0, decisions = 0;
  std::int64_t max_admitted = 0, max_shortfall = 0, held_back_max = 0, max_held = 0;
  bool over_limit = false;
  // The buckets allow capacity + rate·t from full (a window's count is no bound for them).
  const bool bucket = *strategy == floodgate::Strategy::kTokenBucket || *strategy == floodgate::Strategy::kGcra;
  std::int64_t admitted_total = 0, max_excess = std::numeric_limits<std::int64_t>::min();
  const std::int64_t bound = static_cast<std::int64_t>(a.instances) * a.max_slice;
  const Micros end = a.seconds * floodgate::kMicrosPerSecond;
  for (Micros t = 0; t < end; t += kTick) {
    clock->set(kStart + t);
    if (t % floodgate::kMicrosPerSecond == 0 && t > 0) {  // a window ends
      max_admitted = std::max(max_admitted, admitted_window);
      over_limit = over_limit || admitted_window > a.limit;
      if (demand_window > a.limit) max_shortfall = std::max(max_shortfall, a.limit - admitted_window);
      admitted_window = demand_window = 0;
      for (auto& l : fleet) l->end_budgets();  // the window's slices are over (no store call: nothing to give back)
    }
    const double rate = demand_factor(static_cast<double>(t) / 1e6) * static_cast<double>(a.limit);  // per s
    for (int i = 0; i < a.instances; ++i) {
      const double mean = rate * weight[i] / total_weight * static_cast<double>(kTick) / 1e6;
      const std::int64_t n = std::poisson_distribution<std::int64_t>(mean)(rng);
      pending[i] += n;
      demand_window += n;
    }
    std::shuffle(order.begin(), order.end(), rng);
    bool denied = false;
    for (int i : order) {
      auto& l = *fleet[i];
      while (pending[i] > 0 && busy_until[i] <= t) {
        const std::uint64_t before = wrappers[i]->slice_calls;
        const auto d = l.hit(*policy, "hot");
        --pending[i];
        ++decisions;
        if (d.ok() && d->allowed) {
          ++admitted_window;
          ++admitted_total;
        } else {
          denied = true;
        }
        if (wrappers[i]->slice_calls != before) busy_until[i] = t + a.latency_us;  // waits for its slice
      }
    }
    if (bucket) {  // admitted up to the end of this tick against capacity + rate·(t + tick)
      const std::int64_t allowance = a.limit + a.limit * (t + kTick) / floodgate::kMicrosPerSecond;
      max_excess = std::max(max_excess, admitted_total - allowance);
    }
    std::int64_t held = 0;
    for (const auto& l : fleet) held += l->budget_stats().held;
    max_held = std::max(max_held, held);
    if (denied) held_back_max = std::max(held_back_max, held);
    if (t % 10000 == 0) samples.push_back({static_cast<double>(t) / 1e6, admitted_window, held, denied});
  }
  max_admitted = std::max(max_admitted, admitted_window);
  over_limit = bucket ? max_excess > 0 : over_limit || admitted_window > a.limit;
  std::uint64_t calls = 0;
  for (const auto& w : wrappers) calls += w->calls;
  fmt::print(
      "{{\"instances\": {}, \"strategy\": \"{}\", \"limit\": {}, \"max_admitted_per_window\": {}, "
      "\"over_limit\": {}, \"held_back_max\": {}, \"held_max\": {}, \"bound\": {}, \"max_shortfall\": {}, "
      "\"decisions\": {}, \"store_calls\": {}, \"store_calls_per_decision\": {:.4f}, \"latency_us\": {}{}}}\n",
      a.instances, a.strategy, a.limit, max_admitted, over_limit, held_back_max, max_held, bound,
      bucket ? 0 : max_shortfall,
      decisions, calls, decisions > 0 ? static_cast<double>(calls) / static_cast<double>(decisions) : 0.0,
      a.latency_us,
      bucket ? fmt::format(", \"max_admitted_minus_allowance\": {}", max_excess) : "");
  if (!a.csv.empty()) {
    std::ofstream f(a.csv);
    f << "t_s,admitted_window,limit,held,bound,denied\n";
    for (const Sample& m : samples) {
      f << fmt::format("{:.2f},{},{},{},{},{}\n", m.t_s, m.admitted_window, a.limit, m.held, bound, m.denied ? 1 : 0);
    }
  }
  if (!a.svg.empty()) std::ofstream(a.svg) << svg_chart(samples, a, bound);
  return over_limit ? 1 : 0;
}
