#include "server/rls.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <string_view>

#include <fmt/format.h>

#include "floodgate/headers.hpp"
#include "floodgate/limiter.hpp"
#include "server/metrics.hpp"

namespace floodgate::server {

namespace {

constexpr std::size_t kMaxOverridePolicies = 1024;


// The storage key of a descriptor: its domain and entries, length-prefixed so that no two
// different descriptors share a key whatever bytes they hold.
std::string storage_key(std::string_view domain,
                        const ::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor& d) {
  std::string k = fmt::format("{}:{}", domain.size(), domain);
  for (const auto& e : d.entries()) {
    fmt::format_to(std::back_inserter(k), "|{}:{}={}:{}", e.key().size(), e.key(), e.value().size(), e.value());
  }
  return k;
}

void set_duration(google::protobuf::Duration& out, Micros us) {
  if (us < 0) us = 0;
  out.set_seconds(us / kMicrosPerSecond);
  out.set_nanos(static_cast<std::int32_t>((us % kMicrosPerSecond) * 1000));
}

}  // namespace

// ---- metrics ------------------------------------------------------------------------------------

std::optional<std::size_t> RlsMetrics::slot(const std::string& domain, const std::string& rule) {
  std::string id = domain;
  id.push_back('\0');
  id += rule;
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = slots_.find(id); it != slots_.end()) return it->second;
  if (names_.size() >= kMaxSeries) return std::nullopt;
  names_.emplace_back(domain, rule);
  slots_.emplace(std::move(id), names_.size() - 1);
  return names_.size() - 1;
}

std::string RlsMetrics::render() const {
  static constexpr const char* kNames[] = {"total_hits", "over_limit", "near_limit", "within_limit",
                                           "shadow_mode", "degraded"};
  static constexpr const char* kHelp[] = {
      "Hits (hits_addend) per rate-limit rule.",
      "Hits over the limit (including shadow-mode rules, which answer OK).",
      "Hits allowed with less than 20% of the limit left.",
      "Hits within the limit.",
      "Hits over the limit of a shadow-mode rule (answered OK).",
      "Hits decided by the rule's fail mode because the storage failed."};
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (std::size_t c = 0; c < kCounters; ++c) {
    out += fmt::format("# HELP floodgate_rls_{}_total {}\n# TYPE floodgate_rls_{}_total counter\n", kNames[c],
                       kHelp[c], kNames[c]);
    for (std::size_t s = 0; s < names_.size(); ++s) {
      out += fmt::format("floodgate_rls_{}_total{{domain=\"{}\",rule=\"{}\"}} {}\n", kNames[c],
                         prometheus_escape(names_[s].first), prometheus_escape(names_[s].second),
                         counters_[s][c].load(std::memory_order_relaxed));
    }
  }
  return out;
}

// ---- the service --------------------------------------------------------------------------------

struct RlsService::Item {
  const RlsRule* rule = nullptr;          // the matched rule (null: no match)
  std::shared_ptr<const Policy> policy;   // what the storage applies (null: no storage call)
  std::string key;
  std::int64_t hits = 1;
  std::uint32_t requests_per_unit = 0;
  RlsUnit unit = RlsUnit::kUnknown;
  bool deny_all = false;                  // requests_per_unit 0
  bool shadow = false;
  std::size_t slot = RlsMetrics::kMaxSeries;  // kMaxSeries: not counted
  std::size_t result = 0;                 // index into the storage results
  Decision decision;
};

RlsService::RlsService(std::shared_ptr<Storage> storage, std::shared_ptr<const Clock> clock, RlsLimits limits)
    : storage_(std::move(storage)), clock_(std::move(clock)), limits_(limits) {
  reload(std::make_shared<const RlsConfig>());
  if (limits_.batching) {
    for (unsigned i = 0; i < std::max(1u, limits_.batch_threads); ++i) workers_.emplace_back([this] { batch_worker(); });
  }
}

