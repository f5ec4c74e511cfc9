// ShouldRateLimit without sockets: validating a call, matching its descriptors, deciding them.
#include "server/rls/service.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <string_view>

#include <fmt/format.h>

#include "floodgate/headers.hpp"
#include "floodgate/limiter.hpp"
#include "server/rls/call.hpp"
#include "server/rls/descriptor_keys.hpp"
#include "storage/envoyproxy_layout.hpp"

namespace floodgate::server {

// ---- the service --------------------------------------------------------------------------------

RlsService::RlsService(Limiter& limiter, RlsSettings settings)
    : RlsService(nullptr, &limiter, std::move(settings)) {}

RlsService::RlsService(std::shared_ptr<Storage> storage, std::shared_ptr<const Clock> clock, RlsSettings settings)
    : RlsService(std::make_unique<Limiter>(std::move(storage), std::move(clock)), nullptr, std::move(settings)) {}

RlsService::RlsService(std::unique_ptr<Limiter> owned, Limiter* borrowed, RlsSettings settings)
    : own_limiter_(std::move(owned)),
      limiter_(own_limiter_ ? *own_limiter_ : *borrowed),
      settings_(std::move(settings)),
      envoyproxy_keys_(limiter_.storage().traits().envoyproxy_keys),
      installed_(nullptr) {
  limiter_.expect_groups();  // multi-descriptor calls are groups: single calls on their keys wait for them
  reload(std::make_shared<const RlsConfig>());
  if (settings_.batching) {
    coalescer_ = std::make_unique<Coalescer<Job>>(settings_.batch_threads,
                                                  [this](std::vector<Job>& jobs) { decide_jobs(jobs); });
  }
}

RlsService::~RlsService() { coalescer_.reset(); }

void RlsService::reload(std::shared_ptr<const RlsConfig> config) {
  auto in = std::make_shared<RlsInstalled>();
  std::vector<std::pair<std::string, std::string>> rules;
  for (std::size_t i = 0; i < config->rules.size(); ++i) rules.emplace_back(config->rule_domains[i], config->rules[i]->path);
  metrics_.retain(rules);  // the series of removed rules go
  for (std::size_t i = 0; i < config->rules.size(); ++i) {
    if (auto s = metrics_.slot(config->rule_domains[i], config->rules[i]->path)) {
      in->slots.emplace(config->rules[i], *s);
    }
  }
  const std::shared_ptr<const RlsInstalled> old = installed_.get();
  in->config = std::move(config);
  installed_.publish(std::move(in));
  // Overrides of the old rules are compiled again if they are still sent. What is counted under
  // the old rules stays with its state id until it expires, on every store (docs/configuration.md,
  // "Reload"); budget slices end now, giving back what they did not use.
  overrides_.clear();
  if (old != nullptr) limiter_.flush_budgets();
}

grpc::Status RlsService::validate(const rlsv3::RateLimitRequest& r) const {
  auto invalid = [](std::string message) { return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message); };
  if (r.ByteSizeLong() > settings_.max_message_bytes) {
    return invalid(fmt::format("the request is larger than {} bytes", settings_.max_message_bytes));
  }
  if (r.domain().empty()) return invalid("the domain is empty");
  if (r.domain().size() > settings_.max_string_bytes) {
    return invalid(fmt::format("the domain is longer than {} bytes", settings_.max_string_bytes));
  }
  // NUL never reaches a key, a rule lookup or a metric name (the rule files refuse it too).
  if (r.domain().find('\0') != std::string::npos) return invalid("the domain has a NUL byte");
  if (r.descriptors_size() == 0) return invalid("the request has no descriptors");
  if (static_cast<std::size_t>(r.descriptors_size()) > settings_.max_descriptors) {
    return invalid(fmt::format("the request has more than {} descriptors", settings_.max_descriptors));
  }
  for (int i = 0; i < r.descriptors_size(); ++i) {
    const auto& d = r.descriptors(i);
    if (d.entries_size() == 0) return invalid(fmt::format("descriptor {} has no entries", i));
    if (static_cast<std::size_t>(d.entries_size()) > settings_.max_entries) {
      return invalid(fmt::format("descriptor {} has more than {} entries", i, settings_.max_entries));
    }
    for (const auto& e : d.entries()) {
      if (e.key().empty()) return invalid(fmt::format("descriptor {} has an entry with an empty key", i));
      if (e.key().size() > settings_.max_string_bytes || e.value().size() > settings_.max_string_bytes) {
        return invalid(fmt::format("descriptor {} has a key or value longer than {} bytes", i,
                                   settings_.max_string_bytes));
      }
      if (e.key().find('\0') != std::string::npos || e.value().find('\0') != std::string::npos) {
        return invalid(fmt::format("descriptor {} has a NUL byte in a key or value", i));
      }
    }
    if (d.has_hits_addend() && d.hits_addend().value() > static_cast<std::uint64_t>(kMaxAmount)) {
      return invalid(fmt::format("descriptor {}: hits_addend is larger than 2^53", i));
    }
    if (d.has_limit()) {
      if (!rlsv3::RateLimitResponse::RateLimit::Unit_IsValid(d.limit().unit()) ||
          rls_unit_period(static_cast<RlsUnit>(d.limit().unit())) == 0) {
        return invalid(fmt::format("descriptor {}: the limit override has no valid unit", i));
      }
    }
  }
  return grpc::Status::OK;
}

