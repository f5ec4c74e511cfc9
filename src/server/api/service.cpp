// The service's routes and its decision path: resolve policy and key, apply the allow list, hand
// the request to the Limiter's pipeline, count per policy, answer.
#include "server/api/service.hpp"

#include <fmt/format.h>

#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"

#include "server/api/outage.hpp"
#include "server/api/requests.hpp"
#include "server/api/web_assets.hpp"

namespace floodgate::server {

namespace {

const WebAsset* find_asset(std::string_view path) {
  if (path == "/") path = "/index.html";
  for (const WebAsset& a : web_assets()) {
    if (a.path == path) return &a;
  }
  return nullptr;
}

}  // namespace

const Service::Route Service::kRoutes[] = {
    {"/v1/auth", http::verb::get, &Service::route_auth},
    {"/v1/hit", http::verb::post, &Service::route_hit},
    {"/v1/hits", http::verb::post, &Service::route_hits},
    {"/v1/test", http::verb::post, &Service::route_test},
    {"/v1/settle", http::verb::post, &Service::route_settle},
    {"/v1/release", http::verb::post, &Service::route_release},
    {"/v1/renew", http::verb::post, &Service::route_renew},
    {"/v1/stats", http::verb::get, &Service::route_stats},
    {"/v1/keys", http::verb::delete_, &Service::route_clear, true},
    {"/metrics", http::verb::get, &Service::route_metrics},
    {"/v1/simulate", http::verb::post, &Service::route_simulate, true, {.large_body = true, .off_thread = true}},
    {"/v1/live", http::verb::get, &Service::route_live, true},
    {"/healthz", http::verb::get, &Service::route_healthz},
    {"/livez", http::verb::get, &Service::route_healthz},  // Kubernetes' name for liveness
    {"/healthcheck", http::verb::get, &Service::route_healthcheck},  // envoyproxy/ratelimit's name
    {"/readyz", http::verb::get, &Service::route_readyz},
    {"/json", http::verb::post, &Service::route_json},  // envoyproxy/ratelimit's JSON API
};

RouteNeeds Service::needs(http::verb method, std::string_view path) noexcept {
  for (const Route& r : kRoutes) {
    if (r.path == path && r.verb == method) return r.needs;
  }
  return {};
}

Service::Service(std::shared_ptr<const Config> config, Limiter& limiter)
    : Service(std::move(config), nullptr, &limiter) {}

Service::Service(std::shared_ptr<const Config> config, std::shared_ptr<Storage> storage,
                 std::shared_ptr<const Clock> clock)
    : Service(std::move(config), std::make_unique<Limiter>(std::move(storage), std::move(clock)), nullptr) {}

Service::Service(std::shared_ptr<const Config> config, std::unique_ptr<Limiter> owned, Limiter* borrowed)
    : own_limiter_(std::move(owned)), limiter_(own_limiter_ ? *own_limiter_ : *borrowed), installed_(nullptr) {
  batches_ = config->batching == "on" || (config->batching == "auto" && limiter_.storage().traits().networked);
  inline_slot_ = metrics_.slot("inline");
  limiter_.observe_storage_latency([this](Micros us) { metrics_.storage_latency(us); });
  reload(std::move(config));
}

void Service::reload(std::shared_ptr<const Config> config) {
  auto in = std::make_shared<Installed>();
  std::vector<std::string> names{"inline"};
  for (const ServicePolicy& p : config->policies) {
    in->metric_slots.emplace(&p, metrics_.slot(p.policy->name()));
    names.push_back(p.policy->name());
  }
  metrics_.retain(names);  // the series of removed policies leave /metrics
  const std::shared_ptr<const Installed> old = installed_.get();
  in->config = std::move(config);
  installed_.publish(std::move(in));
  // What is counted outlives a reload on every store (docs/configuration.md, "Reload"): state,
  // reservations and leases stay with the state id they were taken under until they expire. Budget
  // slices end now, giving back what they did not use, so that a changed or removed budget_slice
  // applies from the next hit on.
  if (old != nullptr) limiter_.flush_budgets();
}

void Service::count(const Pending& p, const Decision& d, Micros now) {
  if (d.degraded) {
    metrics_.count(p.slot, Metrics::kDegraded);
    live_.count(p.slot, LiveStats::kDegraded, p.key, now);
    last_degraded_.store(now, std::memory_order_relaxed);
  } else if (p.kind != Pending::Kind::kTest && p.kind != Pending::Kind::kSettle) {
    const bool shadow = p.configured != nullptr && p.configured->shadow;
    metrics_.count(p.slot, d.allowed ? Metrics::kAllowed
                                     : (shadow ? Metrics::kShadowDenied : Metrics::kDenied));
    // The live view shows what the algorithm decided: a shadow denial counts as a denial there.
    live_.count(p.slot, d.allowed ? LiveStats::kAllowed : LiveStats::kDenied, p.key, now);
  }
}

bool Service::storage_degraded_recently(Micros now) const {
  constexpr Micros kWindow = 5 * kMicrosPerSecond;  // /readyz and the live view
  const Micros last = last_degraded_.load(std::memory_order_relaxed);
  return last != 0 && now - last < kWindow && last >= recovered_at_.load(std::memory_order_relaxed);
}

void Service::set_storage_reachable(bool up) noexcept {
  if (!up) {
    storage_up_.store(false, std::memory_order_relaxed);
  } else if (!storage_up_.exchange(true, std::memory_order_relaxed)) {
    recovered_at_.store(limiter_.clock().now(), std::memory_order_relaxed);
  }
}

void Service::decide(std::span<Pending* const> pending, std::span<absl::StatusOr<Decision>> out) {
  absl::InlinedVector<Limiter::Request, 1> requests;
  absl::InlinedVector<std::size_t, 1> where;  // requests[j] answers pending[where[j]]
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
    Limiter::Request r{p.policy, p.key, p.cost, p.kind == Pending::Kind::kTest ? Effect::kTest : Effect::kHit};
    if (p.kind == Pending::Kind::kSettle || p.kind == Pending::Kind::kRelease) {
      r.effect = Effect::kSettle;  // a lease's settle releases it (cost 0)
      r.reservation = p.reservation;
    } else if (p.kind == Pending::Kind::kRenew) {
      r.effect = Effect::kRenew;
      r.reservation = p.reservation;
    } else if (!p.reservation.empty()) {
      r.effect = Effect::kReserve;
      r.reservation = p.reservation;
      r.ttl = p.ttl;
    }
    requests.push_back(r);
    where.push_back(i);
  }
  if (requests.size() == pending.size()) {
    limiter_.decide(requests, now, out);  // nothing allow-listed: straight into `out`
  } else if (!requests.empty()) {
    std::vector<absl::StatusOr<Decision>> results(requests.size());
    limiter_.decide(requests, now, results);
    for (std::size_t j = 0; j < requests.size(); ++j) out[where[j]] = std::move(results[j]);
  }
  for (std::size_t i = 0; i < pending.size(); ++i) {
    if (out[i].ok()) count(*pending[i], *out[i], now);
  }
}

