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
#include "server/prometheus.hpp"

namespace floodgate::server {

/// Per-rule counters in envoyproxy/ratelimit's terms (hits, not requests), labelled by domain and
/// rule (the descriptor key path), never by a request's values — except for rules with
/// `detailed_metric`, whose values are part of the label up to kMaxSeries series in all; beyond
/// that they count under their rule's own label.
///
/// Thread-safety: all methods are thread-safe.
class RlsMetrics {
 public:
  enum Counter : std::uint8_t { kTotalHits, kOverLimit, kNearLimit, kWithinLimit, kShadowMode, kDegraded, kCounters };
  static constexpr std::size_t kMaxSeries = 1024;

  /// The slot of (domain, rule), registered on first use; nullopt when the bound is reached.
  std::optional<std::size_t> slot(const std::string& domain, const std::string& rule);
  void add(std::size_t slot, Counter c, std::uint64_t n) noexcept {
    counters_[slot][c].fetch_add(n, std::memory_order_relaxed);
  }
  [[nodiscard]] std::uint64_t get(std::size_t slot, Counter c) const noexcept {
    return counters_[slot][c].load(std::memory_order_relaxed);
  }
  /// Prometheus families: floodgate_rls_<counter>_total{domain="…",rule="…"}.
  void render(PromText& out) const;

 private:
  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, std::size_t> slots_;  // guarded by mu_; "domain\0rule"
  std::vector<std::pair<std::string, std::string>> names_;  // guarded by mu_
  std::array<std::array<std::atomic<std::uint64_t>, kCounters>, kMaxSeries> counters_{};
};

}  // namespace floodgate::server
