#include "floodgate/policy.hpp"

#include <algorithm>
#include <atomic>
#include <array>
#include <functional>
#include <iterator>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "absl/status/status.h"
#include "util/text.hpp"

namespace floodgate {

static_assert(kMaxLimitBalances == kMaxLimitsPerPolicy, "a decision reports every limit of a policy");

namespace {
constexpr std::array<std::pair<Strategy, const char*>, 7> kStrategies{{
    {Strategy::kFixedWindow, "fixed-window"},
    {Strategy::kMovingWindow, "moving-window"},
    {Strategy::kSlidingWindowCounter, "sliding-window-counter"},
    {Strategy::kTokenBucket, "token-bucket"},
    {Strategy::kLeakyBucket, "leaky-bucket"},
    {Strategy::kGcra, "gcra"},
    {Strategy::kConcurrency, "concurrency"},
}};
}  // namespace

const char* to_string(Strategy s) noexcept {
  for (const auto& [strategy, name] : kStrategies) {
    if (strategy == s) return name;
  }
  return "unknown";
}

absl::StatusOr<Strategy> parse_strategy(std::string_view name) {
  std::string normal = text::lower(name);
  std::replace(normal.begin(), normal.end(), '_', '-');
  for (const auto& [strategy, n] : kStrategies) {
    if (normal == n) return strategy;
  }
  if (normal == "fixed-window-first-hit") {  // simulate's name for a lane
    return absl::InvalidArgumentError(
        "strategy \"fixed-window-first-hit\" is the fixed window anchored at each key's first hit: give "
        "strategy fixed-window with anchor first-hit (anchor: first-hit in a file, --anchor first-hit)");
  }
  return absl::InvalidArgumentError(fmt::format(
      "unknown strategy \"{}\": expected fixed-window, moving-window, sliding-window-counter, "
      "token-bucket, leaky-bucket, gcra or concurrency",
      name));
}

absl::StatusOr<Policy> Policy::make(std::string name, Strategy strategy, std::string_view limits,
                                    PolicyOptions options) {
  auto parsed = parse_limits(limits);
  if (!parsed.ok()) return parsed.status();
  return make(std::move(name), strategy, *std::move(parsed), options);
}

namespace {

absl::Status invalid(std::string_view name, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("policy \"{}\": {}", name, what));
}

/// Each limit valid, a calendar limit only in the clock-aligned fixed window.
absl::Status check_limits(std::string_view name, Strategy strategy, const std::vector<Limit>& limits,
                          const PolicyOptions& options) {
  if (limits.empty()) return absl::InvalidArgumentError(fmt::format("policy \"{}\" has no limits", name));
  if (limits.size() > kMaxLimitsPerPolicy) {
    return absl::InvalidArgumentError(fmt::format("policy \"{}\" has {} limits: at most {} are allowed",
                                                  name, limits.size(), kMaxLimitsPerPolicy));
  }
  for (const Limit& l : limits) {
    auto valid = Limit::make(l.amount, l.period, l.burst);
    if (!valid.ok()) return invalid(name, std::string(valid.status().message()));
    if (!l.calendar) continue;
    if (l.period != l.calendar.nominal_period()) {
      return invalid(name, fmt::format(
          "limit \"{}\": the period of a calendar limit is its nominal length, {} µs, not {} µs "
          "(build it with Limit::make(amount, calendar))",
          to_string(l), l.calendar.nominal_period(), l.period));
    }
    if (strategy != Strategy::kFixedWindow || options.anchor != Anchor::kClock) {
      return invalid(name, fmt::format(
          "limit \"{}\": calendar periods apply to the fixed window aligned to the clock only "
          "(strategy fixed-window, anchor clock), not {}{}",
          to_string(l), to_string(strategy), strategy == Strategy::kFixedWindow ? " anchored at the first hit" : ""));
    }
  }
  return absl::OkStatus();
}

/// A concurrency limit in the concurrency strategy and nowhere else.
absl::Status check_concurrency(std::string_view name, Strategy strategy, const std::vector<Limit>& limits,
                               const PolicyOptions& options) {
  if (strategy != Strategy::kConcurrency) {
    for (const Limit& l : limits) {
      if (!l.concurrent) continue;
      return invalid(name, fmt::format("\"{}\" is a concurrency limit: it takes the concurrency strategy, not {}",
                                       to_string(l), to_string(strategy)));
    }
    return absl::OkStatus();
  }
  if (limits.size() != 1 || !limits[0].concurrent) {
    return invalid(name, fmt::format(
        "the concurrency strategy takes one concurrency limit, e.g. \"20 concurrent for 5 minutes\", not \"{}\"",
        to_string(limits)));
  }
  if (auto valid = Limit::concurrency(limits[0].amount, limits[0].period); !valid.ok()) {
    return invalid(name, std::string(valid.status().message()));
  }
  if (options.blocked_cache > 0) {
    return invalid(name,
                   "blocked_cache does not apply to the concurrency strategy (a release frees a slot before the "
                   "time a denial names)");
  }
  return absl::OkStatus();
}

/// burst, shape and anchor only where the strategy uses them.
absl::Status check_strategy_options(std::string_view name, Strategy strategy, const std::vector<Limit>& limits,
                                    const PolicyOptions& options) {
  if (options.burst < 0 || options.burst > kMaxAmount) {
    return invalid(name, fmt::format("burst {} is out of range: expected 1 to 2^53", options.burst));
  }
  const bool has_burst =
      options.burst > 0 || std::any_of(limits.begin(), limits.end(), [](const Limit& l) { return l.burst > 0; });
  if (has_burst && !uses_burst(strategy)) {
    return invalid(name, fmt::format("burst applies to token-bucket, leaky-bucket and gcra, not {}", to_string(strategy)));
  }
  if (options.shape && strategy != Strategy::kLeakyBucket) {
    return invalid(name, fmt::format("shape applies to leaky-bucket only, not {}", to_string(strategy)));
  }
  if (options.anchor == Anchor::kFirstHit && strategy != Strategy::kFixedWindow) {
    return invalid(name, fmt::format("anchor first-hit applies to fixed-window only, not {}", to_string(strategy)));
  }
  return absl::OkStatus();
}

/// Budget slices' bounds, and only for the strategies a slice can keep exact.
absl::Status check_budget(std::string_view name, Strategy strategy, const PolicyOptions& options) {
  const BudgetOptions& b = options.budget;
  if (b.max_slice == 0) return absl::OkStatus();
  if (b.max_slice < 0 || b.max_slice > kMaxAmount) {
    return invalid(name, fmt::format("budget_slice max_slice {} is out of range: expected 1 to 2^53 (0 = no slices)",
                                     b.max_slice));
  }
  if (b.interval < kMinBudgetInterval || b.interval > kMaxBudgetInterval) {
    return invalid(name, fmt::format("budget_slice interval of {} µs is out of range: expected 1 ms to 1 hour", b.interval));
  }
  if (b.share < 1 || b.share > kMaxBudgetShare) {
    return invalid(name, fmt::format("budget_slice share {} is out of range: expected 1 to {}", b.share, kMaxBudgetShare));
  }
  const bool sliceable = (strategy == Strategy::kFixedWindow && options.anchor == Anchor::kClock) ||
                         strategy == Strategy::kSlidingWindowCounter || strategy == Strategy::kTokenBucket ||
                         strategy == Strategy::kGcra;
  if (sliceable) return absl::OkStatus();
  return invalid(name, fmt::format(
      "budget slices (budget_slice) apply to fixed-window (anchor clock), sliding-window-counter, token-bucket and "
      "gcra, not {}{} ({})",
      to_string(strategy), strategy == Strategy::kFixedWindow ? " anchored at the first hit" : "",
      strategy == Strategy::kMovingWindow  ? "it logs each request's own time, which a slice cannot keep"
      : strategy == Strategy::kLeakyBucket ? "its decisions carry each request's place in the queue"
      : strategy == Strategy::kConcurrency ? "a slot is held until its lease ends, which a slice cannot see"
                                           : "its window opens at a hit the instance cannot see"));
}

/// A burst for the whole policy fills the limits without one of their own. Filling more than one
/// is nearly always a mistake ("10/second; 1000/hour" with burst 20 makes the hour a bucket of 20
/// that refills one every 3.6 s): the burst is written beside the limit it belongs to.
absl::Status fold_burst(std::string_view name, std::int64_t burst, std::vector<Limit>& limits) {
  if (burst == 0) return absl::OkStatus();
  std::vector<std::string> bare;
  for (const Limit& l : limits) {
    if (l.burst == 0) bare.push_back(to_string(l));
  }
  if (bare.size() > 1) {
    std::string example;
    bool placed = false;
    for (const Limit& l : limits) {
      if (!example.empty()) example += "; ";
      example += to_string(l);
      if (l.burst == 0 && !placed) example += fmt::format(" burst {}", burst);
      placed = placed || l.burst == 0;
    }
    return invalid(name, fmt::format(
        "burst {} would be the capacity of each of the limits {}; write it beside the limit it belongs to, e.g. \"{}\"",
        burst, fmt::join(bare, ", "), example));
  }
  for (Limit& l : limits) {
    if (l.burst == 0) l.burst = burst;
  }
  return absl::OkStatus();
}

/// A bucket drains in at most kMaxBucketDrain (capacity × period / amount).
absl::Status check_drain(std::string_view name, Strategy strategy, const std::vector<Limit>& limits) {
  if (!uses_burst(strategy)) return absl::OkStatus();
  for (const Limit& l : limits) {
    const int128 drain = static_cast<int128>(l.capacity()) * l.period / l.amount;
    if (drain <= kMaxBucketDrain) continue;
    return invalid(name, fmt::format(
        "limit \"{}\": a {} of this capacity takes {} µs to drain (capacity × period / amount): at most 2^52 µs "
        "(about 142 years) is allowed",
        to_string(l), to_string(strategy), static_cast<std::int64_t>(std::min<int128>(drain, INT64_MAX))));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Policy> Policy::make(std::string name, Strategy strategy,
                                    std::vector<Limit> limits, PolicyOptions options) {
  if (name.empty()) return absl::InvalidArgumentError("a policy needs a name");
  // In this order, each on what the ones before have checked (check_drain divides by the amounts).
  if (absl::Status st = check_limits(name, strategy, limits, options); !st.ok()) return st;
  if (absl::Status st = check_concurrency(name, strategy, limits, options); !st.ok()) return st;
  if (absl::Status st = check_strategy_options(name, strategy, limits, options); !st.ok()) return st;
  if (absl::Status st = check_budget(name, strategy, options); !st.ok()) return st;
  if (absl::Status st = fold_burst(name, options.burst, limits); !st.ok()) return st;
  if (absl::Status st = check_drain(name, strategy, limits); !st.ok()) return st;
  Policy p;
  p.name_ = std::move(name);
  p.strategy_ = strategy;
  p.limits_ = std::move(limits);
  p.options_ = options;
  p.options_.burst = 0;  // folded into the limits
  p.identity_ = {p.name_};
  p.set_fingerprint();
  return p;
}

Policy Policy::with_identity(PolicyKind kind, std::vector<std::string> parts) const {
  Policy p = *this;
  p.kind_ = kind;
  p.identity_ = std::move(parts);
  p.set_fingerprint();
  return p;
}

namespace {
std::atomic<std::uint64_t> g_next_serial{1};
}  // namespace

Policy::Serial::Serial() noexcept : value(g_next_serial.fetch_add(1, std::memory_order_relaxed)) {}

Policy::Serial& Policy::Serial::operator=(const Serial&) noexcept {
  value = g_next_serial.fetch_add(1, std::memory_order_relaxed);
  return *this;
}

void Policy::set_fingerprint() {
  static constexpr char kKindLetters[] = {'n', 'o', 'i', 'r', 'R'};
  std::string head;
  head += kKindLetters[static_cast<std::size_t>(kind_)];
  head += std::to_string(identity_.size());
  for (const std::string& part : identity_) {
    fmt::format_to(std::back_inserter(head), ":{}:", part.size());
    head += part;
  }
  const char* anchor = options_.anchor == Anchor::kFirstHit ? "first-hit" : "clock";
  state_id_ = head;
  fmt::format_to(std::back_inserter(state_id_), "|{}|{}", to_string(strategy_), anchor);
  fingerprint_ = std::move(head);
  fmt::format_to(std::back_inserter(fingerprint_), "|{}|{}|{}", to_string(strategy_), anchor,
                 options_.shape ? "shape" : "meter");
  for (const Limit& l : limits_) {
    // An inline limit has no name: its limits are its identity, so they stay in its state id.
    if (kind_ == PolicyKind::kInline) {
      fmt::format_to(std::back_inserter(state_id_), "|{}/{}/{}", l.amount, l.period, l.capacity());
    } else {
      fmt::format_to(std::back_inserter(state_id_), "|{}", l.period);
    }
    fmt::format_to(std::back_inserter(fingerprint_), "|{}/{}/{}", l.amount, l.period, l.capacity());
    if (l.calendar) {
      // "~<unit letter><anchor>:<length>:<zone>": a plain limit's item has digits and '/' only,
      // and the zone is length-prefixed, so both encodings stay injective.
      const std::string zone = l.calendar.zone.name();
      const std::string cal = fmt::format("~{}{}:{}:{}", to_string(l.calendar.unit)[0], l.calendar.anchor_day,
                                          zone.size(), zone);
      state_id_ += cal;
      fingerprint_ += cal;
    }
  }
  fingerprint_hash_ = std::hash<std::string>{}(fingerprint_);
  state_id_hash_ = std::hash<std::string>{}(state_id_);
}

std::string Policy::describe() const {
  std::string out = fmt::format("{}: {} {}", name_, to_string(strategy_), to_string(limits_));
  if (options_.anchor == Anchor::kFirstHit) out += " (first-hit windows)";
  if (options_.shape) out += " (shaping)";
  return out;
}

}  // namespace floodgate