bool Service::decide_locally(const Pending& p, Response& res, std::string* header_lines) {
  // Only a plain hit (the Limiter says which hits may use a slice); never a listed key's.
  if (p.policy == nullptr || p.kind == Pending::Kind::kTest || p.kind == Pending::Kind::kSettle || !p.reservation.empty()) {
    return false;
  }
  const Limiter::Request request{p.policy, p.key, p.cost, Effect::kHit};
  if (!Limiter::uses_slices(request)) return false;
  if (p.configured != nullptr && p.configured->allow.contains(av(p.key))) return false;
  const Micros now = limiter_.clock().now();
  const std::optional<Decision> d = limiter_.try_budget(request, now);
  if (!d) return false;
  count(p, *d, now);
  finish(p, *d, res, header_lines);
  return true;
}

void Service::handle(const Request& req, Response& res) {
  std::optional<Pending> p = prepare(req, res);
  if (!p) return;
  absl::StatusOr<Decision> d;
  Pending* one = &*p;
  decide(std::span<Pending* const>(&one, 1), std::span<absl::StatusOr<Decision>>(&d, 1));
  finish(*p, d, res);
}

std::optional<Service::Pending> Service::prepare(const Request& req, Response& res) {
  res.version(req.version());
  res.keep_alive(req.keep_alive());
  std::optional<Pending> pending(std::in_place);
  std::shared_ptr<const Installed> in = installed_.get();
  pending->installed = in;
  pending->head = req.method() == http::verb::head;
  pending->outage_status = in->config->outage_status;
  if (!dispatch(req, res, *pending, *in)) {
    if (pending->head) strip_body(res);
    metrics_.http_status(res.result_int());
    pending.reset();
  }
  return pending;
}

