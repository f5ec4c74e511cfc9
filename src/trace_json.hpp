// The trace event of `floodgate replay`, `floodgate simulate` and POST /v1/simulate, from JSON.
#pragma once

#include <boost/json/value.hpp>

#include "absl/status/statusor.h"
#include "floodgate/trace_event.hpp"

namespace floodgate {

/// Parses {"t": seconds, "key": "…", "cost": n} (cost defaults to 1; other fields are ignored).
/// `t` must be finite, ≥ 0 and not before `previous` (µs). Errors name the field and the problem.
absl::StatusOr<TraceEvent> parse_trace_event(const boost::json::value& v, Micros previous);

}  // namespace floodgate
