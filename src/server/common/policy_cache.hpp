// A bounded cache of compiled policies made for requests (inline limits, limit overrides).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "floodgate/policy.hpp"

namespace floodgate::server {

/// At most `max` compiled policies by an id; past that the one used least recently is dropped
/// (a caller that still holds it keeps using it; the state lives in the storage, keyed by the
/// policy's fingerprint, so compiling it again later finds the same state). Never refuses.
///
/// Thread-safety: all methods may be called from any thread.
class PolicyCache {
 public:
  explicit PolicyCache(std::size_t max) : max_(std::max<std::size_t>(1, max)) {}

  /// The cached policy of `id`, or null.
  std::shared_ptr<const Policy> find(std::string_view id) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = entries_.find(absl::string_view(id.data(), id.size()));
    if (it == entries_.end()) return nullptr;
    it->second.used = ++tick_;
    return it->second.policy;
  }

  /// Caches `policy` under `id` (dropping the least recently used entry at the bound) and returns
  /// the cached one (another thread's, if it came first).
  std::shared_ptr<const Policy> add(std::string_view id, std::shared_ptr<const Policy> policy, std::size_t max = 0) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = entries_.find(absl::string_view(id.data(), id.size())); it != entries_.end()) {
      return it->second.policy;
    }
    const std::size_t bound = max > 0 ? max : max_;
    while (!entries_.empty() && entries_.size() >= bound) {
      entries_.erase(std::min_element(entries_.begin(), entries_.end(),
                                      [](const auto& a, const auto& b) { return a.second.used < b.second.used; }));
      ++dropped_;
    }
    entries_.emplace(std::string(id), Entry{policy, ++tick_});
    return policy;
  }

  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    entries_ = {};  // and its slots
  }

  /// Drops the entries not used (found or added) since the previous call, and gives back the
  /// slots of the map when it is mostly empty (a flood's thousand policies do not stay, nor the
  /// memory of their map). The service calls it every few seconds (server::Housekeeping). A
  /// dropped policy that comes back is compiled again and finds its state in the storage.
  /// Returns how many were dropped.
  std::size_t drop_unused() {
    std::lock_guard<std::mutex> lock(mu_);
    std::size_t n = 0;
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->second.used <= swept_) {
        entries_.erase(it++);
        ++n;
      } else {
        ++it;
      }
    }
    swept_ = tick_;
    if (entries_.size() * 4 < entries_.capacity()) entries_.rehash(0);  // shrinks to fit
    return n;
  }
  [[nodiscard]] std::size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return entries_.size();
  }
  /// Slots of the map (its memory), whatever the entries held.
  [[nodiscard]] std::size_t capacity() const {
    std::lock_guard<std::mutex> lock(mu_);
    return entries_.capacity();
  }
  /// Entries dropped at the bound.
  [[nodiscard]] std::uint64_t dropped() const {
    std::lock_guard<std::mutex> lock(mu_);
    return dropped_;
  }

 private:
  struct Entry {
    std::shared_ptr<const Policy> policy;
    std::uint64_t used = 0;
  };
  const std::size_t max_;
  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_;  // guarded by mu_
  std::uint64_t tick_ = 0;                           // guarded by mu_
  std::uint64_t dropped_ = 0;                        // guarded by mu_
  std::uint64_t swept_ = 0;                          // guarded by mu_: tick_ at drop_unused
};

}  // namespace floodgate::server
