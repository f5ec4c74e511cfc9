// A concurrency limit on requests that last: a lease from each request's start to its end, taken
// and released through the real Limiter on simulated time; and the lane's chart.
#include "floodgate/sim/concurrency.hpp"

#include <algorithm>
#include <memory>
#include <queue>

#include <fmt/format.h>

#include "absl/container/flat_hash_map.h"
#include "floodgate/limiter.hpp"
#include "floodgate/memory_storage.hpp"
#include "floodgate/rate.hpp"
#include "sim/chart.hpp"
#include "sim/lanes.hpp"

namespace floodgate {

namespace {

// A lease's end, due at `at`: its request's end (released), or its time to live's (it frees
// itself). Ends at one µs come in the order their requests started (`seq`).
struct LeaseEnd {
  Micros at;
  std::size_t seq;
  bool expires;
};
struct EndsLater {
  bool operator()(const LeaseEnd& a, const LeaseEnd& b) const noexcept {
    return a.at != b.at ? a.at > b.at : a.seq > b.seq;
  }
};

// The busiest key: the most requests, the first seen on a tie.
std::string busiest_key(std::span<const TraceEvent> trace, std::int64_t& keys) {
  absl::flat_hash_map<std::string_view, std::size_t> counts;
  std::string_view best;
  std::size_t most = 0;
  for (const TraceEvent& e : trace) {
    const std::size_t n = ++counts[e.key];
    if (n > most) {
      most = n;
      best = e.key;
    }
  }
  keys = static_cast<std::int64_t>(counts.size());
  return std::string(best);
}

// The options and the trace, checked before anything is simulated.
absl::Status check_options(const ConcurrencyOptions& o, std::span<const TraceEvent> trace,
                           std::span<const Micros> durations) {
  if (o.limit < 1 || o.limit > kMaxAmount) {
    return absl::InvalidArgumentError(fmt::format(
        "--concurrency {}: give the most requests of one key in progress at once, a whole number from 1 to 2^53",
        o.limit));
  }
  if (o.lease_ttl < 1 || o.lease_ttl > kMaxAmount) {
    return absl::InvalidArgumentError(
        fmt::format("--lease-ttl: {} µs is out of range (1 µs to 2^53 µs)", o.lease_ttl));
  }
  if (o.default_duration > kMaxRequestDuration) {
    return absl::InvalidArgumentError("--duration: a request lasts at most 23 hours");
  }
  if (!durations.empty() && durations.size() != trace.size()) {
    return absl::InvalidArgumentError(
        fmt::format("{} durations for {} requests: give one per request", durations.size(), trace.size()));
  }
  if (trace.size() > o.max_events) {
    return absl::InvalidArgumentError(
        fmt::format("{} requests: at most {} in one concurrency lane", trace.size(), o.max_events));
  }
  return absl::OkStatus();
}

// Request `i`'s duration: its own, else the default; an error when neither is given.
absl::StatusOr<Micros> duration_of(const ConcurrencyOptions& o, std::span<const Micros> durations, std::size_t i) {
  const Micros d = durations.empty() || durations[i] < 0 ? o.default_duration : durations[i];
  if (d < 0) {
    return absl::InvalidArgumentError(
        fmt::format("event {}: no duration: give the request's duration, or --duration for every request without one", i));
  }
  if (d > kMaxRequestDuration) {
    return absl::InvalidArgumentError(fmt::format("event {}: the duration must be from 0 to 23 hours", i));
  }
  return d;
}

// One lane's run: the trace's requests take leases through a Limiter on a manual clock, and the
// leases end (released, or at their time to live) in time order; the figures go into `out`.
class LeaseRun {
 public:
  LeaseRun(const ConcurrencyOptions& o, const Policy& policy, std::span<const TraceEvent> trace, ConcurrencyLane& out)
      : o_(o), policy_(policy), trace_(trace), out_(out) {}

  // Request `i` starts (after every lease that ended by its start) and holds a lease for `d`.
  absl::Status start(std::size_t i, Micros d) {
    const TraceEvent& e = trace_[i];
    if (absl::Status s = end_until(e.t); !s.ok()) return s;
    clock_->set(e.t);
    auto lease = limiter_.acquire(policy_, e.key, 1, fmt::format("r{}", i));
    if (!lease.ok()) return lease.status();
    out_.lane.steps.push_back(sim::step_of(policy_, lease->decision()));
    out_.last = std::max(out_.last, e.t);
    if (!lease->held()) {
      ++out_.lane.blocked;
      out_.spans.push_back({e.t, false});
      return absl::OkStatus();
    }
    ++out_.lane.allowed;
    const std::int64_t now_held = ++held_[e.key];
    out_.max_held = std::max(out_.max_held, now_held);
    if (e.key == out_.key) out_.held.push_back({e.t, now_held});
    // A request that lasts its lease's time to live or longer outlives the lease.
    const bool expires = d >= o_.lease_ttl;
    ends_.push({e.t + (expires ? o_.lease_ttl : d), i, expires});
    out_.spans.push_back({e.t + (expires ? o_.lease_ttl : d), expires});
    leases_.emplace(i, *std::move(lease));
    return absl::OkStatus();
  }

