// One trace through several strategies on the real engine, and the figures of a lane.
#include "floodgate/simulate.hpp"

#include <algorithm>
#include <array>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "floodgate/limiter.hpp"
#include "floodgate/memory_storage.hpp"
#include "sim/lanes.hpp"
#include "util/text.hpp"

namespace floodgate {

namespace {

constexpr std::array<std::string_view, 7> kLanes{
    "fixed-window",  "fixed-window-first-hit", "moving-window", "sliding-window-counter",
    "token-bucket", "leaky-bucket",           "gcra"};

}  // namespace

namespace sim {

absl::StatusOr<Policy> lane_policy(std::string_view lane, const std::vector<Limit>& limits,
                                   std::int64_t burst) {
  PolicyOptions o;
  std::string_view strategy_name = lane;
  if (lane == "fixed-window-first-hit") {
    strategy_name = "fixed-window";
    o.anchor = Anchor::kFirstHit;
  }
  auto strategy = parse_strategy(strategy_name);
  if (!strategy.ok()) return strategy.status();
  if (uses_burst(*strategy)) o.burst = burst;
  return Policy::make(std::string(lane), *strategy, limits, o);
}

std::string describe_lane(const Policy& p) {
  std::string s = p.describe();
  if (const std::size_t colon = s.find(": "); colon != std::string::npos) {
    s.erase(0, colon + 2);  // "gcra: gcra 3/minute burst 3" → "gcra 3/minute burst 3"
  }
  return s;
}

absl::Status check_burst(std::int64_t burst) {
  if (burst < 0 || burst > kMaxAmount) {
    return absl::InvalidArgumentError(
        fmt::format("burst {} is out of range: give a whole number from 1 to 2^53 (0 = the amount)", burst));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<LaneSpec>> lane_specs(const std::vector<std::string>& limits,
                                                 const std::vector<std::string>& lanes, std::int64_t burst) {
  if (absl::Status st = check_burst(burst); !st.ok()) return st;
  std::vector<std::string> names = lanes;
  if (names.empty()) names.assign(kLanes.begin(), kLanes.end());
  std::vector<LaneSpec> out;
  for (const std::string& limit : limits) {
    auto parsed = parse_limits(limit);
    if (!parsed.ok()) return parsed.status();
    for (const std::string& lane : names) {
      auto policy = lane_policy(lane, *parsed, burst);
      if (!policy.ok()) return policy.status();
      std::string description = describe_lane(*policy);
      out.push_back(LaneSpec{*std::move(policy), limit, lane, std::move(description), parsed->front()});
    }
  }
  return out;
}

SimStep step_of(const Policy& p, const Decision& d) {
  SimStep s;
  s.allowed = d.allowed;
  s.remaining = d.remaining;
  s.retry_after = d.retry_after;
  s.reset_after = d.reset_after;
  s.capacity = d.limit;
  for (const Limit& l : p.limits()) {  // the capacity of the most constraining limit
    if (l.amount == d.limit && l.period == d.period) {
      s.capacity = uses_burst(p.strategy()) ? l.capacity() : l.amount;
      break;
    }
  }
  s.level = std::max<std::int64_t>(0, s.capacity - d.remaining);
  return s;
}

absl::Status check_event(std::size_t i, Micros t, Micros previous, Micros origin,
                         std::int64_t cost, std::string_view key) {
  if (t < 0 || t > (Micros{1} << 62) - origin) {
    return absl::InvalidArgumentError(fmt::format("event {}: \"t\" is out of range", i));
  }
  if (t < previous) return absl::InvalidArgumentError(fmt::format("event {}: \"t\" goes backwards", i));
  if (cost < 0 || cost > kMaxAmount) {
    return absl::InvalidArgumentError(
        fmt::format("event {}: \"cost\" must be a whole number from 0 to 2^53", i));
  }
  if (key.empty() || key.size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError(fmt::format(
        "event {}: \"key\" must be a non-empty string of at most {} bytes", i, kMaxKeyBytes));
  }
  return absl::OkStatus();
}

}  // namespace sim

std::span<const std::string_view> simulation_lanes() noexcept { return kLanes; }

absl::StatusOr<std::vector<std::string>> parse_lanes(std::string_view list) {
  std::vector<std::string> out;
  const std::string all = text::lower(text::trim(list));
  if (all == "all") return std::vector<std::string>(kLanes.begin(), kLanes.end());
  std::string_view rest = list;
  while (true) {
    const std::size_t comma = rest.find(',');
    std::string name = text::lower(text::trim(rest.substr(0, comma)));
    std::replace(name.begin(), name.end(), '_', '-');
    if (name.empty()) {
      return absl::InvalidArgumentError(fmt::format(
          "strategies \"{}\": an empty name; give \"all\" or names separated by commas", list));
    }
    if (std::find(kLanes.begin(), kLanes.end(), name) == kLanes.end()) {
      return absl::InvalidArgumentError(fmt::format(
          "unknown strategy \"{}\": expected all, or some of {}", name,
          fmt::join(kLanes, ", ")));
    }
    if (std::find(out.begin(), out.end(), name) != out.end()) {
      return absl::InvalidArgumentError(fmt::format("strategy \"{}\" is named twice", name));
    }
    out.push_back(std::move(name));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return out;
}

absl::StatusOr<std::vector<SimLane>> simulate(const SimulateOptions& options,
                                              std::span<const TraceEvent> trace) {
  if (trace.size() > options.max_events) {
    return absl::InvalidArgumentError(fmt::format("the trace has {} events: at most {} are allowed",
                                                  trace.size(), options.max_events));
  }
  if (absl::Status st = sim::check_burst(options.burst); !st.ok()) return st;
  if (options.origin < 0 || options.origin > (Micros{1} << 62)) {
    return absl::InvalidArgumentError("the origin must be a time from 0 to 2^62 µs");
  }
  auto limits = parse_limits(options.limit);
  if (!limits.ok()) return limits.status();
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const TraceEvent& e = trace[i];
    const Micros previous = i > 0 ? trace[i - 1].t : 0;
    if (absl::Status st = sim::check_event(i, e.t, previous, options.origin, e.cost, e.key); !st.ok()) return st;
  }
  std::vector<std::string> lanes = options.lanes;
  if (lanes.empty()) lanes.assign(kLanes.begin(), kLanes.end());

  std::vector<SimLane> out;
  out.reserve(lanes.size());
  for (const std::string& name : lanes) {
    auto policy = sim::lane_policy(name, *limits, options.burst);
    if (!policy.ok()) return policy.status();
    auto clock = std::make_shared<ManualClock>(options.origin);
    Limiter limiter(std::make_shared<MemoryStorage>(), clock);
    SimLane lane;
    lane.name = name;
    lane.policy = sim::describe_lane(*policy);
    lane.steps.reserve(trace.size());
    for (const TraceEvent& e : trace) {
      clock->set(options.origin + e.t);
      auto d = limiter.hit(*policy, e.key, e.cost);
      if (!d.ok()) return d.status();  // the private memory store: past its bound on moving-window logs
      const SimStep s = sim::step_of(*policy, *d);
      (d->allowed ? lane.allowed : lane.blocked) += 1;
      lane.steps.push_back(s);
    }
    out.push_back(std::move(lane));
  }
  return out;
}

LaneSummary summarize(const SimLane& lane, std::span<const TraceEvent> trace, std::int64_t amount,
                      Micros period) {
  LaneSummary s;
  s.allowed = lane.allowed;
  s.blocked = lane.blocked;
  s.period = period;
  s.burst_span = std::max<Micros>(1, (period + amount - 1) / std::max<std::int64_t>(1, amount));

  // Admitted events per key, in time order.
  std::vector<std::pair<std::string_view, std::size_t>> admitted;
  for (std::size_t i = 0; i < trace.size() && i < lane.steps.size(); ++i) {
    if (lane.steps[i].allowed && trace[i].cost > 0) admitted.emplace_back(trace[i].key, i);
  }
  std::stable_sort(admitted.begin(), admitted.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });

  // The most units in any [s, s + span): the best interval starts at an admitted request, so a
  // window opening at each one in turn (two pointers) finds it.
  auto most_within = [&](Micros span) {
    std::int64_t best = 0;
    std::size_t begin = 0;
    while (begin < admitted.size()) {
      std::size_t end = begin;
      while (end < admitted.size() && admitted[end].first == admitted[begin].first) ++end;
      std::int64_t sum = 0;
      std::size_t lo = begin;
      for (std::size_t hi = begin; hi < end; ++hi) {
        sum += trace[admitted[hi].second].cost;
        while (trace[admitted[hi].second].t - trace[admitted[lo].second].t >= span) {
          sum -= trace[admitted[lo].second].cost;
          ++lo;
        }
        best = std::max(best, sum);
      }
      begin = end;
    }
    return best;
  };
  s.max_in_period = most_within(period);
  s.worst_burst = most_within(s.burst_span);
  return s;
}

}  // namespace floodgate