std::shared_ptr<const Policy> RlsService::override_policy(const RlsDomain& domain, const RlsRule* rule,
                                                          std::uint32_t requests_per_unit, RlsUnit unit,
                                                          bool counter) {
  const Strategy strategy = rule != nullptr ? rule->strategy : Strategy::kFixedWindow;
  const PolicyOptions options = rule != nullptr ? rule->options : PolicyOptions{};
  const std::string name = fmt::format("{}/{}/override", domain.domain, rule != nullptr ? rule->path : "");
  // Cached by the rule's identity (length-prefixed parts) and the override: never by its name or
  // path, which two rules may share.
  // A rule's calendar stays with an override in the rule's own unit (a billing month overridden
  // to another amount per billing month); an override in another unit is envoyproxy's window.
  const Calendar calendar = rule != nullptr && rule->unit == unit ? rule->calendar : Calendar{};
  std::string id = fmt::format("{}|{}|{}|{}|{}", requests_per_unit, static_cast<int>(unit), static_cast<int>(strategy),
                               options.burst, static_cast<int>(options.fail));
  if (calendar) {
    const std::string zone = calendar.zone.name();
    fmt::format_to(std::back_inserter(id), "|~{}:{}:{}", calendar.anchor_day, zone.size(), zone);
  }
  for (const std::string& part : rule != nullptr ? rule->identity : std::vector<std::string>{domain.domain}) {
    fmt::format_to(std::back_inserter(id), "|{}:{}", part.size(), part);
  }
  if (counter) {  // the override's fixed window as a quota counts (rls_counter), cached beside it
    const std::string counter_id = id + "|counter";
    if (auto cached = overrides_.find(counter_id)) return cached;
    auto plain = override_policy(domain, rule, requests_per_unit, unit);
    auto made = plain != nullptr ? rls_counter(*plain) : nullptr;
    return made != nullptr ? overrides_.add(counter_id, std::move(made)) : nullptr;
  }
  if (auto cached = overrides_.find(id)) return cached;
  Limit limit;
  limit.amount = requests_per_unit;
  limit.period = rls_unit_period(unit);
  limit.concurrent = strategy == Strategy::kConcurrency;
  if (calendar) limit = *Limit::make(requests_per_unit, calendar);
  auto p = Policy::make(name, strategy, std::vector<Limit>{limit}, options);
  if (!p.ok()) return nullptr;
  // The rule's identity under the override kind: never the state of an HTTP policy or of
  // another rule, whatever the names and paths.
  auto shared = std::make_shared<const Policy>(p->with_identity(
      PolicyKind::kRuleOverride, rule != nullptr ? rule->identity : std::vector<std::string>{domain.domain}));
  return overrides_.add(id, std::move(shared));
}

namespace {

using Descriptor = ::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;

// A rule with a reservation: its id entry is taken out before matching, and never counted in
// the key; if the rule matched without it does not name that entry, the descriptor is matched
// as it came. The descriptor to match: `descriptor`, or `without_id` (and `it` has the
// reservation's id and time to live).
const Descriptor& without_reservation_id(const Descriptor& descriptor, const RlsDomain& domain, Descriptor& without_id,
                                         RlsItem& it) {
  if (domain.reservation_id_keys.empty()) return descriptor;
  for (int e = 0; e < descriptor.entries_size(); ++e) {
    const auto& entry = descriptor.entries(e);
    if (std::find(domain.reservation_id_keys.begin(), domain.reservation_id_keys.end(), entry.key()) ==
        domain.reservation_id_keys.end()) {
      continue;
    }
    without_id = descriptor;
    without_id.mutable_entries()->DeleteSubrange(e, 1);
    const RlsRule* rule = domain.match(without_id.entries());
    if (rule != nullptr && rule->reservation_id_key == entry.key() && !entry.value().empty()) {
      it.reservation = entry.value();
      it.reservation_ttl = rule->reservation_ttl;
      return without_id;
    }
    break;
  }
  return descriptor;
}

// The descriptor's hits: its own hits_addend, else the request's (0 means 1 in both).
std::int64_t hits_of(const rlsv3::RateLimitRequest& request, const Descriptor& d) {
  const std::int64_t request_hits = request.hits_addend() == 0 ? 1 : static_cast<std::int64_t>(request.hits_addend());
  return !d.has_hits_addend() ? request_hits
         : d.hits_addend().value() == 0 ? 1
                                        : static_cast<std::int64_t>(d.hits_addend().value());
}

}  // namespace