// The answer to HEAD: every header of the GET's answer (its Content-Length too), no body; errors
// (404, 405, 400) included, since a client reading a HEAD answer never reads a body.
void Service::strip_body(Response& res) {
  if (res.body().empty()) return;
  res.content_length(res.body().size());
  res.body().clear();
}

bool Service::dispatch(const Request& req, Response& res, Pending& pending, const Installed& in) {
  const std::string_view path = path_of(sv(req.target()));
  const http::verb method = req.method();
  for (const Route& r : kRoutes) {
    if (r.path != path) continue;
    const bool head = method == http::verb::head && r.verb == http::verb::get;
    if (method != r.verb && !head) {
      res.set(http::field::allow, r.verb == http::verb::get ? "GET, HEAD" : http::to_string(r.verb));
      return fail(res, http::status::method_not_allowed,
                  fmt::format("{} takes {}", path, sv(http::to_string(r.verb))));
    }
    if (r.admin && !admit(req, res, in)) return false;
    return (this->*r.handler)(req, res, pending, in);
  }
  if (const WebAsset* asset = find_asset(path)) {
    if (method != http::verb::get && method != http::verb::head) {
      res.set(http::field::allow, "GET, HEAD");
      return fail(res, http::status::method_not_allowed, fmt::format("{} takes GET", path));
    }
    respond(res, http::status::ok, std::string(asset->body), asset->content_type);
    res.set(http::field::cache_control, "no-cache");
    return false;
  }
  return fail(res, http::status::not_found, fmt::format("no such endpoint: {}", path));
}

// An admin endpoint: 401 with a challenge for a missing or wrong token (403 when no token is
// configured, as no credentials can help), counted by reason.
bool Service::admit(const Request& req, Response& res, const Installed& in) {
  const auto field = req.find(http::field::authorization);
  const AdminAuth auth = check_admin(field == req.end() ? std::string_view() : sv(field->value()), in.config->admin.token);
  if (auth == AdminAuth::kGranted) return true;
  metrics_.unauthorized(auth);
  if (auth == AdminAuth::kNotConfigured) {
    return fail(res, http::status::forbidden,
                fmt::format("the admin endpoints are disabled: no admin token is configured ({} or admin.token_file)",
                            kAdminTokenEnv));
  }
  const bool wrong = auth == AdminAuth::kWrong;
  res.set(http::field::www_authenticate,
          wrong ? R"(Bearer realm="floodgate", error="invalid_token")" : R"(Bearer realm="floodgate")");
  return fail(res, http::status::unauthorized,
              wrong ? "wrong admin token" : "this endpoint needs the admin token: Authorization: Bearer <token>");
}

void Service::finish(const Pending& p, const absl::StatusOr<Decision>& d, Response& res, std::string* header_lines) {
  if (!d.ok()) {
    // The storage refused the request: invalid (400), over one of its memory bounds (503), a
    // reservation id already in use (409), a storage without reservations (501), a lease that is
    // not outstanding (404).
    http::status status = http::status::bad_request;
    switch (d.status().code()) {
      case absl::StatusCode::kNotFound: status = http::status::not_found; break;
      case absl::StatusCode::kResourceExhausted: status = http::status::service_unavailable; break;
      case absl::StatusCode::kAlreadyExists: status = http::status::conflict; break;
      case absl::StatusCode::kUnimplemented: status = http::status::not_implemented; break;
      default: break;
    }
    respond_error(res, status, d.status());
  } else {
    const bool shadow_denied = p.configured != nullptr && p.configured->shadow && !d->allowed;
    const bool pass = d->allowed || shadow_denied;
    if (p.kind == Pending::Kind::kAuth) {
      respond_empty(res, pass ? http::status::no_content : refusal_status(*d, p.denied_status, p.outage_status));
    } else {
      const bool ok = p.kind == Pending::Kind::kTest || p.kind == Pending::Kind::kSettle ||
                      p.kind == Pending::Kind::kRelease || p.kind == Pending::Kind::kRenew || pass;
      respond(res, ok ? http::status::ok : refusal_status(*d, 429, p.outage_status),
              decision_json(*p.policy, *d, shadow_denied));
    }
    if (header_lines != nullptr) {
      append_rate_limit_headers(*header_lines, *p.policy, *d, shadow_denied);
    } else {
      set_rate_limit_headers(res, *p.policy, *d, shadow_denied);
    }
    if (!pass && is_outage(*d)) mark_outage(res, header_lines);
  }
  if (p.head) strip_body(res);
  metrics_.http_status(res.result_int());
}

}  // namespace floodgate::server
