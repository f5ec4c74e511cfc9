// RLQS messages: the key of a reported bucket and the bucket actions sent back.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "envoy/service/rate_limit_quota/v3/rlqs.pb.h"
#include "server/rlqs/table.hpp"

namespace floodgate::server::rlqs {

namespace rlqsv3 = envoy::service::rate_limit_quota::v3;

/// The entries of a bucket_id, sorted. Empty when the bucket_id is unusable: no entries, or an
/// empty key or value (Envoy's proto requires both non-empty).
std::map<std::string, std::string> bucket_entries(const rlqsv3::BucketId& id);

/// An injective key of (domain, entries): the table's key of the bucket.
std::string bucket_key(const std::string& domain, const std::map<std::string, std::string>& entries);

/// A blanket rule (ALLOW_ALL or DENY_ALL) for `id`, living `ttl_seconds` (whole seconds: Envoy
/// drops the nanos, and reads an unset time to live as "expired").
void blanket_action(const rlqsv3::BucketId& id, bool allow, std::uint32_t ttl_seconds,
                    rlqsv3::RateLimitQuotaResponse::BucketAction& out);

/// The token bucket of an assignment for `id` (DENY_ALL for a zero share).
void assignment_action(const rlqsv3::BucketId& id, const Assignment& a,
                       rlqsv3::RateLimitQuotaResponse::BucketAction& out);

}  // namespace floodgate::server::rlqs
