// floodgate/sim/simulate.hpp — run one trace through several strategies side by side (the playground
// of `floodgate serve` and `floodgate simulate`), generate traffic, summarise and draw the result.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "floodgate/clock.hpp"
#include "floodgate/policy.hpp"
#include "floodgate/sim/lanes.hpp"
#include "floodgate/trace_event.hpp"

namespace floodgate {

/// What to simulate. `limit` in the rate notation ("3/minute", "2/second; 10/minute");
/// `burst` is the bucket capacity of the bucket lanes (0 = the amount; ignored by window lanes).
/// `origin` is the wall-clock time (µs since the epoch) of the trace's t = 0: clock-aligned
/// windows align to it as a live service's would (0 = windows start at t = 0).
struct SimulateOptions {
  std::string limit;
  std::int64_t burst = 0;
  std::vector<std::string> lanes;  ///< from parse_lanes; empty = all
  Micros origin = 0;
  /// Bound on the trace length (the HTTP API uses kMaxSimulateEvents).
  std::size_t max_events = 1'000'000;
};

/// The HTTP API's bound on a trace.
inline constexpr std::size_t kMaxSimulateEvents = 10'000;

/// Runs `trace` through each lane's strategy with the real engine: a fresh private MemoryStorage
/// and a ManualClock set to origin + t before each request (Limiter::hit). Nothing is shared with
/// any other storage. Errors (InvalidArgument): a bad limit or burst (the message quotes it), an
/// unknown lane, more than `max_events` events, times that go backwards or are negative, a cost
/// out of [0, 2^53], an empty key — each naming the event ("event 12: …").
absl::StatusOr<std::vector<SimLane>> simulate(const SimulateOptions& options,
                                              std::span<const TraceEvent> trace);

/// The figures `floodgate simulate` prints for one lane.
///  - `max_in_period`: the most units admitted for one key within any interval [s, s + P) of the
///    first limit's period P — what a client actually got in "one period", wherever it starts.
///    A strategy that holds its limit exactly has max_in_period ≤ N; the clock-aligned fixed
///    window can reach 2N across a window edge.
///  - `worst_burst`: the most units admitted for one key within any interval [s, s + T) where
///    T = P / N, the emission interval (the gap between requests of an evenly paced client at the
///    full rate, so an even stream scores 1). It measures how bunched admitted requests can be.
struct LaneSummary {
  std::int64_t allowed = 0;
  std::int64_t blocked = 0;
  std::int64_t max_in_period = 0;
  std::int64_t worst_burst = 0;
  Micros period = 0;        ///< P
  Micros burst_span = 0;    ///< T = ⌈P / N⌉ (at least 1 µs)
};

/// Summarises a lane of `simulate` for the same trace; `first_limit` is the policy's first limit.
LaneSummary summarize(const SimLane& lane, std::span<const TraceEvent> trace,
                      std::int64_t amount, Micros period);

/// Traffic for `floodgate simulate --traffic SPEC`:
///   poisson:rate=R,duration=D[,key=K][,start=S]   arrivals of a Poisson process at rate R
///                                                 ("2/s", "120/minute", "1 per 2 seconds")
///                                                 from S (default 0) for D ("60s", "500ms", "2m")
///   burst:n=N,at=S[,key=K]                        N requests at once at time S
///   PATH                                          a JSONL trace file (the `floodgate replay`
///                                                 format; times relative to its first request)
/// Generated parts may be joined with '+' ("poisson:rate=2/s,duration=60s+burst:n=20,at=30s");
/// they are merged in time order. Keys default to "a", costs are 1. `seed` seeds the Poisson
/// generator (a 64-bit Mersenne Twister; the same seed gives the same trace on every platform).
/// Errors (InvalidArgument) quote the offending part: `traffic "poisson:rate=x": bad rate "x": …`.
absl::StatusOr<std::vector<TraceEvent>> make_traffic(std::string_view spec, std::uint64_t seed);

/// Reads a JSONL trace (`floodgate replay` format). Times become relative to the first request.
/// Errors: InvalidArgument "line N: <problem>".
absl::StatusOr<std::vector<TraceEvent>> read_trace(std::istream& in);

/// Draws the lanes as a standalone SVG document: per lane a row of admitted requests (filled
/// circles) and a row of blocked ones (crosses) on a shared time axis, the level drawn under them
/// as a step line (with several keys, the busiest key's, as the legend says), and the counts. Colours are the Okabe–Ito palette (colour-blind safe) and the
/// two kinds also differ in shape.
std::string render_svg(const std::vector<SimLane>& lanes, std::span<const TraceEvent> trace,
                       std::string_view title);

}  // namespace floodgate
