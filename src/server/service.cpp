#include "server/service.hpp"

#include <chrono>
#include <cmath>

#include <boost/json.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "floodgate/headers.hpp"
#include "floodgate/memory_storage.hpp"
#include "floodgate/replay.hpp"
#include "floodgate/simulate.hpp"
#include "server/web_assets.hpp"
#include "storage/url.hpp"
#include "trace_json.hpp"

namespace floodgate::server {

namespace {

constexpr Micros kReadyWindow = 5 * kMicrosPerSecond;
constexpr std::size_t kMaxKeyBytes = 1024;

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string url_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

absl::string_view av(std::string_view s) { return absl::string_view(s.data(), s.size()); }
std::string message(const absl::Status& s) { return std::string(s.message()); }

std::string_view path_of(std::string_view target) {
  return target.substr(0, target.find('?'));
}

std::string json_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out += c;
        }
    }
  }
  return out;
}

void respond(Response& res, http::status status, std::string body,
             std::string_view content_type = "application/json") {
  res.result(status);
  res.set(http::field::content_type, content_type);
  res.body() = std::move(body);
  res.prepare_payload();
}

void error(Response& res, http::status status, std::string_view message) {
  respond(res, status, fmt::format("{{\"error\": \"{}\"}}\n", json_escape(message)));
}

// For the prepare functions: the response is complete, no decision is needed.
bool fail(Response& res, http::status status, std::string_view message) {
  error(res, status, message);
  return false;
}

void set_headers(Response& res, const Policy& policy, const Decision& d, bool shadow) {
  for (auto& [name, value] : rate_limit_headers(policy, d)) {
    if (shadow && name == "Retry-After") continue;
    res.set(name, value);
  }
}

std::string decision_json(const Policy& policy, const Decision& d, bool shadow_denied) {
  return fmt::format(
      "{{\"allowed\": {}, \"limit\": {}, \"remaining\": {}, \"reset_after\": {}, \"retry_after\": {}, "
      "\"delay\": {}, \"policy\": \"{}\", \"degraded\": {}, \"shadow_denied\": {}}}\n",
      d.allowed || shadow_denied ? "true" : "false", d.limit, d.remaining, format_seconds(d.reset_after),
      d.can_retry() ? format_seconds(d.retry_after) : "null", format_seconds(d.delay),
      json_escape(policy.name()), d.degraded ? "true" : "false", shadow_denied ? "true" : "false");
}

// "gcra 10/second burst 20" (Policy::describe without the leading "name: ").
std::string describe_limits(const Policy& p) {
  std::string d = p.describe();
  if (const std::size_t colon = d.find(": "); colon != std::string::npos) d.erase(0, colon + 2);
  return d;
}

const WebAsset* find_asset(std::string_view path) {
  if (path == "/") path = "/index.html";
  for (const WebAsset& a : web_assets()) {
    if (a.path == path) return &a;
  }
  return nullptr;
}

}  // namespace

std::optional<std::string> query_param(std::string_view target, std::string_view name) {
  const std::size_t q = target.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const std::size_t amp = rest.find('&');
    const std::string_view item = rest.substr(0, amp);
    const std::size_t eq = item.find('=');
    const std::string_view k = item.substr(0, eq);
    if (url_decode(k) == name) {
      return eq == std::string_view::npos ? std::string() : url_decode(item.substr(eq + 1));
    }
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
  }
  return std::nullopt;
}

Service::Service(std::shared_ptr<const Config> config, std::shared_ptr<Storage> storage,
                 std::shared_ptr<const Clock> clock)
    : limiter_(storage, std::move(clock)), storage_(std::move(storage)) {
  batches_ = config->batching == "on" ||
             (config->batching == "auto" && dynamic_cast<MemoryStorage*>(storage_.get()) == nullptr);
  inline_slot_ = metrics_.slot("inline");
  reload(std::move(config));
}