  // Ends every lease due by `t`, in time order.
  absl::Status end_until(Micros t) {
    while (!ends_.empty() && ends_.top().at <= t) {
      const LeaseEnd e = ends_.top();
      ends_.pop();
      clock_->set(e.at);
      auto it = leases_.find(e.seq);
      if (e.expires) {
        ++out_.expired;  // the storage let it go at its time to live: nothing to release
        (void)it->second.release();
      } else if (auto d = it->second.release(); !d.ok()) {
        return d.status();
      }
      leases_.erase(it);
      const std::string_view key = trace_[e.seq].key;
      const std::int64_t now_held = --held_[key];
      if (key == out_.key) out_.held.push_back({e.at, now_held});
      out_.last = std::max(out_.last, e.at);
    }
    return absl::OkStatus();
  }

 private:
  const ConcurrencyOptions& o_;
  const Policy& policy_;
  std::span<const TraceEvent> trace_;
  ConcurrencyLane& out_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(0);
  Limiter limiter_{std::make_shared<MemoryStorage>(), clock_};
  std::priority_queue<LeaseEnd, std::vector<LeaseEnd>, EndsLater> ends_;
  absl::flat_hash_map<std::size_t, Lease> leases_;  // by request index
  absl::flat_hash_map<std::string_view, std::int64_t> held_;
};

}  // namespace

absl::StatusOr<ConcurrencyLane> simulate_concurrency(const ConcurrencyOptions& o, std::span<const TraceEvent> trace,
                                                     std::span<const Micros> durations) {
  if (absl::Status s = check_options(o, trace, durations); !s.ok()) return s;
  auto limit = Limit::concurrency(o.limit, o.lease_ttl);
  if (!limit.ok()) return limit.status();
  auto policy = Policy::make("concurrency", Strategy::kConcurrency, to_string(*limit));
  if (!policy.ok()) return policy.status();

  ConcurrencyLane out;
  out.limit = o.limit;
  out.lease_ttl = o.lease_ttl;
  out.lane.name = "concurrency";
  out.lane.policy = sim::describe_lane(*policy);
  out.key = busiest_key(trace, out.keys);
  out.lane.steps.reserve(trace.size());
  out.spans.reserve(trace.size());

  LeaseRun run(o, *policy, trace, out);
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const TraceEvent& e = trace[i];
    if (absl::Status s = sim::check_event(i, e.t, i > 0 ? trace[i - 1].t : 0, 0, e.cost, e.key); !s.ok()) return s;
    auto d = duration_of(o, durations, i);
    if (!d.ok()) return d.status();
    if (absl::Status s = run.start(i, *d); !s.ok()) return s;
  }
  if (absl::Status s = run.end_until(kNever); !s.ok()) return s;
  return out;
}

std::string format_concurrency_table(const ConcurrencyLane& c, std::string_view source) {
  std::string out = fmt::format("{} request{} ({}), {} key{}; {}\n", c.lane.steps.size(),
                                c.lane.steps.size() == 1 ? "" : "s", source, c.keys, c.keys == 1 ? "" : "s",
                                c.lane.policy);
  out += fmt::format("{:<24} {:>9} {:>9} {:>16} {:>9} {:>16}\n", "strategy", "admitted", "denied",
                     "max held per key", "limit", "freed at ttl");
  out += fmt::format("{:<24} {:>9} {:>9} {:>16} {:>9} {:>16}\n", c.lane.name, c.lane.allowed, c.lane.blocked,
                     c.max_held, c.limit, c.expired);
  return out;
}

namespace {

constexpr const char* kAllowed = sim::kAllowedColour;
constexpr const char* kBlocked = sim::kBlockedColour;
constexpr const char* kLevel = sim::kLevelColour;
constexpr double kLeft = 200;
constexpr double kTop = 56;
constexpr double kLaneHeight = 130;

}  // namespace

