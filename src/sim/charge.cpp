// A log's requests limited two ways on simulated time: charged after the response, and reserved
// then settled. Both run through the real Limiter; only the figures are computed here.
#include "floodgate/sim/charge.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <queue>

#include <fmt/format.h>

#include "absl/container/flat_hash_map.h"
#include "floodgate/limiter.hpp"
#include "floodgate/memory_storage.hpp"
#include "floodgate/sim/simulate.hpp"
#include "sim/lanes.hpp"
#include "util/text.hpp"

namespace floodgate {

namespace {

constexpr Micros kMaxDuration = Micros{23} * 3600 * kMicrosPerSecond;
// The charged-after mode settles ids never reserved, each once: its store does not remember them
// (remember_unknown_settles), and its table stays empty.
constexpr std::size_t kChargedAfterIds = 1024;
// Expired reservations are erased every so many requests (MemoryStorage::maintain).
constexpr std::int64_t kMaintainEvery = 4096;

// The end of an admitted request, due at `at`; requests that end at one µs end in the order they
// started (`seq`).
struct End {
  Micros at;
  std::int64_t seq;
  std::string key;
  std::int64_t cost;
};
struct EndsLater {
  bool operator()(const End& a, const End& b) const noexcept {
    return a.at != b.at ? a.at > b.at : a.seq > b.seq;
  }
};

// a + b for b ≥ 0, saturating at 2^63 − 1: the totals of a log's costs (each at most 2^53) never
// wrap (1,024 lines of 2^53 reach 2^63); a saturated figure reads 9223372036854775807.
std::int64_t plus(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? std::numeric_limits<std::int64_t>::max() : sum;
}

// A key's usage in the period it was last admitted in.
struct KeyPeriod {
  Micros start = 0;
  std::int64_t usage = 0;
};

// A key's last actual costs, for the `mean` estimate.
struct Recent {
  std::array<std::int64_t, kEstimateWindow> costs{};
  std::size_t size = 0;
  std::size_t next = 0;

  void add(std::int64_t c) {
    costs[next] = c;
    next = (next + 1) % costs.size();
    size = std::min(size + 1, costs.size());
  }
  [[nodiscard]] std::int64_t mean_up() const {
    std::int64_t sum = 0;  // at most 8 × 2^53: no overflow
    for (std::size_t i = 0; i < size; ++i) sum += costs[i];
    const auto n = static_cast<std::int64_t>(size);
    return (sum + n - 1) / n;
  }
};

struct Mode {
  std::shared_ptr<MemoryStorage> storage;
  std::unique_ptr<Limiter> limiter;
  ChargeFigures figures;
  std::priority_queue<End, std::vector<End>, EndsLater> ends;
  absl::flat_hash_map<std::string, KeyPeriod> usage;
  absl::flat_hash_map<std::string, Recent> recent;  // kReserved with a `mean` estimate
  std::vector<std::int64_t> bins;
};

struct Row {
  Policy policy;
  Limit first;
  ChargeRow out;
  std::array<Mode, 2> modes;  // by ChargeMode
  Micros periods_per_bin = 1;
  std::size_t bins_used = 0;
};

class Simulation final : public ChargeSimulation {
 public:
  absl::Status init(const ChargeOptions& o);
  absl::Status add(Micros start, Micros duration, std::string_view key, std::int64_t cost) override;
  absl::StatusOr<ChargeResult> finish() override;

 private:
  absl::Status end_until(Row& row, ChargeMode m, Micros t);
  absl::Status start(Row& row, ChargeMode m, Micros t, Micros duration, std::string_view key, std::int64_t cost);
  void count(Row& row, Mode& mode, Micros t, std::string_view key, std::int64_t cost);
  void close_period(Row& row, Mode& mode, const KeyPeriod& p);
  std::size_t bin_of(Row& row, Micros period_start);

