// The byte bounds of the memory store's moving-window logs (MemoryStorageOptions::max_log_bytes
// and max_request_log_bytes): pools that a table reserves from before a log grows.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace floodgate {

/// What the moving window's logs may hold (MemoryStorageOptions::max_log_bytes and
/// max_request_log_bytes). Bytes are reserved before a log's buffer grows and released when it
/// shrinks or its key goes: written only when a buffer changes size (it doubles or halves), never
/// on a decision that leaves it as it is. Thread-safety: atomics.
struct LogPool {
  explicit LogPool(std::size_t bound)
      : max(static_cast<std::int64_t>(std::min<std::size_t>(bound, std::numeric_limits<std::int64_t>::max()))) {}
  const std::int64_t max;
  std::atomic<std::int64_t> used{0};
};
/// The pools a table's logs count in: the store's, and a request-made table's own.
struct LogPools {
  LogPool* all = nullptr;
  LogPool* request = nullptr;  // a request-made table's, within `all`; else null
  std::atomic<std::uint64_t>* refused = nullptr;
  /// Reserves `bytes` in each of these pools; if one would pass its bound, none, and returns
  /// that pool.
  const LogPool* reserve(std::int64_t bytes) noexcept;
  /// Gives back `bytes` to each of these pools: a buffer that shrank, or went with its key.
  void release(std::int64_t bytes) noexcept;
  /// Counts `bytes` in each of these pools whatever its bound (a settle's growth, which is never refused).
  void charge(std::int64_t bytes) noexcept;
};

}  // namespace floodgate