// One descriptor: its rule, hits, limit (or override) and storage key.
grpc::Status RlsService::resolve(const rlsv3::RateLimitRequest& request, int i, const RlsDomain& domain,
                                 const RlsInstalled& in, RlsItem& it) {
  Descriptor without_id;
  const auto& d = without_reservation_id(request.descriptors(i), domain, without_id, it);
  it.rule = domain.match(d.entries());
  std::vector<RlsStep> steps;  // how each entry matched, for rules whose key or label need it
  if (it.rule != nullptr && it.rule->walk) it.rule = domain.walk(d.entries(), steps);
  const std::vector<RlsStep>* walked = steps.empty() ? nullptr : &steps;
  it.hits = hits_of(request, d);
  if (it.rule != nullptr) {
    it.shadow = it.rule->shadow_mode;
    it.requests_per_unit = it.rule->requests_per_unit;
    it.unit = it.rule->unit;
    it.policy = it.rule->unlimited ? nullptr : it.rule->policy;
    if (auto s = in.slots.find(it.rule); s != in.slots.end()) it.slot = s->second;
    it.quota = it.rule->quota_mode || settings_.quota_mode;
    if (it.rule->detailed_metric || walked != nullptr) {
      // ERL's series name (detailed values, value_to_metric): its own bound (rls/metrics.hpp).
      std::string label = rls_metric_label(d, walked, it.rule->detailed_metric);
      if (label != it.rule->path) {
        if (auto s = metrics_.detailed_slot(domain.domain, it.rule->path, label)) it.slot = *s;
      }
    }
  }
  if (d.has_limit()) {  // the request's own limit replaces the configured one
    it.requests_per_unit = d.limit().requests_per_unit();
    it.unit = static_cast<RlsUnit>(d.limit().unit());
    it.policy = it.requests_per_unit > 0 ? override_policy(domain, it.rule, it.requests_per_unit, it.unit) : nullptr;
    if (it.requests_per_unit > 0 && it.policy == nullptr) {  // e.g. the rule's burst does not fit it
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, fmt::format("descriptor {}: invalid limit override", i));
    }
    it.shadow = false;                  // as envoyproxy: a limit Envoy sends is enforced, never shadowed,
    it.quota = settings_.quota_mode;    // and a quota only under QUOTA_MODE (never by the rule's quota_mode)
    walked = nullptr;   // and counted per descriptor, never shared
  }
  // A quota on a fixed window counts every hit, even past its limit, as envoyproxy's counters do
  // (a reservation keeps its own accounting). Its hits_addend of 0 is then a check that charges
  // nothing, as in envoyproxy; elsewhere 0 means 1: a rule that never counts past its limit would
  // pass every check of 0, and the usage charged at the end of the stream would stop counting
  // there (docs/envoy.md).
  if (it.quota && it.policy != nullptr && it.reservation.empty()) {
    it.counter = d.has_limit() ? override_policy(domain, it.rule, it.requests_per_unit, it.unit, /*counter=*/true)
                               : it.rule->counter;
  }
  // A reservation's usage of 0 is 0 (a settle of nothing used), when the descriptor says so.
  if ((!it.reservation.empty() || it.counter != nullptr) && d.has_hits_addend()) {
    it.hits = static_cast<std::int64_t>(d.hits_addend().value());
  }
  it.deny_all = it.requests_per_unit == 0 && it.unit != RlsUnit::kUnknown;  // a block list
  if (it.policy != nullptr) {
    it.key = envoyproxy_keys_ && envoyproxy_window(*it.policy) ? rls_envoyproxy_key(request.domain(), d, walked)
                                                               : rls_storage_key(request.domain(), d, walked);
  }
  return grpc::Status::OK;
}

namespace {
// `replaces`: a matched rule that another matched rule names is not applied.
template <class T>
void apply_replaces(std::vector<T>& items) {
  for (const T& a : items) {
    if (a.rule == nullptr || a.rule->replaces.empty()) continue;
    for (T& b : items) {
      if (&a == &b || b.rule == nullptr || b.rule->name.empty()) continue;
      for (const std::string& name : a.rule->replaces) {
        if (name == b.rule->name) {
          b = T{};
          break;
        }
      }
    }
  }
}

}  // namespace

