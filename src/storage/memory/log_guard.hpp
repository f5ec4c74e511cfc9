// A moving window's hit kept within the memory store's log pools (log_pool.hpp): the bytes its
// logs would grow by are reserved before the commit, and the hit refused if they do not fit.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "floodgate/algorithms.hpp"
#include "storage/memory/log_pool.hpp"

namespace floodgate::detail {

/// The bytes held by the logs of `k` moving-window states (their buffers' capacities).
inline std::int64_t log_bytes(const moving_window::State* st, std::size_t k) {
  std::size_t entries = 0;
  for (std::size_t i = 0; i < k; ++i) entries += st[i].log.capacity();
  return static_cast<std::int64_t>(entries * sizeof(moving_window::Entry));
}

// Keeps a commit's growth of the logs within `logs` (detail::decide's guard), by what
// commit_resize says the commit will do to each buffer (exactly: the tests hold log_bytes() to
// the buffers' sizes); most hits leave every buffer's size as it is and touch no pool.
struct LogGuard {
  LogPools& logs;
  std::size_t k;
  std::int64_t reserved = 0;  // bytes the buffers grow by
  std::int64_t released = 0;  // bytes the buffers shrink by
  const LogPool* full = nullptr;  // the pool that refused, if one did
  bool too_long = false;          // or a log that would grow past EntryLog::kMaxCapacity

  bool before_commit(const moving_window::State* st, std::span<const Limit> limits, Micros now, std::int64_t cost) {
    std::ptrdiff_t grow = 0;
    std::ptrdiff_t shrink = 0;
    for (std::size_t i = 0; i < k; ++i) {
      if (moving_window::commit_keeps_size(st[i], limits[i], now, cost)) continue;
      const std::ptrdiff_t r = moving_window::commit_resize(st[i], limits[i], now, cost);
      if (r > 0) {
        grow += r;
        too_long = too_long || st[i].log.capacity() + static_cast<std::size_t>(r) > moving_window::EntryLog::kMaxCapacity;
      } else {
        shrink -= r;
      }
    }
    reserved = static_cast<std::int64_t>(grow) * static_cast<std::int64_t>(sizeof(moving_window::Entry));
    released = static_cast<std::int64_t>(shrink) * static_cast<std::int64_t>(sizeof(moving_window::Entry));
    if (too_long || (reserved > 0 && (full = logs.reserve(reserved)) != nullptr)) {
      logs.refused->fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    return true;
  }
  void after_commit(const moving_window::State*) {
    if (released > 0) logs.release(released);
  }
  /// Why the hit was refused (after before_commit said false).
  [[nodiscard]] absl::Status refusal() const;
};

}  // namespace floodgate::detail
