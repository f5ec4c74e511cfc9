// The live view of the dashboard: decisions per second per policy, and the most-denied keys.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/clock.hpp"
#include "server/api/metrics.hpp"
#include "server/common/per_thread.hpp"
#include "server/common/top_keys.hpp"

namespace floodgate::server {

/// Per policy slot (Metrics::slot): allowed, denied and degraded decisions in each of the last
/// kSeconds seconds, and the most-denied keys of the last one to two minutes (a Space-Saving
/// summary of kTopCapacity counters per thread, rotated every minute: never per-key state).
///
/// Like Metrics, every thread writes only its own rings (a ring is allocated when a thread first
/// counts for a policy: kSeconds × 24 bytes), so counting costs a decision no shared write; the
/// top-key summary is behind a mutex that only its thread and a reader take, and only on denials.
/// Readers sum the threads; a second being reset while it is read may be off by the requests of
/// that instant (a dashboard's precision).
///
/// Thread-safety: all methods are thread-safe.
class LiveStats {
 public:
  static constexpr std::size_t kSeconds = 180;
  static constexpr std::size_t kTopCapacity = 32;

  enum Kind : std::uint8_t { kAllowed, kDenied, kDegraded, kKinds };

  /// Counts one decision of `slot` at `now` (µs since the epoch); `key` feeds the top-N if denied.
  void count(std::size_t slot, Kind kind, std::string_view key, Micros now);

  struct Series {
    /// Oldest first; the last element is the current (incomplete) second `now_second`.
    std::array<std::vector<std::uint64_t>, kKinds> per_second;
    std::vector<TopKeys::Item> top_denied;
  };
  /// The last kSeconds seconds up to `now`, and up to `top` most-denied keys.
  [[nodiscard]] Series read(std::size_t slot, Micros now, std::size_t top) const;

 private:
  struct Bucket {
    std::atomic<std::int64_t> second{-1};
    std::array<std::atomic<std::uint32_t>, kKinds> n{};
  };
  struct Slot {
    std::array<Bucket, kSeconds> ring;
    mutable std::mutex mu;
    TopKeys current{kTopCapacity};   // guarded by mu: denials of minute `minute`
    TopKeys previous{kTopCapacity};  // guarded by mu: denials of minute `minute` − 1
    std::int64_t minute = -1;        // guarded by mu
  };
  struct PerThread {
    std::array<std::atomic<Slot*>, Metrics::kMaxPolicies> slots{};
  };
  PerThread& local();
  Slot& slot_of(PerThread& t, std::size_t slot);

  const std::uint64_t id_ = new_per_thread_owner_id();
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<PerThread>> threads_;  // guarded by mu_; never shrinks
  std::vector<std::unique_ptr<Slot>> owned_;         // guarded by mu_; never shrinks
};

}  // namespace floodgate::server
