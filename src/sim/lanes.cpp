// The lanes of a simulation: each lane's policy, the checks on one request, a decision as a step.
#include "sim/lanes.hpp"

#include <algorithm>
#include <array>

#include <fmt/format.h>
#include <fmt/ranges.h>

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
                                                 const std::vector<std::string>& lanes, std::int64_t burst,
                                                 std::vector<std::string>* skipped) {
  if (absl::Status st = check_burst(burst); !st.ok()) return st;
  std::vector<std::string> names = lanes;
  if (names.empty()) names.assign(kLanes.begin(), kLanes.end());
  std::vector<LaneSpec> out;
  for (const std::string& limit : limits) {
    auto parsed = parse_limits(limit);
    if (!parsed.ok()) return parsed.status();
    const bool calendar = std::any_of(parsed->begin(), parsed->end(), [](const Limit& l) { return bool(l.calendar); });
    std::size_t ran = 0;
    for (const std::string& lane : names) {
      auto policy = lane_policy(lane, *parsed, burst);
      // A calendar limit runs on the clock-aligned fixed window only: the other lanes are skipped
      // (and named), unless none is left.
      if (!policy.ok() && calendar && skipped != nullptr && lane != "fixed-window") {
        skipped->push_back(
            fmt::format("lane {} skipped for \"{}\": {}", lane, limit, std::string(policy.status().message())));
        continue;
      }
      if (!policy.ok()) return policy.status();
      ++ran;
      std::string description = describe_lane(*policy);
      out.push_back(LaneSpec{*std::move(policy), limit, lane, std::move(description), parsed->front()});
    }
    if (ran == 0) {
      return absl::InvalidArgumentError(fmt::format(
          "limit \"{}\": no lane of the simulation can run it (a calendar limit runs on fixed-window only)", limit));
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

}  // namespace floodgate