void Service::reload(std::shared_ptr<const Config> config) {
  auto in = std::make_shared<Installed>();
  for (const ServicePolicy& p : config->policies) {
    in->metric_slots.emplace(p.policy->name(), metrics_.slot(p.policy->name()));
  }
  in->config = std::move(config);
  std::lock_guard<std::mutex> lock(install_mu_);
  installed_ = std::move(in);
  version_.fetch_add(1, std::memory_order_release);
}

std::shared_ptr<const Config> Service::config() const {
  std::lock_guard<std::mutex> lock(install_mu_);
  return installed_->config;
}

std::shared_ptr<const Service::Installed> Service::current() {
  // Each thread keeps the configuration it last saw and re-reads it (under the mutex) only when a
  // reload bumped the version: requests share no written cache line.
  struct Cached {
    const Service* owner = nullptr;
    std::uint64_t version = 0;
    std::shared_ptr<const Installed> installed;
  };
  thread_local Cached cache;
  const std::uint64_t v = version_.load(std::memory_order_acquire);
  if (cache.owner != this || cache.version != v || !cache.installed) {
    std::lock_guard<std::mutex> lock(install_mu_);
    cache.owner = this;
    cache.version = version_.load(std::memory_order_relaxed);
    cache.installed = installed_;
  }
  return cache.installed;
}

void Service::count(const Pending& p, const Decision& d, Micros now) {
  if (d.degraded) {
    metrics_.count(p.slot, Metrics::kDegraded);
    live_.count(p.slot, LiveStats::kDegraded, p.key, now);
    last_degraded_.store(now, std::memory_order_relaxed);
  } else if (p.kind != Pending::Kind::kTest) {
    const bool shadow = p.configured != nullptr && p.configured->shadow;
    metrics_.count(p.slot, d.allowed ? Metrics::kAllowed
                                     : (shadow ? Metrics::kShadowDenied : Metrics::kDenied));
    // The live view shows what the algorithm decided: a shadow denial counts as a denial there.
    live_.count(p.slot, d.allowed ? LiveStats::kAllowed : LiveStats::kDenied, p.key, now);
  }
}

void Service::decide(std::span<Pending* const> pending, std::span<absl::StatusOr<Decision>> out) {
  std::vector<Storage::BatchItem> items;
  std::vector<std::size_t> where;  // items[i] answers pending[where[i]]
  items.reserve(pending.size());
  const Micros now = limiter_.clock().now();
  for (std::size_t i = 0; i < pending.size(); ++i) {
    const Pending& p = *pending[i];
    if (p.configured != nullptr && p.configured->allow.contains(av(p.key))) {
      Decision d;  // an allow-listed key: no storage call
      d.allowed = true;
      d.limit = p.policy->limits().front().amount;
      d.period = p.policy->limits().front().period;
      d.remaining = d.limit;
      out[i] = d;
      continue;
    }
    if (auto local = limiter_.blocked(*p.policy, p.key, p.cost, now)) {
      out[i] = *local;  // known to be denied until its retry time: no storage call
      continue;
    }
    items.push_back({p.policy, p.key, p.cost,
                     p.kind == Pending::Kind::kTest ? Effect::kTest : Effect::kHit});
    where.push_back(i);
  }
  if (!items.empty()) {
    std::vector<absl::StatusOr<Decision>> results(items.size());
    const auto start = std::chrono::steady_clock::now();
    storage_->apply_batch(items, now, results);
    metrics_.storage_latency(std::chrono::duration_cast<std::chrono::microseconds>(
                                 std::chrono::steady_clock::now() - start)
                                 .count());
    for (std::size_t j = 0; j < items.size(); ++j) {
      absl::StatusOr<Decision>& r = results[j];
      if (r.ok()) {
        limiter_.remember(*items[j].policy, items[j].key, items[j].cost, *r, now);
      } else if (r.status().code() != absl::StatusCode::kInvalidArgument) {
        r = degraded_decision(*items[j].policy);  // the policy's fail mode; never a plain "allowed"
      }
      out[where[j]] = std::move(r);
    }
  }
  for (std::size_t i = 0; i < pending.size(); ++i) {
    if (out[i].ok()) count(*pending[i], *out[i], now);
  }
}

