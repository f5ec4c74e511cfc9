// One trace through several strategies on the real engine, and the figures of a lane.
#include "floodgate/sim/simulate.hpp"

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
  if (lanes.empty()) lanes.assign(simulation_lanes().begin(), simulation_lanes().end());

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
