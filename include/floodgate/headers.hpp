// floodgate/headers.hpp — a decision rendered as HTTP response headers.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "floodgate/decision.hpp"
#include "floodgate/policy.hpp"

namespace floodgate {

/// One header field: name and value.
using Header = std::pair<std::string, std::string>;

/// The rate-limit headers for a decision under a policy:
///
/// - `RateLimit-Policy` (IETF draft-ietf-httpapi-ratelimit-headers-11, a structured-field list):
///   one item per limit, `"<name>";q=<amount>;w=<period in seconds>` (items of a multi-limit
///   policy are named `<name>-<index>`; `w` is rounded up to whole seconds, at least 1).
/// - `RateLimit`: the most constraining limit, `"<name>";r=<remaining>;t=<reset in seconds>`.
/// - `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (seconds until reset,
///   a delta, not an epoch time).
/// - `Retry-After` (whole seconds, rounded up, at least 1) when the request was denied and can be
///   retried; absent when its cost can never fit.
///
/// All durations are rounded up: a client that waits what the headers say is never early.
std::vector<Header> rate_limit_headers(const Policy& policy, const Decision& decision);

/// Whole seconds, rounded up, of a non-negative duration.
std::int64_t ceil_seconds(Micros d) noexcept;

}  // namespace floodgate