absl::StatusOr<std::shared_ptr<const Policy>> Service::inline_policy(const Config& c,
                                                                     std::string_view limit,
                                                                     std::string_view strategy,
                                                                     std::int64_t burst) {
  if (!c.allow_inline) {
    return absl::InvalidArgumentError("inline limits are disabled: name a configured \"policy\"");
  }
  const std::string id = fmt::format("{}|{}|{}", strategy, limit, burst);
  std::lock_guard<std::mutex> lock(inline_mu_);
  if (auto it = inline_policies_.find(id); it != inline_policies_.end()) return it->second;
  auto s = parse_strategy(strategy);
  if (!s.ok()) return s.status();
  PolicyOptions o;
  o.burst = burst;
  auto limits = parse_limits(limit);
  if (!limits.ok()) return limits.status();
  std::string name = fmt::format("inline {} {}", to_string(*s), to_string(*limits));
  auto p = Policy::make(std::move(name), *s, *std::move(limits), o);
  if (!p.ok()) return p.status();
  if (inline_policies_.size() >= c.max_inline_policies) {
    return absl::ResourceExhaustedError(fmt::format(
        "more than {} distinct inline limits are in use: configure a policy instead",
        c.max_inline_policies));
  }
  auto shared = std::make_shared<const Policy>(*std::move(p));
  inline_policies_.emplace(id, shared);
  return shared;
}

void Service::handle(const Request& req, Response& res) {
  Pending p;
  if (!prepare(req, res, p)) return;
  absl::StatusOr<Decision> d;
  Pending* one = &p;
  decide(std::span<Pending* const>(&one, 1), std::span<absl::StatusOr<Decision>>(&d, 1));
  finish(p, d, res);
}

bool Service::prepare(const Request& req, Response& res, Pending& pending) {
  res.version(req.version());
  res.keep_alive(req.keep_alive());
  const std::shared_ptr<const Installed> in = current();
  pending.installed = in;
  bool needs_decision = false;
  const std::string_view target(req.target().data(), req.target().size());
  const std::string_view path = path_of(target);
  const auto method = req.method();
  auto only = [&](http::verb v) {
    if (method == v) return true;
    error(res, http::status::method_not_allowed,
          fmt::format("{} takes {}", path, std::string(http::to_string(v))));
    res.set(http::field::allow, http::to_string(v));
    return false;
  };
  if (path == "/v1/auth") {
    if (only(http::verb::get)) needs_decision = prepare_auth(req, res, pending, *in);
  } else if (path == "/v1/hit") {
    pending.kind = Pending::Kind::kHit;
    if (only(http::verb::post)) needs_decision = prepare_hit_or_test(req, res, pending, *in);
  } else if (path == "/v1/test") {
    pending.kind = Pending::Kind::kTest;
    if (only(http::verb::post)) needs_decision = prepare_hit_or_test(req, res, pending, *in);
  } else if (path == "/v1/stats") {
    if (only(http::verb::get)) stats(req, res, *in);
  } else if (path == "/v1/keys") {
    if (only(http::verb::delete_)) clear(req, res, *in);
  } else if (path == "/metrics") {
    if (only(http::verb::get)) {
      std::string extra = fmt::format(
          "# HELP floodgate_blocked_cache_hits_total Decisions the blocked-key cache answered "
          "without a storage call.\n"
          "# TYPE floodgate_blocked_cache_hits_total counter\nfloodgate_blocked_cache_hits_total {}\n",
          limiter_.blocked_cache_hits());
      if (auto* mem = dynamic_cast<MemoryStorage*>(storage_.get())) {
        extra += fmt::format(
            "# HELP floodgate_memory_evictions_total Keys evicted at the max_keys bound.\n"
            "# TYPE floodgate_memory_evictions_total counter\nfloodgate_memory_evictions_total {}\n"
            "# HELP floodgate_memory_reclaimed_total Absent keys reclaimed.\n"
            "# TYPE floodgate_memory_reclaimed_total counter\nfloodgate_memory_reclaimed_total {}\n",
            mem->evictions(), mem->reclaimed());
      }
      const auto servers = storage_->servers();
      if (!servers.empty()) {
        extra += "# HELP floodgate_storage_breaker_open 1 while calls to the server fail at once "
                 "(its circuit breaker is open).\n# TYPE floodgate_storage_breaker_open gauge\n";
        for (const auto& s : servers) {
          extra += fmt::format("floodgate_storage_breaker_open{{server=\"{}\"}} {}\n",
                               prometheus_escape(s.name), s.breaker_open ? 1 : 0);
        }
        extra += "# HELP floodgate_storage_connections Open connections to the server.\n"
                 "# TYPE floodgate_storage_connections gauge\n";
        for (const auto& s : servers) {
          extra += fmt::format("floodgate_storage_connections{{server=\"{}\"}} {}\n",
                               prometheus_escape(s.name), s.connections);
        }
      }
      if (extra_metrics_) extra += extra_metrics_();
      respond(res, http::status::ok, metrics_.render(extra), "text/plain; version=0.0.4");
    }
  } else if (path == "/v1/simulate") {
    if (only(http::verb::post)) simulate(req, res);
  } else if (path == "/v1/live") {
    if (only(http::verb::get)) live(res, *in);
  } else if (path == "/healthz") {
    if (only(http::verb::get)) respond(res, http::status::ok, "ok\n", "text/plain");
  } else if (path == "/readyz") {
    if (only(http::verb::get)) readyz(res, *in);
  } else if (const WebAsset* asset = find_asset(path)) {
    if (only(http::verb::get)) {
      respond(res, http::status::ok, std::string(asset->body), asset->content_type);
      res.set(http::field::cache_control, "no-cache");
    }
  } else {
    error(res, http::status::not_found, fmt::format("no such endpoint: {}", path));
  }
  if (!needs_decision) metrics_.http_status(res.result_int());
  return needs_decision;
}

