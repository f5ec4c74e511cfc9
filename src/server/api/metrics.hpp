// Service metrics in the Prometheus text format: per policy, never per key.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "floodgate/clock.hpp"
#include "server/api/admin_auth.hpp"
#include "server/common/per_thread.hpp"
#include "server/common/prometheus.hpp"

namespace floodgate::server {

/// Counters are kept per thread (each thread writes only its own cache lines) and summed when
/// scraped, so counting costs a decision no shared write.
///
/// Thread-safety: all methods are thread-safe.
class Metrics {
 public:
  enum Result : std::uint8_t { kAllowed, kDenied, kShadowDenied, kDegraded, kResults };
  /// Policies beyond this many share the slot "other" (a bound, like everything per policy).
  static constexpr std::size_t kMaxPolicies = 256;
  /// Upper bounds of the storage latency histogram, in µs.
  static constexpr std::array<Micros, 13> kLatencyBuckets{
      10, 25, 50, 100, 250, 500, 1'000, 2'500, 5'000, 10'000, 25'000, 50'000, 100'000};

  /// The slot of a policy name (registered once, e.g. when a configuration is installed).
  std::size_t slot(const std::string& policy_name);
  /// Drops the series of every policy not named in `keep` (a reload removed it): it leaves
  /// /metrics and its slot is reused, counted from 0, only after the next `retain`, so that a
  /// request decided on the old configuration never counts into another policy's series.
  void retain(const std::vector<std::string>& keep);

  void count(std::size_t slot, Result r) noexcept;
  void storage_latency(Micros us) noexcept;
  void http_status(int status) noexcept;
  /// An admin request refused (`floodgate_http_unauthorized_total{reason}`); `why` is not kGranted.
  void unauthorized(AdminAuth why) noexcept;
  /// A TLS handshake on the HTTP listener that failed (`floodgate_http_tls_handshake_failures_total`):
  /// no client certificate or one from another CA under mTLS, a client that does not trust ours,
  /// plain HTTP sent to the HTTPS port, a timeout.
  void tls_handshake_failed() noexcept { tls_failures_.fetch_add(1, std::memory_order_relaxed); }
  void connections(std::int64_t delta) noexcept { connections_.fetch_add(delta, std::memory_order_relaxed); }
  [[nodiscard]] std::int64_t open_connections() const noexcept {
    return connections_.load(std::memory_order_relaxed);
  }

  /// Sum over threads of one counter (for tests and the live view).
  [[nodiscard]] std::uint64_t total(std::size_t slot, Result r) const;

  /// Writes the decision, latency and HTTP families.
  void render(PromText& out) const;

 private:
  struct alignas(64) PerThread {
    std::array<std::array<std::atomic<std::uint64_t>, kResults>, kMaxPolicies> decisions{};
    std::array<std::atomic<std::uint64_t>, kLatencyBuckets.size() + 1> latency{};
    std::atomic<std::uint64_t> latency_sum_us{0};
    std::array<std::atomic<std::uint64_t>, 6> status_class{};  // 1xx..5xx, other
  };
  PerThread& local();

  const std::uint64_t id_ = new_per_thread_owner_id();
  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, std::size_t> slots_;  // guarded by mu_
  std::vector<std::string> names_;                       // guarded by mu_; "" = dropped
  std::vector<std::size_t> free_;                        // guarded by mu_: dropped, reusable
  std::vector<std::size_t> quarantine_;                  // guarded by mu_: reusable next retain
  std::vector<std::unique_ptr<PerThread>> threads_;      // guarded by mu_; never shrinks
  std::atomic<std::int64_t> connections_{0};
  std::atomic<std::uint64_t> tls_failures_{0};  // rare: shared, not per thread
  std::array<std::atomic<std::uint64_t>, 3> unauthorized_{};  // missing, wrong, not configured (rare)
};

/// Configuration reloads (SIGHUP, a changed file): how many were installed and how many were
/// refused (an invalid file, or one that would remove every policy), exposed as
/// `floodgate_config_reloads_total{result="ok"|"failed"}` and `floodgate_config_last_reload_ok`
/// (1 while the last attempt was installed).
///
/// Thread-safety: all methods are thread-safe.
class ReloadCounters {
 public:
  void succeeded() noexcept;
  void failed() noexcept;
  [[nodiscard]] std::uint64_t failures() const noexcept { return failed_.load(std::memory_order_relaxed); }
  /// Writes these series.
  void render(PromText& out) const;

 private:
  std::atomic<std::uint64_t> ok_{0};
  std::atomic<std::uint64_t> failed_{0};
  std::atomic<bool> last_ok_{true};
};

}  // namespace floodgate::server
