// The gRPC rate-limit service's per-rule counters, in envoyproxy/ratelimit's terms.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "server/common/prometheus.hpp"

namespace floodgate::server {

/// Per-rule counters in envoyproxy/ratelimit's terms (hits, not requests), labelled by domain and
/// rule (the descriptor key path), never by a request's values — except for rules with
/// `detailed_metric`, whose values are part of the label. The two kinds of series have bounds of
/// their own: kMaxRuleSeries for rules, kMaxDetailedSeries for detailed values (a value past that
/// counts under its rule's own label, and floodgate_rls_detailed_series_overflow_total counts it),
/// so a flood of detailed values never takes a rule's series. A reload drops the series of rules
/// it removed (`retain`); counters saturate at 2^64−1, never wrap.
///
/// Thread-safety: all methods are thread-safe.
class RlsMetrics {
 public:
  enum Counter : std::uint8_t { kTotalHits, kOverLimit, kNearLimit, kWithinLimit, kShadowMode, kDegraded, kCounters };
  static constexpr std::size_t kMaxRuleSeries = 1024;
  static constexpr std::size_t kMaxDetailedSeries = 1024;
  /// Slots in all; also the "not counted" slot.
  static constexpr std::size_t kMaxSeries = kMaxRuleSeries + kMaxDetailedSeries;

  /// The slot of (domain, rule), registered on first use; nullopt when the rules' bound is reached.
  std::optional<std::size_t> slot(const std::string& domain, const std::string& rule);
  /// The slot of a detailed value `label` of `rule` in `domain`; nullopt (and counted) when the
  /// detailed bound is reached.
  std::optional<std::size_t> detailed_slot(const std::string& domain, const std::string& rule,
                                           const std::string& label);
  /// Drops the series of every rule not in `rules` ({domain, rule path}) and of their detailed
  /// values. A dropped slot is reused only after the next `retain`, so that a request decided on
  /// the old rules never counts into another rule's series.
  void retain(const std::vector<std::pair<std::string, std::string>>& rules);

  /// Adds `n`, saturating at 2^64−1: a counter never wraps (hits_addend may be up to 2^53 per
  /// descriptor, so 2,048 calls would wrap a plain 64-bit sum back to where it was).
  void add(std::size_t slot, Counter c, std::uint64_t n) noexcept {
    std::atomic<std::uint64_t>& counter = counters_[slot][c];
    std::uint64_t old = counter.load(std::memory_order_relaxed);
    while (!counter.compare_exchange_weak(old, old > UINT64_MAX - n ? UINT64_MAX : old + n,
                                          std::memory_order_relaxed)) {
    }
  }
  [[nodiscard]] std::uint64_t get(std::size_t slot, Counter c) const noexcept {
    return counters_[slot][c].load(std::memory_order_relaxed);
  }
  /// Series registered now (rules and detailed values).
  [[nodiscard]] std::size_t series() const;
  /// Detailed values that found the detailed bound reached.
  [[nodiscard]] std::uint64_t detailed_overflow() const noexcept { return overflow_.load(std::memory_order_relaxed); }
  /// A call not decided because its caller had gone (floodgate_rls_abandoned_total).
  void abandoned() noexcept { abandoned_.fetch_add(1, std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t abandoned_calls() const noexcept { return abandoned_.load(std::memory_order_relaxed); }
  /// Prometheus families: floodgate_rls_<counter>_total{domain="…",rule="…"}.
  void render(PromText& out) const;

 private:
  struct Series {
    std::string domain;
    std::string rule;   // the label
    std::string owner;  // the rule a detailed value belongs to ("" for a rule's own series)
    std::string id;     // key of slots_
  };
  std::optional<std::size_t> add_series(Series s, std::size_t first, std::size_t end);

  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, std::size_t> slots_;  // guarded by mu_
  std::vector<std::optional<Series>> names_ = std::vector<std::optional<Series>>(kMaxSeries);  // mu_
  std::vector<std::size_t> quarantine_;                                                       // mu_
  absl::flat_hash_set<std::size_t> free_;                                                     // mu_
  std::size_t used_[2] = {0, kMaxRuleSeries};  // mu_: the next never-used slot of each pool
  std::array<std::array<std::atomic<std::uint64_t>, kCounters>, kMaxSeries> counters_{};
  std::atomic<std::uint64_t> abandoned_{0};
  std::atomic<std::uint64_t> overflow_{0};
};

}  // namespace floodgate::server