void Service::finish(const Pending& p, const absl::StatusOr<Decision>& d, Response& res) {
  if (!d.ok()) {
    error(res, http::status::bad_request, message(d.status()));
  } else {
    const bool shadow_denied = p.configured != nullptr && p.configured->shadow && !d->allowed;
    const bool pass = d->allowed || shadow_denied;
    if (p.kind == Pending::Kind::kAuth) {
      res.result(pass ? http::status::no_content : static_cast<http::status>(p.denied_status));
      res.body().clear();
      set_headers(res, *p.policy, *d, shadow_denied);
      res.prepare_payload();
    } else {
      respond(res, p.kind == Pending::Kind::kTest || pass ? http::status::ok : http::status::too_many_requests,
              decision_json(*p.policy, *d, shadow_denied));
      set_headers(res, *p.policy, *d, shadow_denied);
    }
  }
  metrics_.http_status(res.result_int());
}

void Service::readyz(Response& res, const Installed& in) {
  const Micros last = last_degraded_.load(std::memory_order_relaxed);
  const bool recent = last != 0 && limiter_.clock().now() - last < kReadyWindow;
  bool closed = false;
  for (const ServicePolicy& p : in.config->policies) closed = closed || p.policy->fail_mode() == FailMode::kClosed;
  if (recent && closed) {
    respond(res, http::status::service_unavailable,
            "not ready: the storage failed in the last 5 s and a policy fails closed\n", "text/plain");
  } else {
    respond(res, http::status::ok, "ready\n", "text/plain");
  }
}

// A policy for a request: configured (with overrides) or inline.
struct Service::Target {
  const ServicePolicy* configured = nullptr;
  std::shared_ptr<const Policy> owned;  // inline
  const Policy* policy = nullptr;
  std::size_t slot = 0;
};