RlsService::~RlsService() {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void RlsService::reload(std::shared_ptr<const RlsConfig> config) {
  auto in = std::make_shared<Installed>();
  for (std::size_t i = 0; i < config->rules.size(); ++i) {
    if (auto s = metrics_.slot(config->rule_domains[i], config->rules[i]->path)) {
      in->slots.emplace(config->rules[i], *s);
    }
  }
  in->config = std::move(config);
  std::lock_guard<std::mutex> lock(mu_);
  installed_ = std::move(in);
}

std::shared_ptr<const RlsConfig> RlsService::config() const { return current()->config; }

std::shared_ptr<const RlsService::Installed> RlsService::current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return installed_;
}

grpc::Status RlsService::validate(const rlsv3::RateLimitRequest& r) const {
  auto invalid = [](std::string message) { return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message); };
  if (r.ByteSizeLong() > limits_.max_message_bytes) {
    return invalid(fmt::format("the request is larger than {} bytes", limits_.max_message_bytes));
  }
  if (r.domain().empty()) return invalid("the domain is empty");
  if (r.domain().size() > limits_.max_string_bytes) {
    return invalid(fmt::format("the domain is longer than {} bytes", limits_.max_string_bytes));
  }
  if (r.descriptors_size() == 0) return invalid("the request has no descriptors");
  if (static_cast<std::size_t>(r.descriptors_size()) > limits_.max_descriptors) {
    return invalid(fmt::format("the request has more than {} descriptors", limits_.max_descriptors));
  }
  for (int i = 0; i < r.descriptors_size(); ++i) {
    const auto& d = r.descriptors(i);
    if (d.entries_size() == 0) return invalid(fmt::format("descriptor {} has no entries", i));
    if (static_cast<std::size_t>(d.entries_size()) > limits_.max_entries) {
      return invalid(fmt::format("descriptor {} has more than {} entries", i, limits_.max_entries));
    }
    for (const auto& e : d.entries()) {
      if (e.key().empty()) return invalid(fmt::format("descriptor {} has an entry with an empty key", i));
      if (e.key().size() > limits_.max_string_bytes || e.value().size() > limits_.max_string_bytes) {
        return invalid(fmt::format("descriptor {} has a key or value longer than {} bytes", i,
                                   limits_.max_string_bytes));
      }
    }
    if (d.has_hits_addend() && d.hits_addend().value() > static_cast<std::uint64_t>(kMaxAmount)) {
      return invalid(fmt::format("descriptor {}: hits_addend is larger than 2^53", i));
    }
    if (d.has_limit()) {
      const auto unit = static_cast<RlsUnit>(d.limit().unit());
      if (d.limit().unit() <= 0 || d.limit().unit() > 7 || rls_unit_period(unit) == 0) {
        return invalid(fmt::format("descriptor {}: the limit override has no valid unit", i));
      }
    }
  }
  return grpc::Status::OK;
}

std::shared_ptr<const Policy> RlsService::override_policy(const RlsDomain& domain, const RlsRule* rule,
                                                          std::uint32_t requests_per_unit, RlsUnit unit) {
  const Strategy strategy = rule != nullptr ? rule->strategy : Strategy::kFixedWindow;
  const PolicyOptions options = rule != nullptr ? rule->options : PolicyOptions{};
  const std::string name = fmt::format("{}/{}/override", domain.domain, rule != nullptr ? rule->path : "");
  const std::string id = fmt::format("{}|{}|{}|{}", name, requests_per_unit, static_cast<int>(unit),
                                     static_cast<int>(strategy));
  {
    std::lock_guard<std::mutex> lock(overrides_mu_);
    if (auto it = overrides_.find(id); it != overrides_.end()) return it->second;
  }
  Limit limit;
  limit.amount = requests_per_unit;
  limit.period = rls_unit_period(unit);
  auto p = Policy::make(name, strategy, std::vector<Limit>{limit}, options);
  if (!p.ok()) return nullptr;
  auto shared = std::make_shared<const Policy>(*std::move(p));
  std::lock_guard<std::mutex> lock(overrides_mu_);
  if (overrides_.size() < kMaxOverridePolicies) overrides_.emplace(id, shared);
  return shared;
}

