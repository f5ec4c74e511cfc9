// floodgate/trace_event.hpp — one request of a trace, as `floodgate replay`, `floodgate simulate`
// and POST /v1/simulate read it.
#pragma once

#include <cstdint>
#include <string>

#include "floodgate/clock.hpp"

namespace floodgate {

/// One request of a trace: at `t` (µs, relative to the trace's origin), `cost` units for `key`.
struct TraceEvent {
  Micros t = 0;
  std::string key;
  std::int64_t cost = 1;

  friend bool operator==(const TraceEvent&, const TraceEvent&) = default;
};

}  // namespace floodgate