bool Service::prepare_hit_or_test(const Request& req, Response& res, Pending& pending,
                                  const Installed& in) {

  boost::system::error_code ec;
  const boost::json::value body = boost::json::parse(req.body(), ec);
  if (ec) return fail(res, http::status::bad_request, fmt::format("the body is not valid JSON ({})", ec.message()));
  const boost::json::object* obj = body.if_object();
  if (obj == nullptr) return fail(res, http::status::bad_request, "the body must be a JSON object");

  const boost::json::value* key_v = obj->if_contains("key");
  if (key_v == nullptr || !key_v->is_string() || key_v->get_string().empty()) {
    return fail(res, http::status::bad_request, "\"key\" must be a non-empty string");
  }
  const std::string_view key(key_v->get_string().data(), key_v->get_string().size());
  if (key.size() > kMaxKeyBytes) {
    return fail(res, http::status::bad_request, fmt::format("\"key\" is longer than {} bytes", kMaxKeyBytes));
  }
  std::int64_t cost = 1;
  if (const boost::json::value* c = obj->if_contains("cost")) {
    if (!c->is_int64() || c->get_int64() < 0 || c->get_int64() > kMaxAmount) {
      return fail(res, http::status::bad_request, "\"cost\" must be a whole number from 0 to 2^53");
    }
    cost = c->get_int64();
  }

  Target t;
  if (const boost::json::value* p = obj->if_contains("policy")) {
    if (!p->is_string()) return fail(res, http::status::bad_request, "\"policy\" must be a string");
    const std::string_view name(p->get_string().data(), p->get_string().size());
    t.configured = in.config->find(name);
    if (t.configured == nullptr) {
      return fail(res, http::status::bad_request, fmt::format("unknown policy \"{}\"", name));
    }
    t.policy = &t.configured->for_key(key);
    t.slot = in.metric_slots.at(t.configured->policy->name());
  } else if (const boost::json::value* l = obj->if_contains("limit")) {
    if (!l->is_string()) return fail(res, http::status::bad_request, "\"limit\" must be a string such as \"10/minute\"");
    std::string strategy = "gcra";
    if (const boost::json::value* s = obj->if_contains("strategy")) {
      if (!s->is_string()) return fail(res, http::status::bad_request, "\"strategy\" must be a string");
      strategy = std::string(s->get_string());
    }
    std::int64_t burst = 0;
    if (const boost::json::value* b = obj->if_contains("burst")) {
      if (!b->is_int64() || b->get_int64() < 1 || b->get_int64() > kMaxAmount) {
        return fail(res, http::status::bad_request, "\"burst\" must be a whole number from 1 to 2^53");
      }
      burst = b->get_int64();
    }
    auto inl = inline_policy(*in.config, std::string_view(l->get_string().data(), l->get_string().size()),
                             strategy, burst);
    if (!inl.ok()) return fail(res, http::status::bad_request, message(inl.status()));
    t.owned = *std::move(inl);
    t.policy = t.owned.get();
    t.slot = inline_slot_;
  } else {
    return fail(res, http::status::bad_request,
                 "name a configured \"policy\", or give an inline \"limit\" such as \"10/minute\"");
  }

  pending.configured = t.configured;
  pending.owned = std::move(t.owned);
  pending.policy = t.policy;
  pending.key = std::string(key);
  pending.cost = cost;
  pending.slot = t.slot;
  return true;
}

// `?policy=NAME&key=KEY` of /v1/stats and /v1/keys: the policy for that key (its override if it
// has one), or nullptr after answering 400.
const Policy* Service::query_target(const Request& req, Response& res, const Installed& in,
                                    std::string& key) {
  const std::string_view target(req.target().data(), req.target().size());
  const auto name = query_param(target, "policy");
  auto k = query_param(target, "key");
  if (!name || !k || k->empty()) {
    error(res, http::status::bad_request, "give ?policy=NAME&key=KEY");
    return nullptr;
  }
  const ServicePolicy* sp = in.config->find(*name);
  if (sp == nullptr) {
    error(res, http::status::bad_request, fmt::format("unknown policy \"{}\"", *name));
    return nullptr;
  }
  key = *std::move(k);
  return &sp->for_key(key);
}