void RlsService::count(const Item& it, const Decision& d, bool charged) {
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

struct RlsService::Prepared {
  std::shared_ptr<const Installed> installed;
  std::vector<Item> items;
  std::vector<Storage::BatchItem> batch;  // the items with a policy, in order
  std::vector<absl::StatusOr<Decision>> results;
  Micros now = 0;
  bool over = false;     // some descriptor blocks the request
  bool charged = false;  // the hits were committed

  // One storage call and nothing denied without it: the request can join any batch of hits.
  [[nodiscard]] bool single_hit() const { return batch.size() == 1 && !over; }
};

grpc::Status RlsService::should_rate_limit(const rlsv3::RateLimitRequest& request,
                                           rlsv3::RateLimitResponse& response) {
  Prepared p;
  if (grpc::Status s = prepare(request, p); !s.ok()) return s;
  decide(p);
  respond(p, response);
  return grpc::Status::OK;
}

grpc::Status RlsService::prepare(const rlsv3::RateLimitRequest& request, Prepared& p) {
  if (grpc::Status s = validate(request); !s.ok()) return s;
  p.installed = current();
  const Installed* in = p.installed.get();
  const RlsDomain* domain = in->config->find(request.domain());
  const std::int64_t request_hits = request.hits_addend() == 0 ? 1 : request.hits_addend();

  const int n = request.descriptors_size();
  std::vector<Item>& items = p.items;
  items.resize(static_cast<std::size_t>(n));
  for (int i = 0; i < n && domain != nullptr; ++i) {
    const auto& d = request.descriptors(i);
    Item& it = items[static_cast<std::size_t>(i)];
    // The most specific match: key+value, then a wildcard value, then the key-only default, level
    // by level.
    const RlsNode* node = &domain->root;
    for (int j = 0; j < d.entries_size(); ++j) {
      const auto& e = d.entries(j);
      auto found = node->children.find(rls_child_key(e.key(), e.value()));
      if (found == node->children.end()) {  // a wildcard value ("foo*"): the first prefix that fits
        for (const RlsNode::Wildcard& w : node->wildcards) {
          if (w.key == e.key() && std::string_view(e.value()).starts_with(w.prefix)) {
            found = node->children.find(w.child);
            break;
          }
        }
      }
      if (found == node->children.end()) found = node->children.find(rls_default_key(e.key()));
      if (found == node->children.end()) {
        node = nullptr;
        break;
      }
      node = found->second.get();
    }
    it.rule = node != nullptr ? node->rule.get() : nullptr;
    if (d.has_hits_addend()) {
      it.hits = d.hits_addend().value() == 0 ? 1 : static_cast<std::int64_t>(d.hits_addend().value());
    } else {
      it.hits = request_hits;
    }
    if (it.rule != nullptr) {
      it.shadow = it.rule->shadow_mode;
      it.requests_per_unit = it.rule->requests_per_unit;
      it.unit = it.rule->unit;
      it.policy = it.rule->policy;
      if (auto s = in->slots.find(it.rule); s != in->slots.end()) it.slot = s->second;
      if (it.rule->detailed_metric) {
        std::string label;
        for (const auto& e : d.entries()) {
          label += fmt::format("{}{}_{}", label.empty() ? "" : ".", e.key(), e.value());
        }
        if (auto s = metrics_.slot(domain->domain, label)) it.slot = *s;
      }
    }
    if (d.has_limit()) {  // the request's own limit replaces the configured one
      it.requests_per_unit = d.limit().requests_per_unit();
      it.unit = static_cast<RlsUnit>(d.limit().unit());
      it.policy = it.requests_per_unit > 0 ? override_policy(*domain, it.rule, it.requests_per_unit, it.unit)
                                           : nullptr;
      if (it.requests_per_unit > 0 && it.policy == nullptr) {  // e.g. the rule's burst does not fit it
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, fmt::format("descriptor {}: invalid limit override", i));
      }
      it.shadow = false;  // as envoyproxy: a limit Envoy sends is enforced, never shadowed
    } else if (it.rule != nullptr && it.rule->unlimited) {
      it.policy = nullptr;
    }
    it.deny_all = it.requests_per_unit == 0 && it.unit != RlsUnit::kUnknown;  // a block list
    if (it.policy != nullptr) it.key = storage_key(request.domain(), d);
  }
  // `replaces`: a matched rule that another matched rule names is not applied.
  for (const Item& a : items) {
    if (a.rule == nullptr || a.rule->replaces.empty()) continue;
    for (Item& b : items) {
      if (&a == &b || b.rule == nullptr || b.rule->name.empty()) continue;
      for (const std::string& name : a.rule->replaces) {
        if (name == b.rule->name) {
          b = Item{};
          break;
        }
      }
    }
  }

  for (Item& it : items) {
    if (it.policy != nullptr) {
      it.result = p.batch.size();
      p.batch.push_back({it.policy.get(), it.key, it.hits, Effect::kHit});
    }
    p.over = p.over || (it.deny_all && !it.shadow);
  }
  p.results.resize(p.batch.size());
  return grpc::Status::OK;
}