  ChargeOptions options_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(0);
  std::vector<Row> rows_;
  std::vector<std::string> skipped_;
  absl::flat_hash_map<std::string, bool> keys_;
  std::int64_t requests_ = 0;
  Micros first_ = 0, last_start_ = 0, last_end_ = 0;
  bool finished_ = false;
};

absl::Status Simulation::init(const ChargeOptions& o) {
  options_ = o;
  options_.columns = std::max<std::size_t>(16, o.columns);
  if (o.limits.empty()) return absl::InvalidArgumentError("no limit: give at least one --limit");
  if (o.check_cost != 0 && o.check_cost != 1) {
    return absl::InvalidArgumentError(fmt::format("--check-cost {}: give 1 (usage < limit) or 0 (usage ≤ limit)", o.check_cost));
  }
  if (o.estimate.units < 0 || o.estimate.units > kMaxAmount) {
    return absl::InvalidArgumentError(fmt::format("estimate {} is out of range (0 to 2^53)", o.estimate.units));
  }
  auto specs = sim::lane_specs(o.limits, o.lanes, o.burst, &skipped_);
  if (!specs.ok()) return specs.status();
  for (sim::LaneSpec& spec : *specs) {
    Row row{std::move(spec.policy), spec.first, {}, {}, 1, 0};
    row.out.limit = std::move(spec.limit);
    row.out.lane = std::move(spec.lane);
    row.out.policy = std::move(spec.description);
    row.out.amount = row.first.amount;
    row.out.period = row.first.period;
    for (ChargeMode mode : {ChargeMode::kChargedAfter, ChargeMode::kReserved}) {
      Mode& m = row.modes[static_cast<std::size_t>(mode)];
      MemoryStorageOptions storage;
      storage.max_reservations = mode == ChargeMode::kReserved ? o.max_reservations : kChargedAfterIds;
      storage.remember_unknown_settles = mode == ChargeMode::kReserved;
      m.storage = std::make_shared<MemoryStorage>(storage);
      m.limiter = std::make_unique<Limiter>(m.storage, clock_);
      m.bins.assign(options_.columns, 0);
    }
    rows_.push_back(std::move(row));
  }
  return absl::OkStatus();
}

std::size_t Simulation::bin_of(Row& row, Micros period_start) {
  const Micros period = std::max<Micros>(1, row.first.period);
  for (;;) {
    const auto i = static_cast<std::size_t>((period_start - row.out.bin_start) / (period * row.periods_per_bin));
    if (i < options_.columns) {
      row.bins_used = std::max(row.bins_used, i + 1);
      return i;
    }
    for (Mode& m : row.modes) {  // halve the resolution: neighbours merge, keeping the larger
      for (std::size_t j = 0; j < m.bins.size(); ++j) {
        m.bins[j] = j * 2 < m.bins.size() ? std::max(m.bins[2 * j], m.bins[2 * j + 1]) : 0;
      }
    }
    row.bins_used = (row.bins_used + 1) / 2;
    row.periods_per_bin *= 2;
  }
}

void Simulation::close_period(Row& row, Mode& mode, const KeyPeriod& p) {
  ChargeFigures& f = mode.figures;
  f.max_in_period = std::max(f.max_in_period, p.usage);
  if (const std::int64_t over = p.usage - row.first.amount; over > 0) {
    f.max_over = std::max(f.max_over, over);
    f.total_over = plus(f.total_over, over);
    ++f.periods_over;
  }
  std::int64_t& bin = mode.bins[bin_of(row, p.start)];
  bin = std::max(bin, p.usage);
}

// The actual cost of a request admitted at t, in the usage of t's period.
void Simulation::count(Row& row, Mode& mode, Micros t, std::string_view key, std::int64_t cost) {
  ++mode.figures.admitted;
  mode.figures.used = plus(mode.figures.used, cost);
  const Micros period = row.first.window_at(t).start;
  auto it = mode.usage.find(absl::string_view(key.data(), key.size()));
  if (it == mode.usage.end()) {
    it = mode.usage.emplace(std::string(key), KeyPeriod{period, 0}).first;
  } else if (it->second.start != period) {
    close_period(row, mode, it->second);
    it->second = {period, 0};
  }
  it->second.usage = plus(it->second.usage, cost);
}

absl::Status Simulation::end_until(Row& row, ChargeMode m, Micros t) {
  Mode& mode = row.modes[static_cast<std::size_t>(m)];
  while (!mode.ends.empty() && mode.ends.top().at <= t) {
    const End& e = mode.ends.top();
    clock_->set(e.at);
    // charged after: an id never reserved is charged now, past the limit if need be;
    // reserved: the reservation of the same id is settled.
    const std::string id = fmt::format("{}{}", m == ChargeMode::kReserved ? 'r' : 'c', e.seq);
    auto d = mode.limiter->settle(row.policy, e.key, id, e.cost);
    if (!d.ok()) return d.status();
    if (m == ChargeMode::kReserved && options_.estimate.mean) mode.recent[e.key].add(e.cost);
    mode.ends.pop();
  }
  return absl::OkStatus();
}

absl::Status Simulation::start(Row& row, ChargeMode m, Micros t, Micros duration, std::string_view key,
                               std::int64_t cost) {
  Mode& mode = row.modes[static_cast<std::size_t>(m)];
  clock_->set(t);
  bool admitted = false;
  if (m == ChargeMode::kChargedAfter) {
    auto d = mode.limiter->test(row.policy, key, options_.check_cost);
    if (!d.ok()) return d.status();
    admitted = d->allowed;
  } else {
    std::int64_t estimate = options_.estimate.units;
    if (options_.estimate.mean) {
      auto r = mode.recent.find(absl::string_view(key.data(), key.size()));
      if (r != mode.recent.end() && r->second.size > 0) estimate = r->second.mean_up();
    }
    const Micros ttl = std::max(kMinReservationTtl, duration + 1000);
    auto r = mode.limiter->reserve(row.policy, key, estimate, fmt::format("r{}", requests_), ttl);
    if (!r.ok()) {
      if (r.status().code() == absl::StatusCode::kResourceExhausted) {
        return absl::ResourceExhaustedError(fmt::format(
            "request {}: more than {} reservations in flight in one row (its private memory store's bound)",
            requests_, options_.max_reservations));
      }
      return r.status();
    }
    admitted = r->reserved();
  }
  if (!admitted) {
    ++mode.figures.denied;
    return absl::OkStatus();
  }
  count(row, mode, t, key, cost);
  mode.ends.push(End{t + duration, requests_, std::string(key), cost});
  return absl::OkStatus();
}

absl::Status Simulation::add(Micros t, Micros duration, std::string_view key, std::int64_t cost) {
  if (finished_) return absl::FailedPreconditionError("add after finish");
  if (absl::Status s = sim::check_event(static_cast<std::size_t>(requests_), t, requests_ ? last_start_ : 0, 0, cost, key);
      !s.ok()) {
    return s;
  }
  if (duration < 0 || duration > kMaxDuration) {
    return absl::InvalidArgumentError(
        fmt::format("event {}: the duration must be from 0 to 23 hours", requests_));
  }
  if (requests_ == 0) {
    first_ = t;
    for (Row& row : rows_) row.out.bin_start = row.first.window_at(t).start;
  }
  last_start_ = t;
  last_end_ = std::max(last_end_, t + duration);
  keys_.try_emplace(std::string(key), true);
  for (Row& row : rows_) {
    for (ChargeMode m : {ChargeMode::kChargedAfter, ChargeMode::kReserved}) {
      if (absl::Status s = end_until(row, m, t); !s.ok()) return s;
      if (absl::Status s = start(row, m, t, duration, key, cost); !s.ok()) return s;
    }
  }
  ++requests_;
  if (requests_ % kMaintainEvery == 0) {
    for (Row& row : rows_) {
      for (Mode& m : row.modes) m.storage->maintain(t);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ChargeResult> Simulation::finish() {
  if (finished_) return absl::FailedPreconditionError("finish called twice");
  finished_ = true;
  ChargeResult r;
  r.skipped = skipped_;
  r.requests = requests_;
  r.keys = static_cast<std::int64_t>(keys_.size());
  r.first = first_;
  r.last = last_end_;
  for (Row& row : rows_) {
    for (ChargeMode m : {ChargeMode::kChargedAfter, ChargeMode::kReserved}) {
      if (absl::Status s = end_until(row, m, kNever); !s.ok()) return s;
      Mode& mode = row.modes[static_cast<std::size_t>(m)];
      // Sums and maxima: the figures do not depend on the order the keys are closed in.
      for (const auto& [key, p] : mode.usage) close_period(row, mode, p);
    }
    row.out.after = row.modes[0].figures;
    row.out.reserved = row.modes[1].figures;
    row.out.bin_width = std::max<Micros>(1, row.first.period) * row.periods_per_bin;
    row.out.after_bins.assign(row.modes[0].bins.begin(), row.modes[0].bins.begin() + static_cast<std::ptrdiff_t>(row.bins_used));
    row.out.reserved_bins.assign(row.modes[1].bins.begin(), row.modes[1].bins.begin() + static_cast<std::ptrdiff_t>(row.bins_used));
    r.rows.push_back(std::move(row.out));
  }
  return r;
}

}  // namespace

std::string_view charge_mode_name(ChargeMode m) noexcept {
  return m == ChargeMode::kChargedAfter ? "charged after" : "reserved+settled";
}

absl::StatusOr<Estimate> Estimate::parse(std::string_view text) {
  const std::string_view t = text::trim(text);
  Estimate e;
  std::string_view number = t;
  if (t.starts_with("mean:")) {
    e.mean = true;
    number = t.substr(5);
  }
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), e.units);
  if (number.empty() || ec != std::errc() || end != number.data() + number.size() || e.units < 0 ||
      e.units > kMaxAmount) {
    return absl::InvalidArgumentError(fmt::format(
        "--estimate \"{}\": give N (units reserved by every request, a whole number from 0 to 2^53) or mean:N "
        "(the mean of the key's last {} actual costs, N before any is known)",
        text, kEstimateWindow));
  }
  return e;
}

std::string Estimate::describe() const {
  if (!mean) return std::to_string(units);
  return fmt::format("mean of the key's last {} ({} before)", kEstimateWindow, units);
}

absl::StatusOr<std::unique_ptr<ChargeSimulation>> ChargeSimulation::make(const ChargeOptions& options) {
  auto sim = std::make_unique<Simulation>();
  if (absl::Status s = sim->init(options); !s.ok()) return s;
  return std::unique_ptr<ChargeSimulation>(std::move(sim));
}

std::string format_charge_table(const ChargeResult& r, std::string_view source, const Estimate& estimate) {
  std::string out = fmt::format("{} request{} over {} s, the last end included ({}), {} key{}; estimate {}\n",
                                r.requests, r.requests == 1 ? "" : "s", format_seconds(r.last - r.first), source,
                                r.keys, r.keys == 1 ? "" : "s", estimate.describe());
  std::string limit;
  for (const ChargeRow& row : r.rows) {
    if (row.limit != limit || &row == &r.rows.front()) {
      limit = row.limit;
      const std::string per = fmt::format("max in {}s", format_seconds(row.period));
      out += fmt::format("limit {} (usage per key and period of {} units in {} s)\n", limit, row.amount,
                         format_seconds(row.period));
      out += fmt::format("{:<24} {:<17} {:>9} {:>9} {:>12} {:>14} {:>12} {:>14}\n", "strategy", "mode", "admitted",
                         "denied", "used", per, "over (max)", "over (total)");
    }
    for (ChargeMode m : {ChargeMode::kChargedAfter, ChargeMode::kReserved}) {
      const ChargeFigures& f = m == ChargeMode::kChargedAfter ? row.after : row.reserved;
      out += fmt::format("{:<24} {:<17} {:>9} {:>9} {:>12} {:>14} {:>12} {:>14}\n", row.lane, charge_mode_name(m),
                         f.admitted, f.denied, f.used, f.max_in_period, f.max_over, f.total_over);
    }
  }
  return out;
}

}  // namespace floodgate
