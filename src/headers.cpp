#include "floodgate/headers.hpp"

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

}  // namespace

std::vector<Header> rate_limit_headers(const Policy& policy, const Decision& d) {
  std::vector<Header> out;
  const auto& limits = policy.limits();
  std::string policy_field;
  std::string current_name = policy.name();
  for (std::size_t i = 0; i < limits.size(); ++i) {
    const std::string item_name =
        limits.size() == 1 ? policy.name() : absl::StrCat(policy.name(), "-", i);
    if (limits[i].amount == d.limit && limits[i].period == d.period) current_name = item_name;
    if (i > 0) policy_field += ", ";
    absl::StrAppend(&policy_field, sf_string(item_name), ";q=", limits[i].amount,
                    ";w=", std::max<std::int64_t>(1, ceil_seconds(limits[i].period)));
  }
  out.emplace_back("RateLimit-Policy", std::move(policy_field));
  const std::int64_t reset = ceil_seconds(d.reset_after);
  out.emplace_back("RateLimit", absl::StrCat(sf_string(current_name), ";r=", d.remaining,
                                             ";t=", reset));
  out.emplace_back("X-RateLimit-Limit", absl::StrCat(d.limit));
  out.emplace_back("X-RateLimit-Remaining", absl::StrCat(d.remaining));
  out.emplace_back("X-RateLimit-Reset", absl::StrCat(reset));
  if (!d.allowed && d.can_retry()) {
    out.emplace_back("Retry-After",
                     absl::StrCat(std::max<std::int64_t>(1, ceil_seconds(d.retry_after))));
  }
  return out;
}

}  // namespace floodgate