namespace {
bool blocks(bool shadow, const Decision& d) { return !d.allowed && !shadow; }
}  // namespace

// One storage call: atomic. Several: one group call, all or nothing (shadow-mode rules never
// block the others), under the striped locks of their keys so that two requests of this process
// on the same keys do not interleave (a storage whose group call is not atomic by itself, such as
// the in-memory store, needs that; for Redis the group script is atomic across processes).
void RlsService::decide(Prepared& p) {
  p.now = clock_->now();
  auto degrade_errors = [&] {
    for (std::size_t j = 0; j < p.batch.size(); ++j) {
      if (!p.results[j].ok()) p.results[j] = degraded_decision(*p.batch[j].policy);
    }
  };
  if (p.single_hit()) {
    storage_->apply_batch(p.batch, p.now, p.results);
    degrade_errors();
    p.charged = true;
    return;
  }
  if (p.batch.empty()) return;
  if (p.over) {  // a block-list rule denies: report the others' state, charge nothing
    for (auto& b : p.batch) b.effect = Effect::kTest;
    storage_->apply_batch(p.batch, p.now, p.results);
    degrade_errors();
    return;
  }
  for (const Item& it : p.items) {
    if (it.policy != nullptr) p.batch[it.result].optional = it.shadow;
  }
  std::vector<std::size_t> stripes;
  stripes.reserve(p.batch.size());
  for (const auto& b : p.batch) {
    const std::size_t h = std::hash<std::string>{}(b.policy->fingerprint()) ^
                          (std::hash<std::string_view>{}(b.key) * 0x9E3779B97F4A7C15ULL);
    stripes.push_back(h % kStripes);
  }
  std::sort(stripes.begin(), stripes.end());  // in ascending order: no two callers deadlock
  stripes.erase(std::unique(stripes.begin(), stripes.end()), stripes.end());
  for (std::size_t i : stripes) stripes_[i].lock();
  p.charged = storage_->apply_group(p.batch, p.now, p.results);
  for (auto it = stripes.rbegin(); it != stripes.rend(); ++it) stripes_[*it].unlock();
  degrade_errors();
  for (const Item& it : p.items) {
    if (it.policy != nullptr) p.over = p.over || blocks(it.shadow, *p.results[it.result]);
  }
  // Not committed with no item blocking: a storage error (the fail mode decided above) or a
  // request that came between a non-atomic group's calls; nothing more is charged either way.
}

