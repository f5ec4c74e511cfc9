// The rules' units, descriptor tree keys and counters, and their check against a storage (the
// rule files' YAML reader: rules_yaml.cpp).
#include "server/rls/rules.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "storage/url.hpp"

namespace floodgate::server {

Micros rls_unit_period(RlsUnit unit) noexcept {
  switch (unit) {
    case RlsUnit::kSecond: return kMicrosPerSecond;
    case RlsUnit::kMinute: return 60 * kMicrosPerSecond;
    case RlsUnit::kHour: return 3'600 * kMicrosPerSecond;
    case RlsUnit::kDay: return nominal_period(CalendarUnit::kDay);
    case RlsUnit::kWeek: return nominal_period(CalendarUnit::kWeek);
    case RlsUnit::kMonth: return nominal_period(CalendarUnit::kMonth);
    case RlsUnit::kYear: return nominal_period(CalendarUnit::kYear);
    case RlsUnit::kUnknown: break;
  }
  return 0;
}

RlsUnit parse_rls_unit(std::string_view text) noexcept {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "second") return RlsUnit::kSecond;
  if (lower == "minute") return RlsUnit::kMinute;
  if (lower == "hour") return RlsUnit::kHour;
  if (lower == "day") return RlsUnit::kDay;
  if (lower == "week") return RlsUnit::kWeek;
  if (lower == "month") return RlsUnit::kMonth;
  if (lower == "year") return RlsUnit::kYear;
  return RlsUnit::kUnknown;
}

const RlsDomain* RlsConfig::find(std::string_view domain) const {
  const auto it = domains.find(absl::string_view(domain.data(), domain.size()));
  return it == domains.end() ? nullptr : it->second.get();
}

std::string rls_child_key(std::string_view key, std::string_view value) {
  std::string k;
  k.reserve(key.size() + value.size() + 1);
  k.append(key).push_back('\0');
  k.append(value);
  return k;
}

std::string rls_default_key(std::string_view key) {
  std::string k(key);
  k.push_back('\1');
  return k;
}

std::shared_ptr<const Policy> rls_counter(const Policy& policy) {
  if (policy.strategy() != Strategy::kFixedWindow || policy.anchor() != Anchor::kClock || policy.limits().size() != 1) {
    return nullptr;
  }
  const Limit& l = policy.limits().front();
  auto big = l.calendar ? Limit::make(kMaxAmount, l.calendar) : Limit::make(kMaxAmount, l.period);
  if (!big.ok()) return nullptr;
  auto p = Policy::make(policy.name(), policy.strategy(), std::vector<Limit>{*big}, policy.options());
  if (!p.ok()) return nullptr;
  return std::make_shared<const Policy>(p->with_identity(policy.kind(), policy.identity()));
}

absl::Status check_rules_storage(const RlsConfig& rules, const std::string& storage_url) {
  auto check = check_storage_url(storage_url);
  if (!check.ok()) return check.status();
  for (std::size_t i = 0; i < rules.rules.size(); ++i) {
    const RlsRule& r = *rules.rules[i];
    if (r.policy == nullptr) continue;
    if (auto s = (*check)(*r.policy); !s.ok()) {
      return absl::InvalidArgumentError(fmt::format("{}: domain \"{}\", rule \"{}\": {}", rules.source,
                                                    rules.rule_domains[i], r.path, std::string(s.message())));
    }
  }
  return absl::OkStatus();
}

}  // namespace floodgate::server
