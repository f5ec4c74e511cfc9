// A memory store that fails on demand (as a Redis that went away) and counts its calls: for tests
// of what the layers above a storage do with its errors.
#pragma once

#include <atomic>

#include "floodgate/memory_storage.hpp"

namespace floodgate::testing {

class SwitchableStorage final : public Storage {
 public:
  absl::StatusOr<Decision> apply(const Policy& p, std::string_view key, std::int64_t cost, Effect e,
                                 Micros now) override {
    calls.fetch_add(1);
    if (!failure.ok()) return failure;
    return inner.apply(p, key, cost, e, now);
  }
  absl::Status clear(const Policy& p, std::string_view key) override { return inner.clear(p, key); }
  absl::StatusOr<Decision> reserve(const Policy& p, std::string_view key, std::int64_t cost, std::string_view id,
                                   Micros ttl, Effect e, Micros now) override {
    calls.fetch_add(1);
    if (!failure.ok()) return failure;
    return inner.reserve(p, key, cost, id, ttl, e, now);
  }
  absl::StatusOr<Decision> settle(const Policy& p, std::string_view key, std::string_view id, std::int64_t actual,
                                  Micros now) override {
    calls.fetch_add(1);
    if (!failure.ok()) return failure;
    return inner.settle(p, key, id, actual, now);
  }
  absl::StatusOr<bool> known(const Policy& p, std::string_view key, std::string_view id, Micros now) override {
    if (!failure.ok()) return failure;
    return inner.known(p, key, id, now);
  }
  [[nodiscard]] StorageTraits traits() const override { return traits_; }

  MemoryStorage inner;
  absl::Status failure;  ///< set before sharing the storage; OK: answer from `inner`
  std::atomic<int> calls{0};
  StorageTraits traits_;
};

}  // namespace floodgate::testing
