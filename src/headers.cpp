#include "floodgate/headers.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include <fmt/format.h>

namespace floodgate {

std::int64_t ceil_seconds(Micros d) noexcept {
  if (d <= 0) return 0;
  return d / kMicrosPerSecond + (d % kMicrosPerSecond != 0 ? 1 : 0);
}

namespace {

// A field's text: on the stack up to 256 bytes (a policy of a few limits), on the heap past that.
// Every append is one copy of a known length (these fields are formatted for every decision the
// service answers).
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void push_back(char c) {
    if (size_ == capacity_) grow(size_ + 1);
    data_[size_++] = c;
  }
  void append(std::string_view text) {
    if (size_ + text.size() > capacity_) grow(size_ + text.size());
    std::memcpy(data_ + size_, text.data(), text.size());
    size_ += text.size();
  }
  void append(std::int64_t v) {
    const fmt::format_int text(v);
    append(std::string_view(text.data(), text.size()));
  }
  void clear() noexcept { size_ = 0; }
  [[nodiscard]] std::string_view view() const noexcept { return {data_, size_}; }

 private:
  void grow(std::size_t needed) {
    std::string bigger(std::max(2 * capacity_, needed), '\0');
    std::memcpy(bigger.data(), data_, size_);
    heap_ = std::move(bigger);
    data_ = heap_.data();
    capacity_ = heap_.size();
  }

  char inline_[256];
  std::string heap_;
  char* data_ = inline_;
  std::size_t size_ = 0;
  std::size_t capacity_ = sizeof inline_;
};

// The name of a limit as a structured-field string: printable ASCII with '"' and '\' escaped,
// other bytes as '_'; `<name>-<index>` for a limit of a multi-limit policy (index ≥ 0).
void append_sf_name(Buffer& out, std::string_view name, std::ptrdiff_t index) {
  out.push_back('"');
  const auto plain = [](char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; };
  const auto end = std::find_if_not(name.begin(), name.end(), plain);
  out.append(name.substr(0, static_cast<std::size_t>(end - name.begin())));  // a name is nearly always plain
  for (char c : name.substr(static_cast<std::size_t>(end - name.begin()))) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out.push_back(c);
    } else {
      out.push_back('_');
    }
  }
  if (index >= 0) {
    out.push_back('-');
    out.append(static_cast<std::int64_t>(index));
  }
  out.push_back('"');
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

LimitBalance balance_of(const Policy& policy, const Decision& d, std::size_t i) noexcept {
  const auto& limits = policy.limits();
  LimitBalance b{d.remaining, d.reset_after};
  if (limits.size() > 1 && d.balance_count == limits.size()) b = d.balances[i];
  b.remaining = std::clamp<std::int64_t>(b.remaining, 0, quota_of(policy, limits[i]).quota);
  return b;
}

namespace {

// After the named limit's item: every other limit with its own balance (draft-11: one item per
// policy), in the policy's order, when the storage reported them one by one.
void append_other_balances(Buffer& field, const Policy& policy, const Decision& d, std::ptrdiff_t current) {
  const auto& limits = policy.limits();
  if (limits.size() < 2 || d.balance_count != limits.size()) return;
  for (std::size_t i = 0; i < limits.size(); ++i) {
    if (static_cast<std::ptrdiff_t>(i) == current) continue;
    const LimitBalance b = balance_of(policy, d, i);
    field.append(", ");
    append_sf_name(field, policy.name(), static_cast<std::ptrdiff_t>(i));
    field.append(";r=");
    field.append(sf_int(b.remaining));
    field.append(";t=");
    field.append(sf_int(ceil_seconds(b.reset_after)));
  }
}

}  // namespace

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
    if (i > 0) field.append(", ");
    append_sf_name(field, policy.name(), index_of(i));
    if (limits[i].concurrent) {
      // The draft's quota unit for requests in progress; a lease's time to live is no window.
      field.append(";q=");
      field.append(sf_int(q.quota));
      field.append(";qu=\"concurrent-requests\"");
    } else {
      field.append(";q=");
      field.append(sf_int(q.quota));
      field.append(";w=");
      field.append(sf_int(q.window));
    }
  }
  emit("RateLimit-Policy", field.view());
  const std::int64_t remaining = sf_int(std::min(d.remaining, current_quota));
  const bool retry = !d.allowed && d.can_retry();
  const std::int64_t retry_after = retry ? std::max<std::int64_t>(1, ceil_seconds(d.retry_after)) : 0;
  // t is the named limit's reset (with several limits, `reset_after` is the whole key's: the
  // longest of them). Retry-After takes precedence over t; t never says "sooner" than it.
  const Micros named_reset = limits.size() > 1 && current >= 0 ? d.limit_reset_after : d.reset_after;
  const std::int64_t reset = sf_int(std::max(ceil_seconds(named_reset), retry_after));
  field.clear();
  append_sf_name(field, policy.name(), current);
  field.append(";r=");
  field.append(remaining);
  field.append(";t=");
  field.append(reset);
  append_other_balances(field, policy, d, current);
  emit("RateLimit", field.view());
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