void RlsService::respond(Prepared& p, rlsv3::RateLimitResponse& response) {
  const Micros now = p.now;
  const bool charged = p.charged;
  auto blocks = [](const Item& it, const Decision& d) { return server::blocks(it.shadow, d); };
  // Statuses, in request order.
  const Item* constraining = nullptr;
  bool overall_over = false;
  for (Item& it : p.items) {
    auto* status = response.add_statuses();
    if (it.rule == nullptr && it.policy == nullptr && !it.deny_all) {
      status->set_code(rlsv3::RateLimitResponse::OK);
      continue;
    }
    if (it.rule != nullptr && it.rule->unlimited && it.policy == nullptr && !it.deny_all) {
      status->set_code(rlsv3::RateLimitResponse::OK);
      status->set_limit_remaining(std::numeric_limits<std::uint32_t>::max());
      continue;
    }
    Decision d;
    if (it.deny_all) {
      const Micros period = rls_unit_period(it.unit);
      d.allowed = false;
      d.period = period;
      d.reset_after = period - now % period;
      d.retry_after = kNever;
    } else {
      d = *p.results[it.result];
    }
    it.decision = d;
    count(it, d, charged);
    const bool denied = blocks(it, d);
    overall_over = overall_over || denied;
    status->set_code(denied ? rlsv3::RateLimitResponse::OVER_LIMIT : rlsv3::RateLimitResponse::OK);
    auto* limit = status->mutable_current_limit();
    if (it.rule != nullptr) limit->set_name(it.rule->name);
    limit->set_requests_per_unit(it.requests_per_unit);
    limit->set_unit(static_cast<rlsv3::RateLimitResponse::RateLimit::Unit>(it.unit));
    const std::int64_t remaining = std::max<std::int64_t>(0, d.remaining);
    status->set_limit_remaining(static_cast<std::uint32_t>(
        std::min<std::int64_t>(remaining, std::numeric_limits<std::uint32_t>::max())));
    set_duration(*status->mutable_duration_until_reset(), d.reset_after);
    if (it.policy != nullptr) {
      const bool better = constraining == nullptr ||
                          (denied && !blocks(*constraining, constraining->decision)) ||
                          (denied == blocks(*constraining, constraining->decision) &&
                           d.remaining < constraining->decision.remaining);
      if (better) constraining = &it;
    }
  }
  response.set_overall_code(overall_over ? rlsv3::RateLimitResponse::OVER_LIMIT : rlsv3::RateLimitResponse::OK);
  if (limits_.response_headers && constraining != nullptr) {
    Decision d = constraining->decision;
    if (constraining->shadow) d.allowed = true;
    for (auto& [name, value] : rate_limit_headers(*constraining->policy, d)) {
      auto* h = response.add_response_headers_to_add();
      h->set_key(name);
      h->set_value(value);
    }
  }
}

void RlsService::should_rate_limit_async(const rlsv3::RateLimitRequest& request,
                                         rlsv3::RateLimitResponse& response,
                                         std::function<void(grpc::Status)> done) {
  if (workers_.empty()) {
    done(should_rate_limit(request, response));
    return;
  }
  auto p = std::make_unique<Prepared>();
  if (grpc::Status s = prepare(request, *p); !s.ok()) {
    done(s);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    queue_.push_back(Job{std::move(p), &response, std::move(done)});
  }
  queue_cv_.notify_one();
}

// A storage thread: takes every queued request, decides the single-hit ones in one storage batch
// (in queue order, as if one after another) and the others one group call each, then answers.
// While it waits for the storage, the other thread gathers the next batch.
void RlsService::batch_worker() {
  std::vector<Job> jobs;
  std::vector<Storage::BatchItem> batch;
  std::vector<absl::StatusOr<Decision>> results;
  std::vector<Prepared*> owners;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(queue_mu_);
      queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and every request was answered
      jobs.swap(queue_);
    }
    batch.clear();
    owners.clear();
    for (Job& j : jobs) {
      if (j.prepared->single_hit()) {
        batch.push_back(j.prepared->batch.front());
        owners.push_back(j.prepared.get());
      }
    }
    if (!batch.empty()) {
      const Micros now = clock_->now();
      results.assign(batch.size(), absl::StatusOr<Decision>());
      storage_->apply_batch(batch, now, results);
      for (std::size_t k = 0; k < batch.size(); ++k) {
        Prepared& p = *owners[k];
        p.now = now;
        p.results[0] = results[k].ok() ? std::move(results[k]) : degraded_decision(*batch[k].policy);
        p.charged = true;
      }
    }
    for (Job& j : jobs) {
      if (!j.prepared->single_hit()) decide(*j.prepared);
      respond(*j.prepared, *j.response);
      j.done(grpc::Status::OK);
    }
    jobs.clear();
  }
}

}  // namespace floodgate::server