grpc::Status RlsService::prepare(const rlsv3::RateLimitRequest& request, RlsCall& p) {
  if (grpc::Status s = validate(request); !s.ok()) return s;
  p.request = &request;
  p.installed = installed_.get();
  p.domain = request.domain();
  const RlsDomain* domain = p.installed->config->find(request.domain());
  p.items.resize(static_cast<std::size_t>(request.descriptors_size()));
  for (int i = 0; i < request.descriptors_size() && domain != nullptr; ++i) {
    if (grpc::Status s = resolve(request, i, *domain, *p.installed, p.items[static_cast<std::size_t>(i)]); !s.ok()) {
      return s;
    }
  }
  apply_replaces(p.items);
  for (RlsItem& it : p.items) {
    if (it.policy != nullptr) {
      it.result = p.batch.size();
      p.batch.push_back({(it.counter ? it.counter : it.policy).get(), it.key, it.hits, Effect::kHit, it.shadow || it.quota});
      if (!it.reservation.empty()) {
        p.batch.back().effect = Effect::kReserveOrSettle;
        p.batch.back().reservation = it.reservation;
        p.batch.back().ttl = it.reservation_ttl;
      }
    }
    p.over = p.over || (it.deny_all && !it.shadow && !it.quota);
  }
  p.results.resize(p.batch.size());
  return grpc::Status::OK;
}

// One storage call: atomic. Several: one group call, all or nothing (shadow-mode rules never
// block the others); the Limiter makes a group atomic within this process where the storage's
// group call is not atomic by itself.
void RlsService::decide(RlsCall& p) {
  p.now = limiter_.clock().now();
  if (p.batch.empty()) return;
  if (p.over) {  // a block-list rule denies: report the others' state, charge nothing
    for (auto& b : p.batch) b.effect = Effect::kTest;
    limiter_.decide(p.batch, p.now, p.results);
    return;
  }
  if (p.single_hit()) {
    limiter_.decide(p.batch, p.now, p.results);
    p.charged = true;
    return;
  }
  p.charged = limiter_.decide_group(p.batch, p.now, p.results);
  for (const RlsItem& it : p.items) {
    if (it.policy != nullptr && p.results[it.result].ok()) {
      p.over = p.over || blocks(it.shadow || it.quota, *p.results[it.result]);
    }
  }
  // Not committed with no item blocking: a storage error (the fail mode decided) or a request
  // that came between a non-atomic group's calls; nothing more is charged either way.
}

grpc::Status RlsService::should_rate_limit(const rlsv3::RateLimitRequest& request,
                                           rlsv3::RateLimitResponse& response) {
  RlsCall p;
  if (grpc::Status s = prepare(request, p); !s.ok()) return s;
  decide(p);
  return respond(p, response);
}

void RlsService::should_rate_limit_async(const rlsv3::RateLimitRequest& request,
                                         rlsv3::RateLimitResponse& response,
                                         std::function<void(grpc::Status)> done, std::function<bool()> gone) {
  if (gone && gone()) {
    done(abandoned());
    return;
  }
  if (!coalescer_) {
    done(should_rate_limit(request, response));
    return;
  }
  auto p = std::make_unique<RlsCall>();
  if (grpc::Status s = prepare(request, *p); !s.ok()) {
    done(s);
    return;
  }
  coalescer_->submit(Job{std::move(p), &response, std::move(done), std::move(gone)});
}

// The caller has gone before its call was decided: nothing is charged (docs/envoy.md).
grpc::Status RlsService::abandoned() {
  metrics_.abandoned();
  return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                      "the caller had gone (cancelled or past its deadline) before the call was decided: not charged");
}

// On a storage thread: the single-hit requests of the batch in one Limiter::decide (in queue
// order, as if one after another), the others one decision each, then the answers.
void RlsService::decide_jobs(std::vector<Job>& jobs) {
  std::erase_if(jobs, [this](Job& j) {
    if (!j.gone || !j.gone()) return false;
    j.done(abandoned());
    return true;
  });
  std::vector<Storage::BatchItem> batch;
  std::vector<RlsCall*> owners;
  for (Job& j : jobs) {
    if (j.prepared->single_hit()) {
      batch.push_back(j.prepared->batch.front());
      owners.push_back(j.prepared.get());
    }
  }
  if (!batch.empty()) {
    const Micros now = limiter_.clock().now();
    std::vector<absl::StatusOr<Decision>> results(batch.size());
    limiter_.decide(batch, now, results);
    for (std::size_t k = 0; k < batch.size(); ++k) {
      owners[k]->now = now;
      owners[k]->results[0] = std::move(results[k]);
      owners[k]->charged = true;
    }
  }
  for (Job& j : jobs) {
    if (!j.prepared->single_hit()) decide(*j.prepared);
    j.done(respond(*j.prepared, *j.response));
  }
}

}  // namespace floodgate::server
