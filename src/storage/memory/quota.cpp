// The memory store's shared quota: share_quota_step on a map of keys under one lock.
#include <algorithm>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "floodgate/memory_storage.hpp"

namespace floodgate {

struct MemoryStorage::Quotas {
  std::mutex mu;
  absl::flat_hash_map<std::string, std::vector<std::pair<std::string, QuotaMember>>> keys;  // guarded by mu
  std::size_t calls = 0;                                                                  // guarded by mu
};

namespace {

// Calls between two sweeps of the keys whose members have all expired: each call costs O(1)
// amortized instead of a pass over every bucket.
constexpr std::size_t kSweepEvery = 1024;

}  // namespace

std::shared_ptr<MemoryStorage::Quotas> MemoryStorage::new_quotas() { return std::make_shared<Quotas>(); }

absl::StatusOr<QuotaShare> MemoryStorage::share_quota(std::string_view key, std::string_view member,
                                                      const QuotaClaim& claim, Micros now) {
  if (auto s = check_quota_claim(member, claim, now); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(quotas_->mu);
  // Now and then, the keys whose members have all expired go, so that the map holds live buckets.
  if (++quotas_->calls % kSweepEvery == 0) {
    absl::erase_if(quotas_->keys, [&](const auto& kv) {
      return std::all_of(kv.second.begin(), kv.second.end(), [&](const auto& m) { return m.second.expiry <= now; });
    });
  }
  return share_quota_step(quotas_->keys[std::string(key)], member, claim, now);
}

}  // namespace floodgate
