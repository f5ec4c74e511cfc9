#include "floodgate/headers.hpp"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

namespace floodgate {

std::int64_t ceil_seconds(Micros d) noexcept {
  if (d <= 0) return 0;
  return d / kMicrosPerSecond + (d % kMicrosPerSecond != 0 ? 1 : 0);
}

namespace {

using Buffer = fmt::memory_buffer;  // on the stack up to 500 bytes: no allocation per decision

// The name of a limit as a structured-field string: printable ASCII with '"' and '\' escaped,
// other bytes as '_'; `<name>-<index>` for a limit of a multi-limit policy (index ≥ 0).
void append_sf_name(Buffer& out, std::string_view name, std::ptrdiff_t index) {
  out.push_back('"');
  for (char c : name) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out.push_back(c);
    } else {
      out.push_back('_');
    }
  }
  if (index >= 0) fmt::format_to(fmt::appender(out), "-{}", index);
  out.push_back('"');
}

std::string_view view(const Buffer& b) noexcept { return {b.data(), b.size()}; }

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

void for_each_rate_limit_header(const Policy& policy, const Decision& d,
                                absl::FunctionRef<void(std::string_view, std::string_view)> emit) {
  const auto& limits = policy.limits();
  const auto index_of = [&](std::size_t i) { return limits.size() == 1 ? std::ptrdiff_t{-1} : std::ptrdiff_t(i); };
  Buffer field;
  std::ptrdiff_t current = -1;  // the constraining limit's name: the policy's when none matches
  std::int64_t current_quota = d.limit;
  for (std::size_t i = 0; i < limits.size(); ++i) {
    const Quota q = quota_of(policy, limits[i]);
    if (limits[i].amount == d.limit && limits[i].period == d.period) {
      current = index_of(i);
      current_quota = q.quota;
    }
    if (i > 0) fmt::format_to(fmt::appender(field), ", ");
    append_sf_name(field, policy.name(), index_of(i));
    if (limits[i].concurrent) {
      // The draft's quota unit for requests in progress; a lease's time to live is no window.
      fmt::format_to(fmt::appender(field), ";q={};qu=\"concurrent-requests\"", sf_int(q.quota));
    } else {
      fmt::format_to(fmt::appender(field), ";q={};w={}", sf_int(q.quota), sf_int(q.window));
    }
  }
  emit("RateLimit-Policy", view(field));
  const std::int64_t remaining = sf_int(std::min(d.remaining, current_quota));
  const bool retry = !d.allowed && d.can_retry();
  const std::int64_t retry_after = retry ? std::max<std::int64_t>(1, ceil_seconds(d.retry_after)) : 0;
  // t is the named limit's reset (with several limits, `reset_after` is the whole key's: the
  // longest of them). Retry-After takes precedence over t; t never says "sooner" than it.
  const Micros named_reset = limits.size() > 1 && current >= 0 ? d.limit_reset_after : d.reset_after;
  const std::int64_t reset = sf_int(std::max(ceil_seconds(named_reset), retry_after));
  field.clear();
  append_sf_name(field, policy.name(), current);
  fmt::format_to(fmt::appender(field), ";r={};t={}", remaining, reset);
  emit("RateLimit", view(field));
  const auto integer = [&](std::string_view name, std::int64_t v) {
    const fmt::format_int text(v);
    emit(name, std::string_view(text.data(), text.size()));
  };
  integer("X-RateLimit-Limit", sf_int(current_quota));
  integer("X-RateLimit-Remaining", remaining);
  integer("X-RateLimit-Reset", reset);
  if (retry) integer("Retry-After", sf_int(retry_after));
}

std::vector<Header> rate_limit_headers(const Policy& policy, const Decision& d) {
  std::vector<Header> out;
  out.reserve(6);
  for_each_rate_limit_header(policy, d, [&](std::string_view name, std::string_view value) {
    out.emplace_back(std::string(name), std::string(value));
  });
  return out;
}

}  // namespace floodgate
