// The one way the service publishes a configuration that a reload replaces: readers on any thread
// get the current version without sharing a written cache line, writers swap it in.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "server/common/per_thread.hpp"

namespace floodgate::server {

/// Holds a shared_ptr<const T> that `publish` replaces. `get` returns the latest one: each thread
/// keeps the version it last saw (in a per-thread entry keyed by this object's process-unique id,
/// never by its address) and re-reads it under the mutex only after a publish bumped the version.
///
/// Thread-safety: all methods are thread-safe. What `get` returned stays alive while it is held.
template <class T>
class Published {
 public:
  explicit Published(std::shared_ptr<const T> initial) : value_(std::move(initial)) {}

  void publish(std::shared_ptr<const T> next) {
    std::lock_guard<std::mutex> lock(mu_);
    value_ = std::move(next);
    version_.fetch_add(1, std::memory_order_release);
  }

  [[nodiscard]] std::shared_ptr<const T> get() const {
    Seen& seen = per_thread_entry(id_, seen_mu_, seen_);
    const std::uint64_t v = version_.load(std::memory_order_acquire);
    if (seen.version != v || !seen.value) {
      std::lock_guard<std::mutex> lock(mu_);
      seen.version = version_.load(std::memory_order_relaxed);
      seen.value = value_;
    }
    return seen.value;
  }

 private:
  struct Seen {
    std::uint64_t version = ~std::uint64_t{0};
    std::shared_ptr<const T> value;
  };
  const std::uint64_t id_ = new_per_thread_owner_id();
  mutable std::mutex mu_;
  std::shared_ptr<const T> value_;  // guarded by mu_
  std::atomic<std::uint64_t> version_{0};
  mutable std::mutex seen_mu_;
  mutable std::vector<std::unique_ptr<Seen>> seen_;  // guarded by seen_mu_; one per thread
};

}  // namespace floodgate::server
