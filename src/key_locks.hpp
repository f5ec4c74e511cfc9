// Striped locks over (policy, key) pairs: what makes a group of requests all-or-nothing within
// this process on a storage whose apply_group is not atomic by itself.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <functional>
#include <mutex>
#include <span>
#include <string_view>
#include <vector>

#include "floodgate/storage.hpp"

namespace floodgate::detail {

/// 256 mutexes; a (policy, key) maps to one of them. `lock` takes the stripes of all items in
/// ascending order (so two callers never deadlock) and the returned guard releases them.
/// Two different keys may share a stripe: that only serialises them, never changes a decision.
///
/// Thread-safety: all methods are thread-safe.
class KeyLocks {
 public:
  static constexpr std::size_t kStripes = 256;

  class Guard {
   public:
    Guard(KeyLocks& locks, std::vector<std::size_t> stripes) : locks_(locks), stripes_(std::move(stripes)) {
      for (std::size_t i : stripes_) locks_.stripes_[i].lock();
    }
    ~Guard() {
      for (auto it = stripes_.rbegin(); it != stripes_.rend(); ++it) locks_.stripes_[*it].unlock();
    }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    KeyLocks& locks_;
    std::vector<std::size_t> stripes_;
  };

  [[nodiscard]] Guard lock(std::span<const Storage::BatchItem> items) {
    std::vector<std::size_t> stripes;
    stripes.reserve(items.size());
    for (const Storage::BatchItem& b : items) {
      const std::size_t h = b.policy->fingerprint_hash() ^
                            (std::hash<std::string_view>{}(b.key) * 0x9E3779B97F4A7C15ULL);
      stripes.push_back(h % kStripes);
    }
    std::sort(stripes.begin(), stripes.end());
    stripes.erase(std::unique(stripes.begin(), stripes.end()), stripes.end());
    return Guard(*this, std::move(stripes));
  }

 private:
  std::array<std::mutex, kStripes> stripes_;
};

}  // namespace floodgate::detail
