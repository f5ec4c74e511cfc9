// The most frequent keys of a stream in fixed memory: the Space-Saving algorithm.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace floodgate::server {

/// Space-Saving (Metwally, Agrawal, El Abbadi 2005) with `capacity` counters: a key seen is
/// counted exactly while it holds a counter; a new key when all counters are taken replaces the
/// key with the smallest count and inherits that count (recorded as its `error`). So for every
/// key, count − error ≤ true count ≤ count, and every key whose true count exceeds
/// total / capacity is present. Memory is bounded by capacity × (kMaxKeyBytes + 24) bytes whatever
/// the number of distinct keys: keys are cut to kMaxKeyBytes.
///
/// Thread-safety: none (callers lock, or keep one per thread and merge).
class TopKeys {
 public:
  static constexpr std::size_t kMaxKeyBytes = 96;

  struct Item {
    std::string key;
    std::uint64_t count = 0;  ///< an upper bound of the key's true count
    std::uint64_t error = 0;  ///< count − error is a lower bound
  };

  explicit TopKeys(std::size_t capacity) : capacity_(std::max<std::size_t>(1, capacity)) {
    items_.reserve(capacity_);
  }

  /// Counts `n` occurrences of `key`.
  void add(std::string_view key, std::uint64_t n = 1, std::uint64_t error = 0) {
    key = key.substr(0, kMaxKeyBytes);
    total_ += n;
    for (Item& it : items_) {
      if (it.key == key) {
        it.count += n;
        it.error += error;
        return;
      }
    }
    if (items_.size() < capacity_) {
      items_.push_back({std::string(key), n, error});
      return;
    }
    Item& min = *std::min_element(items_.begin(), items_.end(),
                                  [](const Item& a, const Item& b) { return a.count < b.count; });
    min.key.assign(key.data(), key.size());
    min.error = min.count + error;
    min.count += n;
  }

  /// Adds another summary's counts (per-thread summaries summed for a reader). A key absent from
  /// one side may have had up to that side's smallest count there, which goes into its error.
  void merge(const TopKeys& other) {
    const std::uint64_t mine_min = full() ? min_count() : 0;
    const std::uint64_t other_min = other.full() ? other.min_count() : 0;
    std::vector<Item> all;
    all.reserve(items_.size() + other.items_.size());
    for (const Item& it : items_) {
      const Item* o = other.find(it.key);
      all.push_back({it.key, it.count + (o ? o->count : other_min), it.error + (o ? o->error : other_min)});
    }
    for (const Item& it : other.items_) {
      if (find(it.key) == nullptr) all.push_back({it.key, it.count + mine_min, it.error + mine_min});
    }
    std::sort(all.begin(), all.end(), [](const Item& a, const Item& b) { return a.count > b.count; });
    if (all.size() > capacity_) all.resize(capacity_);
    items_ = std::move(all);
    total_ += other.total_;
  }

  /// The `n` largest counts, largest first (ties by key, so the order is stable).
  [[nodiscard]] std::vector<Item> top(std::size_t n) const {
    std::vector<Item> out = items_;
    std::sort(out.begin(), out.end(), [](const Item& a, const Item& b) {
      return a.count != b.count ? a.count > b.count : a.key < b.key;
    });
    if (out.size() > n) out.resize(n);
    return out;
  }

  void clear() {
    items_.clear();
    total_ = 0;
  }
  [[nodiscard]] std::size_t size() const noexcept { return items_.size(); }
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  [[nodiscard]] bool full() const noexcept { return items_.size() >= capacity_; }
  /// Occurrences counted (the sum of every `n` added, including merged ones).
  [[nodiscard]] std::uint64_t total() const noexcept { return total_; }

 private:
  [[nodiscard]] const Item* find(std::string_view key) const {
    key = key.substr(0, kMaxKeyBytes);
    for (const Item& it : items_) {
      if (it.key == key) return &it;
    }
    return nullptr;
  }
  [[nodiscard]] std::uint64_t min_count() const {
    std::uint64_t m = UINT64_MAX;
    for (const Item& it : items_) m = std::min(m, it.count);
    return items_.empty() ? 0 : m;
  }

  std::size_t capacity_;
  std::vector<Item> items_;
  std::uint64_t total_ = 0;
};

}  // namespace floodgate::server
