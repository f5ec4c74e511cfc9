// A matched descriptor's names: its storage key (floodgate's layout or envoyproxy/ratelimit's) and
// its metric label, as envoyproxy names its stats.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "server/rls/rules.hpp"

namespace floodgate::server {

/// The storage key of a descriptor: its domain and entries, length-prefixed so that no two
/// different descriptors share a key whatever bytes they hold. An entry that matched a
/// share_threshold wildcard (`steps` given) contributes the pattern, marked '*', instead of its
/// value: every value of the pattern counts in one state.
std::string rls_storage_key(std::string_view domain,
                            const ::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor& d,
                            const std::vector<RlsStep>* steps);

/// The same descriptor in envoyproxy/ratelimit's key layout (storage/envoyproxy_layout.hpp), for a
/// storage that keeps the rule there: domain "_", then per entry key "_" value "_", a
/// share_threshold entry giving its configured pattern; the storage adds the prefix and the window.
std::string rls_envoyproxy_key(std::string_view domain,
                               const ::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor& d,
                               const std::vector<RlsStep>* steps);

/// The metric label of a matched descriptor, as envoyproxy names its stats: per entry "key_value",
/// where the value is the request's (detailed_metric, an exact match, value_to_metric) or the
/// configured pattern (a wildcard, always when share_threshold), and nothing for a key-only node
/// without value_to_metric. Without `steps`: detailed_metric's "key_value" of every entry.
std::string rls_metric_label(const ::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor& d,
                             const std::vector<RlsStep>* steps, bool detailed);

}  // namespace floodgate::server
