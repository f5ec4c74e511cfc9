// floodgate/sim/concurrency.hpp — a concurrency limit ("N concurrent for T") on traffic whose
// requests last: each request holds a lease from its start to its end. What
// `floodgate simulate --concurrency N` runs and draws; docs/simulate.md, "Requests in progress".
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "floodgate/clock.hpp"
#include "floodgate/sim/simulate.hpp"
#include "floodgate/trace_event.hpp"

namespace floodgate {

/// The longest request a concurrency lane takes (23 hours, as `--charge`).
inline constexpr Micros kMaxRequestDuration = Micros{23} * 3600 * kMicrosPerSecond;

/// A lease's time to live when none is given: a day, longer than any request, so that every
/// lease is released by its request's end rather than freeing itself.
inline constexpr Micros kSimLeaseTtl = Micros{24} * 3600 * kMicrosPerSecond;

struct ConcurrencyOptions {
  /// N: the most requests of one key in progress at once (`--concurrency`), 1 to 2^53.
  std::int64_t limit = 0;
  /// T: a lease frees itself T after its start if its request has not ended (`--lease-ttl`),
  /// 1 µs to 2^53 µs.
  Micros lease_ttl = kSimLeaseTtl;
  /// The duration of a request without its own (`--duration`); negative = none: then every
  /// request needs one.
  Micros default_duration = -1;
  /// Bound on the trace length.
  std::size_t max_events = 1'000'000;
};

/// The leases held by one key from `t` on (until the next change).
struct HeldChange {
  Micros t = 0;
  std::int64_t held = 0;
};

/// One request's lease: when it ended — its request's end, or its start + T when it freed itself
/// first (`expired`). A denied request held none: `end` is its start, `expired` false.
struct LeaseSpan {
  Micros end = 0;
  bool expired = false;
};

struct ConcurrencyLane {
  /// name "concurrency", policy e.g. "concurrency 4 concurrent for 1 day"; one step per request:
  /// admitted or not, level = the key's leases held after the decision, capacity = N.
  SimLane lane;
  std::int64_t limit = 0;      ///< N
  Micros lease_ttl = 0;        ///< T
  std::int64_t max_held = 0;   ///< the most leases one key held at once (≤ N)
  std::int64_t expired = 0;    ///< leases that freed themselves at T before their request ended
  /// The key whose leases `held` follows: the busiest (most requests; the first seen on a tie).
  std::string key;
  std::int64_t keys = 0;       ///< distinct keys
  /// `key`'s leases held over time: a change at every start it admitted and every end or expiry
  /// of its leases, in time order (several at one µs: the last one is the level from then on).
  std::vector<HeldChange> held;
  /// One per request, in the trace's order (every key's).
  std::vector<LeaseSpan> spans;
  Micros last = 0;             ///< the last end or expiry
};

/// Runs `trace` (times not decreasing, as `simulate`) through a concurrency policy with the real
/// Limiter on a private MemoryStorage and a ManualClock: at a request's start Limiter::acquire
/// (denied: the request is dropped), at its end (start + its duration) Lease::release. Events at
/// one µs: ends first (in the order their requests started), then starts (in the trace's order).
/// Each request takes one lease, whatever its cost. `durations` is empty (every request lasts
/// `default_duration`) or one per event (a negative one: the event has none, `default_duration`
/// is used). Errors (InvalidArgument): N or T out of range, naming `--concurrency` / `--lease-ttl`;
/// an event without a duration when there is no default, or one out of 0 to 23 hours, naming the
/// event and `--duration`; as `simulate` for the events themselves.
absl::StatusOr<ConcurrencyLane> simulate_concurrency(const ConcurrencyOptions& options,
                                                     std::span<const TraceEvent> trace,
                                                     std::span<const Micros> durations = {});

/// The text `floodgate simulate --concurrency` prints.
std::string format_concurrency_table(const ConcurrencyLane& c, std::string_view source);

/// The lane as a standalone SVG document body (no XML declaration): a dot per admitted request, a
/// cross per denied one at its start, and under them the leases `key` holds over time (a step
/// line) against the limit N (a dashed line). Times are drawn from the first request's start.
std::string render_concurrency_svg(const ConcurrencyLane& c, std::span<const TraceEvent> trace,
                                   std::string_view title);

/// A self-contained HTML page: the title, `notes`, the table and the chart.
std::string render_concurrency_html(const ConcurrencyLane& c, std::span<const TraceEvent> trace,
                                    std::string_view title, const std::string& table,
                                    const std::vector<std::string>& notes);

}  // namespace floodgate
