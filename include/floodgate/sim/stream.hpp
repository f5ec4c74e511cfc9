// floodgate/sim/stream.hpp — a simulation fed one request at a time, whose result does not grow
// with the number of requests: counts per time bin (a pixel column of the chart) per row, per-key
// figures for the keys that were blocked, and the requests themselves only for small traces and
// for one chosen key. What `floodgate simulate` runs on logs of any size.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "floodgate/sim/simulate.hpp"

namespace floodgate {

struct StreamOptions {
  /// One policy per entry, in the rate notation ("10/second", "10/second; 1000/hour"). Each is
  /// simulated with each lane: one row per (limit, lane), limits outer.
  std::vector<std::string> limits;
  std::int64_t burst = 0;          ///< as SimulateOptions::burst
  std::vector<std::string> lanes;  ///< from parse_lanes; empty = all
  /// Time bins of the chart, at least 16. The bin width starts at 1 ms and doubles (merging
  /// neighbours) whenever the trace outgrows them, so between half and all of them are in use.
  std::size_t columns = 600;
  /// Requests are kept one by one (with every row's decision) while there are at most this many;
  /// past it only those of `focus` are kept (and at most this many of them). With a `focus`, the
  /// result holds that key's requests alone, whatever the trace's size.
  std::size_t max_marks = 20'000;
  std::string focus;               ///< a key whose requests are always kept (empty = none)
  std::size_t top_keys = 15;       ///< how many keys StreamResult::top lists
  /// Bytes the moving-window logs of every row's private MemoryStorage may hold
  /// (MemoryStorageOptions::max_log_bytes, default 1 GiB each): past it `add` fails.
  std::size_t max_log_bytes = std::size_t{1} << 30;
};

/// Allowed and blocked requests of one row in one time bin.
struct BinCount {
  std::int64_t allowed = 0;
  std::int64_t blocked = 0;
};

struct StreamRow {
  std::string limit;   ///< as given
  std::string lane;    ///< a lane name
  std::string policy;  ///< Policy::describe() without the name, e.g. "gcra 3/minute burst 3"
  LaneSummary summary; ///< as summarize() gives for the whole trace, against the first limit
  std::vector<BinCount> bins;      ///< StreamResult::bins of them
  std::int64_t keys_blocked = 0;   ///< distinct keys with at least one blocked request
  std::array<std::int64_t, 24> blocked_by_hour{};  ///< by the hour of day (UTC) of the request
  std::vector<SimStep> marks;      ///< the decision of each StreamResult::marked request
};

struct StreamResult {
  std::int64_t requests = 0;
  std::int64_t keys = 0;       ///< distinct keys
  Micros first = 0;            ///< time of the first request (µs since the epoch, or trace time)
  Micros last = 0;
  Micros bin_width = 0;        ///< µs per bin; bin i covers [first + i·w, first + (i+1)·w)
  std::size_t bins = 0;        ///< bins in use (each row's bins.size())
  std::vector<StreamRow> rows;
  /// The requests kept one by one (t relative to `first`): all of them when `all_marked`, else
  /// only the focus key's (none when no request has it).
  std::vector<TraceEvent> marked;
  bool all_marked = false;
  struct TopKey {
    std::string key;
    std::int64_t requests = 0;
    std::vector<std::int64_t> blocked;  ///< per row
  };
  std::vector<TopKey> top;  ///< keys by the most blocked requests in any row, most first
  /// The lanes left out, each with why (a calendar limit runs on the fixed window only).
  std::vector<std::string> skipped;
};

/// Runs requests through every row with the real engine (Limiter on a private MemoryStorage and a
/// ManualClock set to each request's time), as simulate() does, keeping only bounded figures.
/// Memory: the storages' state of keys in flight, the window of admitted requests of each key in
/// flight (for max_in_period / worst_burst), and ~40 bytes per distinct key (its request count, and
/// for the keys ever blocked, a count per row) — never a record per request past max_marks.
class StreamingSimulation {
 public:
  /// Errors (InvalidArgument): no limit, a bad limit (quoted), burst or lane.
  static absl::StatusOr<std::unique_ptr<StreamingSimulation>> make(const StreamOptions& options);
  virtual ~StreamingSimulation() = default;
  /// One request at `t` (µs; not before the previous one). Errors: InvalidArgument for time going
  /// backwards or out of [0, 2^62], cost out of [0, 2^53], an empty key or one over 1024 bytes;
  /// ResourceExhausted when a moving-window row's logs would pass StreamOptions::max_log_bytes
  /// (the request is then decided in the rows before that one only: end the simulation there).
  virtual absl::Status add(Micros t, std::string_view key, std::int64_t cost) = 0;
  /// The figures so far.
  virtual StreamResult result() const = 0;
};

/// The lanes of a result as SimLane (with their marks as steps) and its marked requests, for
/// render_svg's per-request chart.
std::vector<SimLane> marked_lanes(const StreamResult& r);

/// The aggregated chart: per row a band of bars per time bin, allowed (green) up from the middle
/// line and blocked (vermillion, hatched) down from it, on a time axis with wall-clock labels when
/// the times are since the epoch. Its size depends on rows × bins, never on the requests.
std::string render_bins_svg(const StreamResult& r, std::string_view title);

/// A bin width for people: "250 ms", "1.5 s", "4.27 min", "2 h".
std::string format_bin(Micros width);

/// The self-contained HTML report (no network): the summary table, the aggregated chart, the
/// per-request chart when there are marks, the top keys by blocked requests, the share of keys
/// ever blocked and blocks by hour. `notes` are shown under the title (input, skipped lines).
std::string render_report_html(const StreamResult& r, std::string_view title,
                               const std::vector<std::string>& notes);

}  // namespace floodgate