void Service::stats(const Request& req, Response& res, const Installed& in) {
  std::string key;
  const Policy* policy = query_target(req, res, in, key);
  if (policy == nullptr) return;
  auto d = limiter_.stats(*policy, key);
  if (!d.ok()) return error(res, http::status::bad_request, message(d.status()));
  respond(res, http::status::ok, decision_json(*policy, *d, false));
  set_headers(res, *policy, *d, false);
}

void Service::clear(const Request& req, Response& res, const Installed& in) {
  std::string key;
  const Policy* policy = query_target(req, res, in, key);
  if (policy == nullptr) return;
  if (auto st = limiter_.clear(*policy, key); !st.ok()) {
    return error(res, http::status::service_unavailable, fmt::format("storage error: {}", message(st)));
  }
  res.result(http::status::no_content);
  res.prepare_payload();
}

bool Service::prepare_auth(const Request& req, Response& res, Pending& pending, const Installed& in) {
  const std::string_view target(req.target().data(), req.target().size());
  const auto name = query_param(target, "policy");
  if (!name) return fail(res, http::status::bad_request, "give ?policy=NAME");
  const ServicePolicy* sp = in.config->find(*name);
  if (sp == nullptr) return fail(res, http::status::bad_request, fmt::format("unknown policy \"{}\"", *name));
  std::string key;
  if (sp->key_source.kind == KeySource::Kind::kHeader) {
    const auto it = req.find(sp->key_source.name);
    if (it == req.end() || it->value().empty()) {
      return fail(res, http::status::bad_request,
                   fmt::format("policy \"{}\" takes its key from the {} header, which is missing",
                               *name, sp->key_source.name));
    }
    key.assign(it->value().data(), it->value().size());
  } else {
    auto q = query_param(target, sp->key_source.name);
    if (!q || q->empty()) {
      return fail(res, http::status::bad_request,
                   fmt::format("policy \"{}\" takes its key from the query parameter {}, which is missing",
                               *name, sp->key_source.name));
    }
    key = *std::move(q);
  }
  if (key.size() > kMaxKeyBytes) return fail(res, http::status::bad_request, "the key is too long");
  const Policy* policy = &sp->for_key(key);
  pending.kind = Pending::Kind::kAuth;
  pending.configured = sp;
  pending.policy = policy;
  pending.key = std::move(key);
  pending.cost = 1;
  pending.slot = in.metric_slots.at(sp->policy->name());
  pending.denied_status = in.config->auth_denied_status;
  return true;
}

