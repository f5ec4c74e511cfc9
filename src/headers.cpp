#include "floodgate/headers.hpp"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace floodgate {

std::int64_t ceil_seconds(Micros d) noexcept {
  if (d <= 0) return 0;
  return d / kMicrosPerSecond + (d % kMicrosPerSecond != 0 ? 1 : 0);
}

namespace {

// The policy name as a structured-field string: printable ASCII with '"' and '\' escaped.
std::string sf_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c >= 0x20 && c < 0x7f) {
      out += c;
    } else {
      out += '_';
    }
  }
  out += '"';
  return out;
}

// An RFC 8941 integer has at most 15 digits: larger figures (amounts and burst go up to 2^53)
// are reported as the largest one, which a client reads as "more than it will ever use".
std::int64_t sf_int(std::int64_t v) noexcept { return std::clamp<std::int64_t>(v, 0, kMaxHeaderInteger); }

}  // namespace

Quota quota_of(const Policy& policy, const Limit& l) noexcept {
  if (!uses_burst(policy.strategy())) return {l.amount, std::max<std::int64_t>(1, ceil_seconds(l.period))};
  // A bucket holds `capacity` and refills `amount` per `period`: all of it in capacity·period/amount.
  const int128 span = static_cast<int128>(l.capacity()) * l.period / l.amount;
  const Micros refill = span > INT64_MAX ? INT64_MAX : static_cast<Micros>(span);
  return {l.capacity(), std::max<std::int64_t>(1, ceil_seconds(refill))};
}

std::int64_t decision_quota(const Policy& policy, const Decision& d) noexcept {
  for (const Limit& l : policy.limits()) {
    if (l.amount == d.limit && l.period == d.period) return quota_of(policy, l).quota;
  }
  return d.limit;
}

std::vector<Header> rate_limit_headers(const Policy& policy, const Decision& d) {
  std::vector<Header> out;
  const auto& limits = policy.limits();
  std::string policy_field;
  std::string current_name = policy.name();
  std::int64_t current_quota = d.limit;
  for (std::size_t i = 0; i < limits.size(); ++i) {
    const std::string item_name =
        limits.size() == 1 ? policy.name() : absl::StrCat(policy.name(), "-", i);
    const Quota q = quota_of(policy, limits[i]);
    if (limits[i].amount == d.limit && limits[i].period == d.period) {
      current_name = item_name;
      current_quota = q.quota;
    }
    if (i > 0) policy_field += ", ";
    absl::StrAppend(&policy_field, sf_string(item_name), ";q=", sf_int(q.quota), ";w=", sf_int(q.window));
  }
  out.emplace_back("RateLimit-Policy", std::move(policy_field));
  const std::int64_t remaining = sf_int(std::min(d.remaining, current_quota));
  const bool retry = !d.allowed && d.can_retry();
  const std::int64_t retry_after = retry ? std::max<std::int64_t>(1, ceil_seconds(d.retry_after)) : 0;
  // Retry-After takes precedence over t; t never says "sooner" than it.
  const std::int64_t reset = sf_int(std::max(ceil_seconds(d.reset_after), retry_after));
  out.emplace_back("RateLimit", absl::StrCat(sf_string(current_name), ";r=", remaining, ";t=", reset));
  out.emplace_back("X-RateLimit-Limit", absl::StrCat(sf_int(current_quota)));
  out.emplace_back("X-RateLimit-Remaining", absl::StrCat(remaining));
  out.emplace_back("X-RateLimit-Reset", absl::StrCat(reset));
  if (retry) out.emplace_back("Retry-After", absl::StrCat(sf_int(retry_after)));
  return out;
}

}  // namespace floodgate
