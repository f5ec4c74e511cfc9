// What simulate() and StreamingSimulation share: the policy a lane runs, the capacity a decision
// names, the checks on one request, and turning a Decision into a SimStep (src/sim/lanes.cpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "floodgate/decision.hpp"
#include "floodgate/policy.hpp"
#include "floodgate/sim/lanes.hpp"

namespace floodgate::sim {

inline constexpr std::size_t kMaxKeyBytes = 1024;

/// The policy of lane `lane` ("fixed-window-first-hit" is the fixed window anchored at the first
/// hit) with `limits`; `burst` applies to the bucket strategies only.
absl::StatusOr<Policy> lane_policy(std::string_view lane, const std::vector<Limit>& limits,
                                   std::int64_t burst);

/// Policy::describe() without the name: "gcra 3/minute burst 3".
std::string describe_lane(const Policy& p);

/// A bucket's burst given to a simulation: InvalidArgument outside [0, 2^53] (0: the amount).
absl::Status check_burst(std::int64_t burst);

/// One lane of one limit of a simulation that runs several (simulate --charge, the streaming
/// simulation): its policy, as the user wrote the limit, and that limit's first part.
struct LaneSpec {
  Policy policy;
  std::string limit;        // the limit as given, e.g. "10/second,100/minute"
  std::string lane;         // a strategy name of simulation_lanes()
  std::string description;  // describe_lane(policy)
  Limit first;              // the limit's first (for a chart's windows)
};

/// Every lane of every limit, limit by limit: `limits` in the rate notation, `lanes` (empty:
/// every strategy), `burst` (check_burst). The first bad limit, lane or burst is the error. With
/// `skipped`, a lane that cannot run a calendar limit (every lane but fixed-window) is left out and
/// a note saying why is appended there; a limit that no lane can run is still an error.
absl::StatusOr<std::vector<LaneSpec>> lane_specs(const std::vector<std::string>& limits,
                                                 const std::vector<std::string>& lanes, std::int64_t burst,
                                                 std::vector<std::string>* skipped = nullptr);

/// The decision as the lanes draw it (level and capacity of the most constraining limit).
SimStep step_of(const Policy& p, const Decision& d);

/// Checks one request (`index` names it in the message): t in [0, 2^62 − origin] and not before
/// `previous`, cost in [0, 2^53], key non-empty and at most kMaxKeyBytes.
absl::Status check_event(std::size_t index, Micros t, Micros previous, Micros origin,
                         std::int64_t cost, std::string_view key);

}  // namespace floodgate::sim
