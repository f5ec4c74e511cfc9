// RLQS messages in and out.
#include "server/rlqs/messages.hpp"

#include <fmt/format.h>

namespace floodgate::server::rlqs {

namespace {

using BucketAction = rlqsv3::RateLimitQuotaResponse::BucketAction;
using Strategy = envoy::type::v3::RateLimitStrategy;

BucketAction::QuotaAssignmentAction& assignment(const rlqsv3::BucketId& id, std::uint32_t ttl_seconds, BucketAction& out) {
  out.Clear();
  *out.mutable_bucket_id() = id;
  auto& q = *out.mutable_quota_assignment_action();
  q.mutable_assignment_time_to_live()->set_seconds(ttl_seconds);
  return q;
}

}  // namespace

std::map<std::string, std::string> bucket_entries(const rlqsv3::BucketId& id) {
  std::map<std::string, std::string> entries;
  for (const auto& [k, v] : id.bucket()) {
    if (k.empty() || v.empty()) return {};
    entries.emplace(k, v);
  }
  return entries;
}

std::string bucket_key(const std::string& domain, const std::map<std::string, std::string>& entries) {
  std::string key = fmt::format("{}:{}", domain.size(), domain);
  for (const auto& [k, v] : entries) key += fmt::format("|{}:{}{}:{}", k.size(), k, v.size(), v);
  return key;
}

void blanket_action(const rlqsv3::BucketId& id, bool allow, std::uint32_t ttl_seconds, BucketAction& out) {
  auto& q = assignment(id, ttl_seconds, out);
  q.mutable_rate_limit_strategy()->set_blanket_rule(allow ? Strategy::ALLOW_ALL : Strategy::DENY_ALL);
}

void assignment_action(const rlqsv3::BucketId& id, const Assignment& a, BucketAction& out) {
  if (a.tokens_per_fill == 0) {
    blanket_action(id, false, a.ttl_seconds, out);
    return;
  }
  auto& q = assignment(id, a.ttl_seconds, out);
  auto& tb = *q.mutable_rate_limit_strategy()->mutable_token_bucket();
  tb.set_max_tokens(a.max_tokens);
  tb.mutable_tokens_per_fill()->set_value(static_cast<std::uint32_t>(a.tokens_per_fill));
  tb.mutable_fill_interval()->set_seconds(a.shape.fill_seconds);
}

}  // namespace floodgate::server::rlqs
