// The Redis storage's shared quota: one call of scripts/quota_share.lua on the bucket's hash.
#include <string>

#include <fmt/format.h>

#include "absl/strings/str_join.h"
#include "storage/redis/call.hpp"
#include "storage/redis/redis_storage.hpp"

namespace floodgate::redis {

namespace detail {

absl::Status parse_ints(const redisReply* reply, std::vector<std::int64_t>& out) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY || reply->elements == 0) {
    return absl::InternalError("redis: the shared quota's reply is not an array of integers");
  }
  out.clear();
  out.reserve(reply->elements);
  for (std::size_t i = 0; i < reply->elements; ++i) {
    const redisReply* e = reply->element[i];
    if (e->type != REDIS_REPLY_INTEGER) {
      return absl::InternalError("redis: the shared quota's reply is not an array of integers");
    }
    out.push_back(e->integer);
  }
  return absl::OkStatus();
}

}  // namespace detail

absl::StatusOr<QuotaShare> RedisStorage::share_quota(std::string_view key, std::string_view member,
                                                     const QuotaClaim& claim, Micros now) {
  if (auto s = check_quota_claim(member, claim, now); !s.ok()) return s;
  std::vector<std::int64_t> ints;
  Call c;
  c.script = &scripts::kQuotaShare;
  c.ints = &ints;
  c.argv = {"EVALSHA", "", "1", quota_key(options_.prefix, key)};
  c.slot = call_slot(options_, c.argv[3]);
  c.argv.push_back(std::to_string(now));
  c.argv.emplace_back(member);
  c.argv.push_back(std::to_string(claim.expiry));
  c.argv.push_back(std::to_string(claim.requested));
  c.argv.push_back(std::to_string(claim.total));
  c.argv.push_back(absl::StrJoin(claim.wants, ","));
  run(std::span<Call>(&c, 1));
  if (!c.result.ok()) return c.result.status();
  QuotaShare out;
  if (ints.empty() || ints[0] < 0 || static_cast<std::uint64_t>(ints[0]) > claim.requested) {
    return absl::InternalError("redis: the shared quota's grant is out of bounds");
  }
  out.granted = static_cast<std::uint64_t>(ints[0]);
  out.others.assign(ints.begin() + 1, ints.end());
  return out;
}

}  // namespace floodgate::redis
