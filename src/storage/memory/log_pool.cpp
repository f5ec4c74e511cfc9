#include "storage/memory/log_pool.hpp"

namespace floodgate {

const LogPool* LogPools::reserve(std::int64_t bytes) noexcept {
  // Compare and swap, never an add and a take-back: a pool never shows more than its bound, and a
  // reservation that does not fit makes no other one fail.
  const auto take = [bytes](LogPool& pool) {
    std::int64_t was = pool.used.load(std::memory_order_relaxed);
    do {
      if (was + bytes > pool.max) return false;
    } while (!pool.used.compare_exchange_weak(was, was + bytes, std::memory_order_relaxed));
    return true;
  };
  if (!take(*all)) return all;
  if (request != nullptr && !take(*request)) {
    all->used.fetch_sub(bytes, std::memory_order_relaxed);
    return request;
  }
  return nullptr;
}

void LogPools::release(std::int64_t bytes) noexcept {
  all->used.fetch_sub(bytes, std::memory_order_relaxed);
  if (request != nullptr) request->used.fetch_sub(bytes, std::memory_order_relaxed);
}

void LogPools::charge(std::int64_t bytes) noexcept {
  all->used.fetch_add(bytes, std::memory_order_relaxed);
  if (request != nullptr) request->used.fetch_add(bytes, std::memory_order_relaxed);
}

}  // namespace floodgate
