// A simulation fed one request at a time, with figures that do not grow with the requests.
#include "floodgate/sim/stream.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "absl/container/flat_hash_map.h"
#include "floodgate/limiter.hpp"
#include "floodgate/memory_storage.hpp"
#include "sim/lanes.hpp"

namespace floodgate {

namespace {

// Keeps the requests of `focus` among `marked` (none when it is empty), and the same ones of each
// row's decisions in `marks` (in `marked`'s order).
void keep_focus(std::string_view focus, std::vector<TraceEvent>& marked, const std::vector<std::vector<SimStep>*>& marks) {
  std::vector<std::size_t> keep;
  for (std::size_t i = 0; i < marked.size(); ++i) {
    if (!focus.empty() && marked[i].key == focus) keep.push_back(i);
  }
  std::vector<TraceEvent> events;
  for (std::size_t i : keep) events.push_back(std::move(marked[i]));
  marked = std::move(events);
  for (std::vector<SimStep>* m : marks) {
    std::vector<SimStep> steps;
    for (std::size_t i : keep) steps.push_back((*m)[i]);
    *m = std::move(steps);
  }
}

constexpr Micros kFirstBinWidth = 1000;  // 1 ms
constexpr std::size_t kSweepEvery = std::size_t{1} << 16;

// The admitted requests of one key in one row within the row's period: the running sums over the
// last period and over the last burst span give max_in_period and worst_burst as summarize() does.
struct Window {
  std::vector<std::pair<Micros, std::int64_t>> q;
  std::size_t head = 0, burst_head = 0;
  std::int64_t sum = 0, burst_sum = 0;

  void admit(Micros t, std::int64_t cost, LaneSummary& s) {
    // The burst span is at most the period: what leaves the period has left the burst span.
    while (burst_head < q.size() && t - q[burst_head].first >= s.burst_span) burst_sum -= q[burst_head++].second;
    while (head < burst_head && t - q[head].first >= s.period) sum -= q[head++].second;
    if (head > 32 && head * 2 > q.size()) {  // drop what left the period
      q.erase(q.begin(), q.begin() + static_cast<std::ptrdiff_t>(head));
      burst_head -= head;
      head = 0;
    }
    q.emplace_back(t, cost);
    sum += cost;
    burst_sum += cost;
    s.max_in_period = std::max(s.max_in_period, sum);
    s.worst_burst = std::max(s.worst_burst, burst_sum);
  }
};

struct InFlight {
  Micros last_admitted = 0;
  std::vector<Window> rows;
};

struct KeyStats {
  std::int64_t requests = 0;
  std::unique_ptr<std::int64_t[]> blocked;  // per row, from the key's first blocked request
};

struct Row {
  Policy policy;
  std::unique_ptr<Limiter> limiter;
  StreamRow out;
};

class Simulation final : public StreamingSimulation {
 public:
  absl::Status init(const StreamOptions& o);
  absl::Status add(Micros t, std::string_view key, std::int64_t cost) override;
  StreamResult result() const override;

 private:
  std::size_t bin_of(Micros t);
  absl::Status decide(Row& row, std::size_t r, Micros t, std::string_view key, std::int64_t cost,
                      KeyStats& ks, InFlight*& flight, std::size_t bin, bool mark);
  void stop_marking_all();
  void sweep(Micros now);

