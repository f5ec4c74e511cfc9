// Per-thread state of an object that many threads write (the metrics, the live view): each thread
// finds its own entry without a lock, and readers sum the entries under the object's mutex.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace floodgate::server {

/// A process-unique id for such an object. A thread's cache is keyed by it rather than by the
/// object's address, which a later object may reuse: a stale entry is then never found.
inline std::uint64_t new_per_thread_owner_id() {
  static std::atomic<std::uint64_t> next{0};
  return next.fetch_add(1, std::memory_order_relaxed) + 1;
}

/// The calling thread's entry of owner `id`, created (under `mu`, appended to `all`) on the
/// thread's first call. Entries live as long as `all`.
template <class T>
T& per_thread_entry(std::uint64_t id, std::mutex& mu, std::vector<std::unique_ptr<T>>& all) {
  thread_local std::vector<std::pair<std::uint64_t, T*>> mine;
  for (const auto& [owner, entry] : mine) {
    if (owner == id) return *entry;
  }
  std::lock_guard<std::mutex> lock(mu);
  all.push_back(std::make_unique<T>());
  mine.emplace_back(id, all.back().get());
  return *all.back();
}

}  // namespace floodgate::server
