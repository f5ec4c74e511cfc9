// The memory store's shared quota: share_quota_step on a map of keys under one lock.
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
};

std::shared_ptr<MemoryStorage::Quotas> MemoryStorage::new_quotas() { return std::make_shared<Quotas>(); }

absl::StatusOr<QuotaShare> MemoryStorage::share_quota(std::string_view key, std::string_view member,
                                                      const QuotaClaim& claim, Micros now) {
  if (auto s = check_quota_claim(member, claim, now); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(quotas_->mu);
  // Keys whose members have all expired go first, so that the map holds live buckets only.
  absl::erase_if(quotas_->keys, [&](const auto& kv) {
    for (const auto& [name, m] : kv.second) {
      if (m.expiry > now) return false;
    }
    return true;
  });
  return share_quota_step(quotas_->keys[std::string(key)], member, claim, now);
}

}  // namespace floodgate