// POST /v1/simulate: the playground's engine. The trace runs through each strategy on a fresh
// private MemoryStorage and a ManualClock (floodgate::simulate); the service's own storage is never
// touched. Decisions before index "from" are computed but not returned, so a page that re-sends its
// growing trace receives only the new ones.
void Service::simulate(const Request& req, Response& res) {
  boost::system::error_code ec;
  const boost::json::value body = boost::json::parse(req.body(), ec);
  if (ec) return error(res, http::status::bad_request, fmt::format("the body is not valid JSON ({})", ec.message()));
  const boost::json::object* obj = body.if_object();
  if (obj == nullptr) return error(res, http::status::bad_request, "the body must be a JSON object");

  SimulateOptions o;
  o.max_events = kMaxSimulateEvents;
  const boost::json::value* limit = obj->if_contains("limit");
  if (limit == nullptr || !limit->is_string()) {
    return error(res, http::status::bad_request, "\"limit\" must be a string such as \"3/minute\"");
  }
  o.limit = std::string(limit->get_string());
  if (const boost::json::value* b = obj->if_contains("burst"); b != nullptr && !b->is_null()) {
    if (!b->is_int64() || b->get_int64() < 0 || b->get_int64() > kMaxAmount) {
      return error(res, http::status::bad_request, "\"burst\" must be a whole number from 0 (= the amount) to 2^53");
    }
    o.burst = b->get_int64();
  }
  std::string lanes = "all";
  if (const boost::json::value* st = obj->if_contains("strategies")) {
    if (const boost::json::array* a = st->if_array()) {
      lanes.clear();
      for (const boost::json::value& v : *a) {
        if (!v.is_string()) return error(res, http::status::bad_request, "\"strategies\" must be a list of strategy names");
        if (!lanes.empty()) lanes += ',';
        lanes += std::string_view(v.get_string().data(), v.get_string().size());
      }
    } else if (!st->is_string() || st->get_string() != "all") {
      return error(res, http::status::bad_request, "\"strategies\" must be \"all\" or a list of strategy names");
    }
  }
  auto parsed_lanes = parse_lanes(lanes);
  if (!parsed_lanes.ok()) return error(res, http::status::bad_request, message(parsed_lanes.status()));
  o.lanes = *std::move(parsed_lanes);
  if (const boost::json::value* origin = obj->if_contains("origin")) {
    const double seconds = origin->is_double() ? origin->get_double()
                           : origin->is_int64() ? static_cast<double>(origin->get_int64())
                                                : -1.0;
    if (!(seconds >= 0 && seconds < 4.6e12)) {
      return error(res, http::status::bad_request, "\"origin\" must be a number of seconds since the epoch, from 0");
    }
    o.origin = static_cast<Micros>(std::llround(seconds * 1e6));
  }
  const boost::json::value* trace_v = obj->if_contains("trace");
  if (trace_v == nullptr || !trace_v->is_array()) {
    return error(res, http::status::bad_request,
                 "\"trace\" must be a list of requests: [{\"t\": 0.0, \"key\": \"a\", \"cost\": 1}, …]");
  }
  const boost::json::array& items = trace_v->get_array();
  if (items.size() > kMaxSimulateEvents) {
    return error(res, http::status::bad_request,
                 fmt::format("the trace has {} requests: at most {} are simulated", items.size(), kMaxSimulateEvents));
  }
  std::size_t from = 0;
  if (const boost::json::value* f = obj->if_contains("from")) {
    if (!f->is_int64() || f->get_int64() < 0 || static_cast<std::uint64_t>(f->get_int64()) > items.size()) {
      return error(res, http::status::bad_request, "\"from\" must be an index from 0 to the trace's length");
    }
    from = static_cast<std::size_t>(f->get_int64());
  }
  std::vector<TraceEvent> trace;
  trace.reserve(items.size());
  Micros previous = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    auto e = parse_trace_event(items[i], previous);
    if (!e.ok()) {
      return error(res, http::status::bad_request, fmt::format("trace[{}]: {}", i, std::string(e.status().message())));
    }
    previous = e->t;
    trace.push_back(*std::move(e));
  }
  auto result = floodgate::simulate(o, trace);
  if (!result.ok()) return error(res, http::status::bad_request, message(result.status()));

  std::string out = fmt::format("{{\"limit\": \"{}\", \"burst\": {}, \"events\": {}, \"from\": {}, \"strategies\": [",
                                json_escape(o.limit), o.burst, trace.size(), from);
  for (std::size_t l = 0; l < result->size(); ++l) {
    const SimLane& lane = (*result)[l];
    out += fmt::format("{}\n{{\"strategy\": \"{}\", \"policy\": \"{}\", \"allowed\": {}, \"blocked\": {}, \"decisions\": [",
                       l == 0 ? "" : ",", lane.name, json_escape(lane.policy), lane.allowed, lane.blocked);
    for (std::size_t i = from; i < lane.steps.size(); ++i) {
      const SimStep& st = lane.steps[i];
      out += fmt::format("{}{{\"allowed\": {}, \"remaining\": {}, \"retry_after\": {}, \"reset_after\": {}, "
                         "\"level\": {}, \"capacity\": {}}}",
                         i == from ? "" : ", ", st.allowed ? "true" : "false", st.remaining,
                         st.retry_after == kNever ? "null" : format_seconds(st.retry_after),
                         format_seconds(st.reset_after), st.level, st.capacity);
    }
    out += "]}";
  }
  out += "]}\n";
  respond(res, http::status::ok, std::move(out));
}

