// floodgate/sim/lanes.hpp — the lanes of a simulation: one strategy each, and the decisions it
// took on a trace, as the charts draw them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "floodgate/clock.hpp"

namespace floodgate {

/// The lanes a simulation can draw: the six strategies, with the fixed window twice (aligned to
/// the clock and anchored at the first hit). Names as on the command line and in the HTTP API:
///   fixed-window  fixed-window-first-hit  moving-window  sliding-window-counter
///   token-bucket  leaky-bucket  gcra
std::span<const std::string_view> simulation_lanes() noexcept;

/// Parses "all" or a comma-separated list of lane names ("gcra,token-bucket"; '_' for '-' too).
/// Errors: InvalidArgument quoting the unknown name and listing the valid ones; duplicates and an
/// empty list are errors.
absl::StatusOr<std::vector<std::string>> parse_lanes(std::string_view list);

/// One decision of a lane, after the request at the same index of the trace.
struct SimStep {
  bool allowed = false;
  std::int64_t remaining = 0;
  Micros retry_after = 0;  ///< kNever when the cost can never fit
  Micros reset_after = 0;
  /// Units in use of the most constraining limit after the decision: `capacity − remaining`
  /// (the window's count, or the bucket's fill). What the lanes draw under the dots.
  std::int64_t level = 0;
  /// The most constraining limit's capacity (its amount for windows, its burst for buckets).
  std::int64_t capacity = 0;
};

struct SimLane {
  std::string name;            ///< a lane name (simulation_lanes)
  std::string policy;          ///< Policy::describe() of what ran, e.g. "gcra 3/minute burst 3"
  std::vector<SimStep> steps;  ///< one per trace event
  std::int64_t allowed = 0;    ///< requests admitted
  std::int64_t blocked = 0;    ///< requests denied
};

}  // namespace floodgate