  StreamOptions options_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(0);
  std::vector<Row> rows_;
  Micros max_period_ = 0;
  absl::flat_hash_map<std::string, KeyStats> keys_;
  absl::flat_hash_map<std::string, InFlight> in_flight_;
  std::int64_t requests_ = 0;
  Micros first_ = 0, last_ = 0, width_ = kFirstBinWidth;
  std::vector<TraceEvent> marked_;
  bool all_marked_ = true;
  std::vector<std::string> skipped_;
};

absl::Status Simulation::init(const StreamOptions& o) {
  options_ = o;
  options_.columns = std::max<std::size_t>(16, o.columns);
  if (o.limits.empty()) return absl::InvalidArgumentError("no limit: give at least one --limit");
  auto specs = sim::lane_specs(o.limits, o.lanes, o.burst, &skipped_);
  if (!specs.ok()) return specs.status();
  for (sim::LaneSpec& spec : *specs) {
    MemoryStorageOptions storage;
    storage.max_log_bytes = o.max_log_bytes;
    Row row{std::move(spec.policy), std::make_unique<Limiter>(std::make_shared<MemoryStorage>(storage), clock_), {}};
    row.out.limit = std::move(spec.limit);
    row.out.lane = std::move(spec.lane);
    row.out.policy = std::move(spec.description);
    const Limit& first = spec.first;
    row.out.summary.period = first.period;
    row.out.summary.burst_span = std::max<Micros>(1, (first.period + first.amount - 1) / std::max<std::int64_t>(1, first.amount));
    row.out.bins.assign(options_.columns, {});
    max_period_ = std::max(max_period_, first.period);
    rows_.push_back(std::move(row));
  }
  return absl::OkStatus();
}

// The bin of t, doubling the bin width (merging neighbours) until t fits.
std::size_t Simulation::bin_of(Micros t) {
  while (static_cast<std::size_t>((t - first_) / width_) >= options_.columns) {
    for (Row& row : rows_) {
      std::vector<BinCount>& b = row.out.bins;
      for (std::size_t i = 0; i < b.size(); ++i) {
        b[i] = i * 2 < b.size() ? BinCount{b[2 * i].allowed + b[2 * i + 1].allowed, b[2 * i].blocked + b[2 * i + 1].blocked}
                                : BinCount{};
      }
    }
    width_ *= 2;
  }
  return static_cast<std::size_t>((t - first_) / width_);
}

absl::Status Simulation::add(Micros t, std::string_view key, std::int64_t cost) {
  if (absl::Status s = sim::check_event(static_cast<std::size_t>(requests_), t, requests_ ? last_ : 0, 0, cost, key); !s.ok()) {
    return s;
  }
  if (requests_ == 0) first_ = t;
  last_ = t;
  ++requests_;
  clock_->set(t);
  const std::size_t bin = bin_of(t);
  auto it = keys_.find(absl::string_view(key.data(), key.size()));
  if (it == keys_.end()) it = keys_.emplace(std::string(key), KeyStats{}).first;
  KeyStats& ks = it->second;
  ++ks.requests;
  if (all_marked_ && static_cast<std::size_t>(requests_) > options_.max_marks) stop_marking_all();
  const bool mark = all_marked_ || (key == options_.focus && marked_.size() < options_.max_marks);
  if (mark) marked_.push_back({t - first_, std::string(key), cost});
  InFlight* flight = nullptr;
  for (std::size_t r = 0; r < rows_.size(); ++r) {
    if (absl::Status s = decide(rows_[r], r, t, key, cost, ks, flight, bin, mark); !s.ok()) return s;
  }
  if (requests_ % kSweepEvery == 0) sweep(t);
  return absl::OkStatus();
}

absl::Status Simulation::decide(Row& row, std::size_t r, Micros t, std::string_view key, std::int64_t cost,
                                KeyStats& ks, InFlight*& flight, std::size_t bin, bool mark) {
  auto d = row.limiter->hit(row.policy, key, cost);
  // The private memory store fails only past its bound on moving-window logs (max_log_bytes).
  if (!d.ok()) return d.status();
  const bool allowed = d->allowed;
  StreamRow& out = row.out;
  if (allowed) {
    ++out.summary.allowed;
    ++out.bins[bin].allowed;
    if (cost > 0) {
      if (flight == nullptr) {
        auto f = in_flight_.find(absl::string_view(key.data(), key.size()));
        if (f == in_flight_.end()) f = in_flight_.emplace(std::string(key), InFlight{0, std::vector<Window>(rows_.size())}).first;
        flight = &f->second;
        flight->last_admitted = t;
      }
      flight->rows[r].admit(t, cost, out.summary);
    }
  } else {
    ++out.summary.blocked;
    ++out.bins[bin].blocked;
    const std::int64_t day_us = 86'400 * kMicrosPerSecond;
    ++out.blocked_by_hour[static_cast<std::size_t>((t % day_us) / (3600 * kMicrosPerSecond))];
    if (!ks.blocked) ks.blocked = std::make_unique<std::int64_t[]>(rows_.size());
    if (ks.blocked[r]++ == 0) ++out.keys_blocked;
  }
  if (mark) out.marks.push_back(sim::step_of(row.policy, *d));
  return absl::OkStatus();
}

// Past max_marks requests, only the focus key's stay.
void Simulation::stop_marking_all() {
  all_marked_ = false;
  std::vector<std::vector<SimStep>*> marks;
  for (Row& row : rows_) marks.push_back(&row.out.marks);
  keep_focus(options_.focus, marked_, marks);
}

// Forgets the admitted requests of keys idle for longer than every period.
void Simulation::sweep(Micros now) {
  absl::erase_if(in_flight_, [&](const auto& kv) { return now - kv.second.last_admitted >= max_period_; });
}

StreamResult Simulation::result() const {
  StreamResult r;
  r.skipped = skipped_;
  r.requests = requests_;
  r.keys = static_cast<std::int64_t>(keys_.size());
  r.first = first_;
  r.last = last_;
  r.bin_width = width_;
  r.bins = requests_ == 0 ? 0 : static_cast<std::size_t>((last_ - first_) / width_) + 1;
  for (const Row& row : rows_) {
    r.rows.push_back(row.out);
    r.rows.back().bins.resize(r.bins);
  }
  r.marked = marked_;
  r.all_marked = all_marked_;
  if (all_marked_ && !options_.focus.empty()) {  // a focus draws its key alone, at any size
    std::vector<std::vector<SimStep>*> marks;
    for (StreamRow& row : r.rows) marks.push_back(&row.marks);
    keep_focus(options_.focus, r.marked, marks);
    r.all_marked = false;
  }
  std::vector<std::pair<std::int64_t, const std::string*>> blocked;
  for (const auto& [key, ks] : keys_) {
    if (!ks.blocked) continue;
    blocked.emplace_back(*std::max_element(ks.blocked.get(), ks.blocked.get() + rows_.size()), &key);
  }
  const std::size_t n = std::min(options_.top_keys, blocked.size());
  std::partial_sort(blocked.begin(), blocked.begin() + static_cast<std::ptrdiff_t>(n), blocked.end(),
                    [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : *a.second < *b.second; });
  for (std::size_t i = 0; i < n; ++i) {
    const KeyStats& ks = keys_.find(*blocked[i].second)->second;
    r.top.push_back({*blocked[i].second, ks.requests, std::vector<std::int64_t>(ks.blocked.get(), ks.blocked.get() + rows_.size())});
  }
  return r;
}

}  // namespace

absl::StatusOr<std::unique_ptr<StreamingSimulation>> StreamingSimulation::make(const StreamOptions& options) {
  auto s = std::make_unique<Simulation>();
  if (absl::Status st = s->init(options); !st.ok()) return st;
  return std::unique_ptr<StreamingSimulation>(std::move(s));
}

std::vector<SimLane> marked_lanes(const StreamResult& r) {
  std::vector<SimLane> out;
  for (const StreamRow& row : r.rows) {
    SimLane lane;
    lane.name = row.lane;
    lane.policy = row.policy;
    lane.steps = row.marks;
    for (const SimStep& s : row.marks) (s.allowed ? lane.allowed : lane.blocked) += 1;
    out.push_back(std::move(lane));
  }
  return out;
}

}  // namespace floodgate