// GET /v1/live: per configured policy (and "inline"), decisions per second over the last
// LiveStats::kSeconds seconds, totals since start, the degraded state and the most-denied keys.
void Service::live(Response& res, const Installed& in) {
  constexpr std::size_t kTop = 10;
  constexpr std::size_t kDegradedSeconds = 5;
  const Micros now = limiter_.clock().now();
  const Micros last = last_degraded_.load(std::memory_order_relaxed);
  const bool storage_degraded = last != 0 && now - last < kReadyWindow;
  std::string servers;
  for (const Storage::ServerState& s : storage_->servers()) {
    servers += fmt::format(
        "{}{{\"name\": \"{}\", \"breaker\": \"{}\", \"reconnecting\": {}, \"connections\": {}}}",
        servers.empty() ? "" : ", ", json_escape(s.name), s.breaker_open ? "open" : "closed",
        s.reconnecting ? "true" : "false", s.connections);
  }
  std::string out = fmt::format(
      "{{\"now\": {}, \"seconds\": {}, \"storage\": {{\"url\": \"{}\", \"degraded\": {}, "
      "\"last_degraded_ago\": {}, \"degraded_total\": {}, \"servers\": [{}]}}, \"policies\": [",
      format_seconds(now), LiveStats::kSeconds, json_escape(redact_storage_url(in.config->storage)),
      storage_degraded ? "true" : "false", last == 0 ? "null" : format_seconds(now - last),
      limiter_.degraded_count(), servers);
  auto join = [](const std::vector<std::uint64_t>& v) { return fmt::format("{}", fmt::join(v, ",")); };
  auto one = [&](std::string_view name, std::size_t slot, const ServicePolicy* sp) {
    const LiveStats::Series series = live_.read(slot, now, kTop);
    const auto& degraded = series.per_second[LiveStats::kDegraded];
    std::uint64_t recent = 0;
    for (std::size_t i = degraded.size() - kDegradedSeconds; i < degraded.size(); ++i) recent += degraded[i];
    std::string top;
    for (const TopKeys::Item& it : series.top_denied) {
      top += fmt::format("{}{{\"key\": \"{}\", \"count\": {}, \"error\": {}}}", top.empty() ? "" : ", ",
                         json_escape(it.key), it.count, it.error);
    }
    return fmt::format(
        "\n{{\"name\": \"{}\", \"policy\": \"{}\", \"fail\": \"{}\", \"shadow\": {}, \"state\": \"{}\", "
        "\"totals\": {{\"allowed\": {}, \"denied\": {}, \"shadow_denied\": {}, \"degraded\": {}}}, "
        "\"allowed\": [{}], \"denied\": [{}], \"degraded\": [{}], \"top_denied\": [{}]}}",
        json_escape(name), sp ? json_escape(describe_limits(*sp->policy)) : "inline limits",
        sp && sp->policy->fail_mode() == FailMode::kClosed ? "closed" : "open",
        sp && sp->shadow ? "true" : "false", recent > 0 ? "degraded" : "ok",
        metrics_.total(slot, Metrics::kAllowed), metrics_.total(slot, Metrics::kDenied),
        metrics_.total(slot, Metrics::kShadowDenied), metrics_.total(slot, Metrics::kDegraded),
        join(series.per_second[LiveStats::kAllowed]), join(series.per_second[LiveStats::kDenied]),
        join(degraded), top);
  };
  bool first = true;
  for (const ServicePolicy& sp : in.config->policies) {
    out += (first ? "" : ",") + one(sp.policy->name(), in.metric_slots.at(sp.policy->name()), &sp);
    first = false;
  }
  if (in.config->allow_inline) out += (first ? "" : ",") + one("inline", inline_slot_, nullptr);
  out += "]}\n";
  respond(res, http::status::ok, std::move(out));
  res.set(http::field::cache_control, "no-store");
}

}  // namespace floodgate::server
