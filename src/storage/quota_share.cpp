// The shared quota's step (Storage::share_quota): the one place of its logic. The memory store
// applies it under a lock; Redis's scripts/quota_share.lua mirrors it line for line.
#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "floodgate/storage.hpp"

namespace floodgate {

absl::Status check_quota_claim(std::string_view member, const QuotaClaim& claim, Micros now) {
  if (member.empty() || member.size() > kMaxQuotaMember ||
      member.find_first_of(":,") != std::string_view::npos) {
    return absl::InvalidArgumentError("share_quota: member must be 1 to 128 bytes without ':' or ','");
  }
  if (claim.total < 1 || claim.total > 0xFFFFFFFFULL) {
    return absl::InvalidArgumentError("share_quota: total must be 1 to 2^32 - 1");
  }
  if (claim.requested > claim.total) return absl::InvalidArgumentError("share_quota: requested must be <= total");
  if (now < 0 || claim.expiry <= now) return absl::InvalidArgumentError("share_quota: expiry must be after now");
  if (claim.wants.size() > kMaxQuotaWants) {
    return absl::InvalidArgumentError(fmt::format("share_quota: wants holds at most {} entries", kMaxQuotaWants));
  }
  for (const std::int64_t w : claim.wants) {
    if (w != kNoHistory && (w < 0 || static_cast<std::uint64_t>(w) > claim.total)) {
      return absl::InvalidArgumentError("share_quota: each want must be -1 (no history) or 0 to total");
    }
  }
  return absl::OkStatus();
}

QuotaShare share_quota_step(std::vector<std::pair<std::string, QuotaMember>>& members, std::string_view member,
                            const QuotaClaim& claim, Micros now) {
  QuotaShare out;
  std::uint64_t used = 0;
  std::erase_if(members, [&](const auto& m) { return m.first != member && m.second.expiry <= now; });
  for (const auto& [name, m] : members) {
    if (name == member) continue;
    used += m.granted;
    out.others.insert(out.others.end(), m.wants.begin(), m.wants.end());
  }
  const std::uint64_t free = claim.total > used ? claim.total - used : 0;
  out.granted = std::min(claim.requested, free);
  QuotaMember record{claim.wants, out.granted, claim.expiry};
  const auto it = std::find_if(members.begin(), members.end(), [&](const auto& m) { return m.first == member; });
  if (it != members.end()) {
    it->second = std::move(record);
  } else {
    members.emplace_back(std::string(member), std::move(record));
  }
  return out;
}

absl::StatusOr<QuotaShare> Storage::share_quota(std::string_view key, std::string_view member,
                                                const QuotaClaim& claim, Micros now) {
  (void)key;
  (void)member;
  (void)claim;
  (void)now;
  return absl::UnimplementedError("this storage does not share quotas (memory and Redis storages do)");
}

}  // namespace floodgate
