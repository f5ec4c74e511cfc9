// Answering a decided gRPC rate-limit request: a status per descriptor, the overall code, the
// per-rule counters and the optional rate-limit headers of the most constraining descriptor.
#include <algorithm>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "floodgate/headers.hpp"
#include "server/api/outage.hpp"
#include "server/rls/service.hpp"

namespace floodgate::server {

namespace {

// As envoyproxy/ratelimit: whole seconds, a fraction rounded up (Envoy's x-ratelimit-reset is
// this number of seconds).
void set_duration(google::protobuf::Duration& out, Micros us) {
  if (us < 0) us = 0;
  out.set_seconds((us + kMicrosPerSecond - 1) / kMicrosPerSecond);
}


// The decision of a block-list rule (requests_per_unit 0): always over, until the unit's end.
Decision deny_all(RlsUnit unit, Micros now) {
  const Micros period = rls_unit_period(unit);
  Decision d;
  d.allowed = false;
  d.period = period;
  d.reset_after = period - now % period;
  d.retry_after = kNever;
  return d;
}

void fill_status(const RlsItem& it, const Decision& d, bool denied, rlsv3::RateLimitResponse::DescriptorStatus& status);
void add_header(rlsv3::RateLimitResponse& response, std::string_view name, std::string_view value);

// A blocking descriptor that no retry of the same cost can pass: a 0 limit (a block list) or hits
// above the limit.
bool never_fits(const RlsItem& it) {
  return blocks(it.shadow, it.decision) && (it.deny_all || !it.decision.can_retry());
}

// The headers of such a descriptor. rate_limit_headers would give none (no policy) or
// `Reset: 0` without `Retry-After`; here every field is the time to the end of the rule's unit
// window, the soonest the answer can change (docs/envoy.md).
std::vector<Header> never_fits_headers(const std::string& domain, const RlsItem& it, Micros now) {
  const std::string name = it.rule != nullptr ? fmt::format("{}/{}", domain, it.rule->path) : domain + "/override";
  const Micros period = rls_unit_period(it.unit);
  const std::string q = std::to_string(it.requests_per_unit);
  const std::string t = std::to_string(std::max<std::int64_t>(1, ceil_seconds(period - now % period)));
  return {{"RateLimit-Policy", fmt::format("\"{}\";q={};w={}", name, q, ceil_seconds(period))},
          {"RateLimit", fmt::format("\"{}\";r=0;t={}", name, t)},
          {"X-RateLimit-Limit", q},
          {"X-RateLimit-Remaining", "0"},
          {"X-RateLimit-Reset", t},
          {"Retry-After", t}};
}

}  // namespace

void RlsService::count(const RlsItem& it, const Decision& d, bool charged) {
  if (it.slot >= RlsMetrics::kMaxSeries) return;
  const auto hits = static_cast<std::uint64_t>(it.hits);
  metrics_.add(it.slot, RlsMetrics::kTotalHits, hits);
  if (d.degraded) {
    metrics_.add(it.slot, RlsMetrics::kDegraded, hits);
  } else if (!d.allowed) {
    metrics_.add(it.slot, RlsMetrics::kOverLimit, hits);
    if (it.shadow) metrics_.add(it.slot, RlsMetrics::kShadowMode, hits);
  } else if (charged) {
    metrics_.add(it.slot, RlsMetrics::kWithinLimit, hits);
    if (d.remaining * 5 < d.limit) metrics_.add(it.slot, RlsMetrics::kNearLimit, hits);
  }
}

namespace {
// A quota counted as envoyproxy counts (RlsItem::counter): the storage committed every hit under
// an amount no count reaches; the count is limit − remaining (plus this call's hits when the call
// was not committed), and, as envoyproxy decides, the descriptor is over when the count passes
// requests_per_unit.
void counted_verdict(RlsItem& it, bool charged) {
  Decision& d = it.decision;
  const std::int64_t count = d.limit - d.remaining + (charged ? 0 : it.hits);
  const std::int64_t limit = it.requests_per_unit;
  d.allowed = count <= limit;
  d.limit = limit;
  d.remaining = std::max<std::int64_t>(0, limit - count);
  d.retry_after = d.allowed ? 0 : d.reset_after;
  d.delay = 0;
}

// The error for a request that the storage refused (never a storage failure: Limiter), if any.
std::optional<grpc::Status> refusal(const RlsCall& p) {
  for (std::size_t i = 0; i < p.batch.size(); ++i) {
    if (!p.results[i].ok()) {
      const bool bound = p.results[i].status().code() == absl::StatusCode::kResourceExhausted;
      return grpc::Status(bound ? grpc::StatusCode::RESOURCE_EXHAUSTED : grpc::StatusCode::INVALID_ARGUMENT,
                          std::string(p.results[i].status().message()));
    }
  }
  return std::nullopt;
}

// The rate-limit headers of the response: of a descriptor that never fits (when no retryable
// block is at hand), else of the constraining descriptor.
void add_rate_limit_headers(const RlsCall& p, const RlsItem* constraining, bool overall_over,
                            rlsv3::RateLimitResponse& response) {
  const bool retryable_block = constraining != nullptr && blocks(constraining->shadow, constraining->decision) &&
                               constraining->decision.can_retry();
  const auto never = std::find_if(p.items.begin(), p.items.end(), never_fits);
  if (!retryable_block && never != p.items.end()) {
    for (const auto& [name, value] : never_fits_headers(p.domain, *never, p.now)) add_header(response, name, value);
  } else if (constraining != nullptr) {
    Decision d = constraining->decision;
    // A shadow-mode rule, or a quota over its limit in a request that passes: the headers say
    // what is left (0), with no Retry-After for a request that was not refused.
    if (constraining->shadow || (constraining->quota && !overall_over)) d.allowed = true;
    for_each_rate_limit_header(*constraining->policy, d, [&](std::string_view name, std::string_view value) {
      add_header(response, name, value);
    });
  }
}

}  // namespace

grpc::Status RlsService::respond(RlsCall& p, rlsv3::RateLimitResponse& response) {
  if (std::optional<grpc::Status> refused = refusal(p)) return *refused;
  const RlsItem* constraining = nullptr;
  bool overall_over = false;
  bool outage = false;  // a fail-closed descriptor refused because the storage failed
  int quotas = 0;
  int quotas_over = 0;
  std::vector<const RlsMeta*> passed;  // the metadata of the descriptors that pass
  for (RlsItem& it : p.items) {
    auto* status = response.add_statuses();
    status->set_code(rlsv3::RateLimitResponse::OK);
    if (it.rule == nullptr && it.policy == nullptr && !it.deny_all) {  // no match (or replaced)
      // Under QUOTA_MODE it is a quota that passed, as envoyproxy counts it: a request with one
      // is never refused by its quotas.
      quotas += settings_.quota_mode ? 1 : 0;
      continue;
    }
    if (it.rule != nullptr && it.rule->unlimited && it.policy == nullptr && !it.deny_all) {
      status->set_limit_remaining(std::numeric_limits<std::uint32_t>::max());
      continue;
    }
    it.decision = it.deny_all ? deny_all(it.unit, p.now) : *p.results[it.result];
    if (it.counter != nullptr && !it.decision.degraded) counted_verdict(it, p.charged);
    // Never more than the unit: a sliding window counter is back to full capacity only after up
    // to two units and a moving window a microsecond after one, but what Envoy shows as
    // x-ratelimit-reset is the rule's window, as with envoyproxy's fixed windows. A calendar
    // period may be longer than its unit's nominal length (a 31-day month, a 25-hour day): its
    // fixed window's reset is its real end, left as it is.
    const bool calendar = it.policy != nullptr && it.policy->limits().front().calendar;
    if (!calendar) it.decision.reset_after = std::min(it.decision.reset_after, rls_unit_period(it.unit));
    count(it, it.decision, p.charged);
    const bool denied = blocks(it.shadow, it.decision);
    // quota_mode: the descriptor says OVER_LIMIT; the request is refused only when every
    // quota-mode descriptor of it is over.
    quotas += it.quota ? 1 : 0;
    quotas_over += it.quota && denied ? 1 : 0;
    overall_over = overall_over || (denied && !it.quota);
    outage = outage || (denied && is_outage(it.decision));
    fill_status(it, it.decision, denied, *status);
    if (!denied && it.rule != nullptr && it.rule->metadata != nullptr) passed.push_back(it.rule->metadata.get());
    if (it.policy == nullptr) continue;
    const bool was_denied = constraining != nullptr && blocks(constraining->shadow, constraining->decision);
    if (constraining == nullptr || (denied && !was_denied) ||
        (denied == was_denied && it.decision.remaining < constraining->decision.remaining)) {
      constraining = &it;
    }
  }
  overall_over = (overall_over || (quotas > 0 && quotas_over == quotas)) && !settings_.shadow_mode;
  if (settings_.dynamic_metadata) rls_dynamic_metadata(*p.request, passed, *response.mutable_dynamic_metadata());
  response.set_overall_code(overall_over ? rlsv3::RateLimitResponse::OVER_LIMIT : rlsv3::RateLimitResponse::OK);
  if (settings_.response_headers) add_rate_limit_headers(p, constraining, overall_over, response);
  // Envoy answers OVER_LIMIT with its filter's status (429): this header tells an outage apart.
  if (overall_over && outage) add_header(response, kOutageHeader, kOutageValue);
  return grpc::Status::OK;
}

namespace {

void add_header(rlsv3::RateLimitResponse& response, std::string_view name, std::string_view value) {
  auto* h = response.add_response_headers_to_add();
  h->set_key(name.data(), name.size());
  h->set_value(value.data(), value.size());
}

void fill_status(const RlsItem& it, const Decision& d, bool denied,
                 rlsv3::RateLimitResponse::DescriptorStatus& status) {
  status.set_code(denied ? rlsv3::RateLimitResponse::OVER_LIMIT : rlsv3::RateLimitResponse::OK);
  auto* limit = status.mutable_current_limit();
  if (it.rule != nullptr) limit->set_name(it.rule->name);
  limit->set_requests_per_unit(it.requests_per_unit);
  limit->set_unit(static_cast<rlsv3::RateLimitResponse::RateLimit::Unit>(it.unit));
  // remaining ≤ requests_per_unit, as Envoy's X-RateLimit-Limit/-Remaining read them: a bucket
  // with a burst above the rate may hold more, and the lower figure is still a true promise.
  std::int64_t remaining = std::max<std::int64_t>(0, d.remaining);
  if (it.requests_per_unit > 0) remaining = std::min<std::int64_t>(remaining, it.requests_per_unit);
  status.set_limit_remaining(static_cast<std::uint32_t>(
      std::min<std::int64_t>(remaining, std::numeric_limits<std::uint32_t>::max())));
  set_duration(*status.mutable_duration_until_reset(), d.reset_after);
}

}  // namespace

}  // namespace floodgate::server
