// floodgate/headers.hpp — a decision rendered as HTTP response headers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"

#include "floodgate/decision.hpp"
#include "floodgate/policy.hpp"

namespace floodgate {

/// One header field: name and value.
using Header = std::pair<std::string, std::string>;

/// The largest integer an RFC 8941 structured field can carry (15 digits). Every figure of the
/// headers below is clamped to it (amounts and bursts go up to 2^53).
inline constexpr std::int64_t kMaxHeaderInteger = 999'999'999'999'999;

/// What the headers announce for one limit: `quota` requests per `window` seconds.
/// - Window strategies: the limit's amount per its period.
/// - Bucket strategies (token, leaky, GCRA): the bucket's capacity (its burst, by default the
///   amount) per the time the bucket takes to refill all of it (capacity × period / amount). The
///   rate stays the limit's, and `remaining` (at most the capacity) never exceeds the quota.
/// `window` is whole seconds, rounded up, at least 1. Not clamped.
struct Quota {
  std::int64_t quota = 0;
  std::int64_t window = 0;
};
Quota quota_of(const Policy& policy, const Limit& limit) noexcept;

/// The quota of the decision's most constraining limit (the limit whose amount and period the
/// decision names; `decision.limit` if none does): what a response body should report as its
/// `limit`, so that `remaining` ≤ it there too.
std::int64_t decision_quota(const Policy& policy, const Decision& decision) noexcept;

/// Limit `i`'s own figures in decision `d` of `policy`: its balance when the decision carries
/// every limit's (Decision::balances), else the decision's own (a policy with one limit, or a
/// decision the storage did not make); `remaining` within 0 and the limit's quota.
LimitBalance balance_of(const Policy& policy, const Decision& d, std::size_t i) noexcept;

/// The rate-limit headers for a decision under a policy:
///
/// - `RateLimit-Policy` (IETF draft-ietf-httpapi-ratelimit-headers-11, a structured-field list):
///   one item per limit, `"<name>";q=<quota>;w=<window>` (see Quota; items of a multi-limit
///   policy are named `<name>-<index>`); a concurrency limit's item is
///   `"<name>";q=<slots>;qu="concurrent-requests"` (the draft's quota unit, and no window).
/// - `RateLimit`: the most constraining limit first, `"<name>";r=<remaining>;t=<reset in
///   seconds>`, with remaining ≤ its quota; then, for a policy with several limits whose decision
///   carries every limit's balance, one item for each other limit in the policy's order (r and t
///   its own).
/// - `X-RateLimit-Limit` (that limit's quota), `X-RateLimit-Remaining`, `X-RateLimit-Reset`
///   (seconds until reset, a delta, not an epoch time).
/// - `Retry-After` (whole seconds, rounded up, at least 1) when the request was denied and can be
///   retried; absent when its cost can never fit. It takes precedence over `t` (as the draft
///   asks of clients), and `t` is never less than it.
///
/// All durations are rounded up: a client that waits what the headers say is never early. Every
/// integer is clamped to kMaxHeaderInteger, so each field is a valid structured field.
std::vector<Header> rate_limit_headers(const Policy& policy, const Decision& decision);

/// The same headers in the same order, each handed to `emit(name, value)` without allocating:
/// for a server that writes them straight into its response. The views are valid during the
/// call only. Like the rest of this header: no state, no errors, callable from any thread.
void for_each_rate_limit_header(const Policy& policy, const Decision& decision,
                                absl::FunctionRef<void(std::string_view name, std::string_view value)> emit);

/// Whole seconds, rounded up, of a non-negative duration.
std::int64_t ceil_seconds(Micros d) noexcept;

}  // namespace floodgate