std::string render_concurrency_svg(const ConcurrencyLane& c, std::span<const TraceEvent> trace,
                                   std::string_view title) {
  const double plot = sim::kChartWidth - kLeft - sim::kChartRight;
  const Micros first = trace.empty() ? 0 : trace.front().t;
  const Micros span = std::max<Micros>(1, c.last - first);
  const double us_px = plot / (static_cast<double>(span) * 1.02);
  const auto x = [&](Micros t) { return kLeft + static_cast<double>(t - first) * us_px; };
  const double y0 = kTop;
  const double allowed_y = y0 + 16;
  const double blocked_y = y0 + 34;
  const double level_top = y0 + 56;
  const double level_bottom = y0 + kLaneHeight - 8;
  const double per_lease = (level_bottom - level_top) / static_cast<double>(std::max<std::int64_t>(1, c.limit));
  std::string key_note = c.keys > 1 ? fmt::format(" of key {} (the busiest of {})", sim::xml_escape(c.key), c.keys) : "";
  std::string out = sim::svg_open("concurrency-chart", kTop + kLaneHeight + 50, title);
  out += fmt::format(
      "<g><circle cx=\"16\" cy=\"38\" r=\"4\" fill=\"{0}\"/><text x=\"24\" y=\"42\">admitted</text>"
      "<path d=\"M92 34 l8 8 m0 -8 l-8 8\" stroke=\"{1}\" stroke-width=\"2\"/><text x=\"106\" y=\"42\">denied</text>"
      "<path d=\"M160 42 h8 v-6 h8\" fill=\"none\" stroke=\"{2}\" stroke-width=\"1.5\"/>"
      "<text x=\"182\" y=\"42\">leases held{3} over time; dashed: the limit</text></g>\n",
      kAllowed, kBlocked, kLevel, key_note);
  out += fmt::format(
      "<g class=\"lane\" data-lane=\"concurrency\">\n<rect x=\"{:.0f}\" y=\"{:.1f}\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "fill=\"#f4f4f4\"/>\n<text x=\"10\" y=\"{:.1f}\" font-weight=\"bold\">concurrency</text>\n"
      "<text x=\"10\" y=\"{:.1f}\" fill=\"#444\">{}</text>\n<text x=\"10\" y=\"{:.1f}\"><tspan fill=\"#00664a\">admitted "
      "{}</tspan>  <tspan fill=\"#a33d00\">denied {}</tspan></text>\n<text x=\"10\" y=\"{:.1f}\">max held {}</text>\n",
      kLeft, y0 + 2, plot, kLaneHeight - 4, y0 + 18, y0 + 34, sim::xml_escape(c.lane.policy), y0 + 50, c.lane.allowed,
      c.lane.blocked, y0 + 66, c.max_held);
  std::string allowed_path, blocked_path;
  double spread = 0;
  for (std::size_t k = 0; k < c.lane.steps.size() && k < trace.size(); ++k) {
    spread = k > 0 && trace[k].t == trace[k - 1].t ? std::min(spread + 3, 60.0) : 0;
    const double px = x(trace[k].t) + spread;
    if (c.lane.steps[k].allowed) {
      allowed_path += fmt::format("M{:.1f} {:.1f}a3 3 0 1 0 6 0a3 3 0 1 0 -6 0", px - 3, allowed_y);
    } else {
      blocked_path += fmt::format("M{:.1f} {:.1f}l6 6m0 -6l-6 6", px - 3, blocked_y - 3);
    }
  }
  std::string level = fmt::format("M{:.1f} {:.1f}", kLeft, level_bottom);
  for (const HeldChange& h : c.held) {
    level += fmt::format("H{:.1f}V{:.1f}", x(h.t), level_bottom - static_cast<double>(h.held) * per_lease);
  }
  level += fmt::format("H{:.1f}", kLeft + plot);
  out += fmt::format("<line x1=\"{0:.0f}\" x2=\"{1:.0f}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#ccc\"/>\n", kLeft,
                     kLeft + plot, level_bottom);
  out += fmt::format(
      "<line class=\"limit\" x1=\"{0:.0f}\" x2=\"{1:.0f}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#000\" "
      "stroke-dasharray=\"6 4\"/>\n<text x=\"{1:.0f}\" y=\"{3:.1f}\" text-anchor=\"end\">limit {4}</text>\n",
      kLeft, kLeft + plot, level_top, level_top - 3, c.limit);
  out += fmt::format("<path class=\"level\" d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>\n", level, kLevel);
  if (!allowed_path.empty()) out += fmt::format("<path class=\"allowed\" d=\"{}\" fill=\"{}\"/>\n", allowed_path, kAllowed);
  if (!blocked_path.empty()) {
    out += fmt::format("<path class=\"blocked\" d=\"{}\" stroke=\"{}\" stroke-width=\"2\" fill=\"none\"/>\n",
                       blocked_path, kBlocked);
  }
  out += "</g>\n";
  out += sim::time_axis(first, static_cast<Micros>(static_cast<double>(span) * 1.02), kLeft, plot, kTop + kLaneHeight + 2);
  return out + "</svg>\n";
}

std::string render_concurrency_html(const ConcurrencyLane& c, std::span<const TraceEvent> trace,
                                    std::string_view title, const std::string& table,
                                    const std::vector<std::string>& notes) {
  return sim::html_report(title, table, notes, render_concurrency_svg(c, trace, title));
}

}  // namespace floodgate
