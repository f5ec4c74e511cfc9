// floodgate/sim/charge.hpp — costs known only after the response (an LLM's tokens), limited two
// ways side by side on a log's requests: charged after the response, as gateways commonly do, and
// reserved at an estimate then settled (docs/algorithms.md, "Reservations"). What
// `floodgate simulate --charge` runs; docs/simulate.md, "Costs known after the response".
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "floodgate/clock.hpp"

namespace floodgate {

/// How many of a key's last actual costs the `mean` estimate averages.
inline constexpr std::size_t kEstimateWindow = 8;

/// What a request reserves in the reserved mode.
///   "N"       N units for every request
///   "mean:N"  the mean of the key's last kEstimateWindow actual costs known at the request's
///             start (requests of that key already settled in this mode), rounded up; N while
///             none is known
/// N is a whole number from 0 to 2^53.
struct Estimate {
  std::int64_t units = 0;  ///< the fixed estimate, or the first one of a key with `mean`
  bool mean = false;
  /// Errors: InvalidArgument quoting the text and giving the two forms.
  static absl::StatusOr<Estimate> parse(std::string_view text);
  /// "100", "mean of the key's last 8 (100 before)".
  [[nodiscard]] std::string describe() const;
};

/// The two ways a request of actual cost `c`, from `start` to `start + duration`, is limited.
///  - kChargedAfter (LiteLLM's and Envoy AI Gateway's token limits): at the start the policy is
///    tested with a cost of `check_cost` (ChargeOptions; 1 by default: admitted while the key has
///    room for one more unit, i.e. its usage is under the limit) and nothing is taken; at the end
///    `c` is charged to the state at the end's time, always, even past the limit
///    (Limiter::settle of an id never reserved).
///  - kReserved: at the start the estimate is reserved (Limiter::reserve: admitted only if it
///    fits); at the end the reservation is settled with `c` (Limiter::settle: a refund, or the
///    difference taken even past the limit).
enum class ChargeMode { kChargedAfter, kReserved };
std::string_view charge_mode_name(ChargeMode m) noexcept;  ///< "charged after", "reserved+settled"

struct ChargeOptions {
  /// Policies in the rate notation, one row per (limit, lane), as StreamOptions::limits. The
  /// usage is measured against the first limit of each.
  std::vector<std::string> limits;
  std::int64_t burst = 0;          ///< as SimulateOptions::burst
  std::vector<std::string> lanes;  ///< from parse_lanes; empty = all
  Estimate estimate;
  /// The cost the charged-after mode tests at the start: 1 (admitted while usage < limit, as
  /// LiteLLM denies at usage ≥ limit) or 0 (admitted while usage ≤ limit, as a rate limit service
  /// asked with hits_addend 0).
  std::int64_t check_cost = 1;
  /// Bins of the chart per row, at least 16: a bin holds one period of the row's first limit,
  /// or 2, 4, … when the log spans more periods than there are bins.
  std::size_t columns = 120;
  /// Bound on the reservations each row's private MemoryStorage holds (in flight, and settled
  /// within their time to live of duration + 1 ms); past it `add` fails with ResourceExhausted.
  std::size_t max_reservations = std::size_t{1} << 16;
};

/// What one mode of one row admitted. The usage of a request is its actual cost, counted in the
/// period of the row's first limit (Limit::window_at: clock-aligned, or the calendar's) that holds
/// the request's start — the admission that let it through — per key.
struct ChargeFigures {
  std::int64_t admitted = 0;       ///< requests admitted at their start
  std::int64_t denied = 0;
  std::int64_t used = 0;           ///< units: the actual costs of the admitted requests
  std::int64_t max_in_period = 0;  ///< the most units one key used in one period
  /// max(0, max_in_period − N), N the first limit's amount: the worst overshoot.
  std::int64_t max_over = 0;
  /// Σ over (key, period) of max(0, usage − N): every unit admitted above the limit.
  std::int64_t total_over = 0;
  std::int64_t periods_over = 0;   ///< (key, period) pairs whose usage passed N
};

struct ChargeRow {
  std::string limit;   ///< as given
  std::string lane;    ///< a lane name (simulation_lanes)
  std::string policy;  ///< Policy::describe() without the name
  std::int64_t amount = 0;  ///< N, the first limit's amount
  Micros period = 0;        ///< the first limit's period (nominal for a calendar limit)
  ChargeFigures after;      ///< ChargeMode::kChargedAfter
  ChargeFigures reserved;   ///< ChargeMode::kReserved
  /// The chart: per bin, the most units one key used in one period starting in it, per mode.
  /// Bin i covers [bin_start + i·bin_width, bin_start + (i+1)·bin_width).
  Micros bin_start = 0;
  Micros bin_width = 0;
  std::vector<std::int64_t> after_bins, reserved_bins;  ///< the bins in use (same size)
};

struct ChargeResult {
  std::int64_t requests = 0;
  std::int64_t keys = 0;
  Micros first = 0;  ///< the first start (µs since the epoch, or log time)
  Micros last = 0;   ///< the last end
  std::vector<ChargeRow> rows;
  /// The lanes left out, each with why (a calendar limit runs on the fixed window only).
  std::vector<std::string> skipped;
};

/// Runs requests through every row twice (one private MemoryStorage and Limiter per row and mode,
/// on a shared ManualClock): requests are fed in the order of their starts; each admitted one's
/// end is an event at start + duration. Events at one µs: ends first (in the order their requests
/// started), then starts (in the log's order) — a response that ends at t has been charged when a
/// request at t is decided. Memory: the requests in flight, and per distinct key its current
/// period's usage per row and mode (and its last costs with `mean`).
class ChargeSimulation {
 public:
  /// Errors (InvalidArgument): no limit, a bad limit (quoted), burst, lane or check_cost.
  static absl::StatusOr<std::unique_ptr<ChargeSimulation>> make(const ChargeOptions& options);
  virtual ~ChargeSimulation() = default;
  /// A request starting at `start` (µs, not before the previous start) for `duration` µs (0 to
  /// 23 h) of actual cost `cost` (0 to 2^53). Errors: InvalidArgument naming the bad value (as
  /// StreamingSimulation::add); ResourceExhausted past ChargeOptions::max_reservations.
  virtual absl::Status add(Micros start, Micros duration, std::string_view key, std::int64_t cost) = 0;
  /// Ends every request still in flight and returns the figures. Call once, after the last add.
  virtual absl::StatusOr<ChargeResult> finish() = 0;
};

/// The text table `floodgate simulate --charge` prints: per limit, per strategy a line per mode.
std::string format_charge_table(const ChargeResult& r, std::string_view source, const Estimate& estimate);

/// The chart as a standalone SVG document body (no XML declaration): per row, the most one key
/// used in a period over time, charged after (vermillion) and reserved (blue) side by side, against
/// the limit N (a dashed line). Its size depends on rows × bins, never on the requests.
std::string render_charge_svg(const ChargeResult& r, std::string_view title);

/// A self-contained HTML page: the title, `notes`, the table and the chart.
std::string render_charge_html(const ChargeResult& r, std::string_view title, const std::string& table,
                               const std::vector<std::string>& notes);

}  // namespace floodgate
