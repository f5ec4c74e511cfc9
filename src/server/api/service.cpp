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

absl::string_view av(std::string_view s) { return {s.data(), s.size()}; }
std::string_view sv(boost::beast::string_view s) { return {s.data(), s.size()}; }

// For the route functions: the response is complete, no decision is needed.
bool fail(Response& res, http::status status, std::string_view message) {
  respond_error(res, status, message);
  return false;
}
bool fail(Response& res, http::status status, const absl::Status& error) {
  return fail(res, status, std::string_view(error.message().data(), error.message().size()));
}

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
  if (p.policy == nullptr || p.policy->options().budget.max_slice == 0 || p.kind == Pending::Kind::kTest ||
      p.kind == Pending::Kind::kSettle || !p.reservation.empty()) {
    return false;
  }
  if (p.configured != nullptr && p.configured->allow.contains(av(p.key))) return false;
  const Micros now = limiter_.clock().now();
  const std::optional<Decision> d = limiter_.try_budget(Limiter::Request{p.policy, p.key, p.cost, Effect::kHit}, now);
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

bool Service::route_hit(const Request& req, Response& res, Pending& p, const Installed& in) {
  p.kind = Pending::Kind::kHit;
  return prepare_body(req, res, p, in);
}

// A reservation's actual usage: the body of /v1/hit's policy and key, with "reservation" and
// "actual". Always applied; answers the state after it.
bool Service::route_settle(const Request& req, Response& res, Pending& p, const Installed& in) {
  p.kind = Pending::Kind::kSettle;
  auto body = parse_settle_body(req.body());
  if (!body.ok()) return fail(res, http::status::bad_request, body.status());
  return resolve_body(*std::move(body), res, p, in);
}

// A lease's end (a settle to 0) and its renewal: the body of /v1/hit's policy and key with the
// lease's "reservation" id. Answers the state after it; 404 for a lease not outstanding.
bool Service::route_release(const Request& req, Response& res, Pending& p, const Installed& in) {
  p.kind = Pending::Kind::kRelease;
  auto body = parse_lease_body(req.body());
  if (!body.ok()) return fail(res, http::status::bad_request, body.status());
  return resolve_body(*std::move(body), res, p, in);
}

bool Service::route_renew(const Request& req, Response& res, Pending& p, const Installed& in) {
  p.kind = Pending::Kind::kRenew;
  auto body = parse_lease_body(req.body());
  if (!body.ok()) return fail(res, http::status::bad_request, body.status());
  return resolve_body(*std::move(body), res, p, in);
}

bool Service::route_test(const Request& req, Response& res, Pending& p, const Installed& in) {
  p.kind = Pending::Kind::kTest;
  return prepare_body(req, res, p, in);
}

// The body of /v1/hit and /v1/test: a configured policy (its override for the key, if any) or an
// inline limit.
bool Service::prepare_body(const Request& req, Response& res, Pending& p, const Installed& in) {
  auto body = parse_decision_body(req.body());
  if (!body.ok()) return fail(res, http::status::bad_request, body.status());
  if (body->reservation && p.kind == Pending::Kind::kTest) {
    return fail(res, http::status::bad_request, "a test reserves nothing: \"reservation\" is for /v1/hit");
  }
  return resolve_body(*std::move(body), res, p, in);
}

// The policy of a parsed body (configured, or inline), its key, cost and reservation.
bool Service::resolve_body(DecisionBody body_value, Response& res, Pending& p, const Installed& in) {
  DecisionBody* body = &body_value;
  if (body->policy) {
    p.configured = in.config->find(*body->policy);
    if (p.configured == nullptr) {
      return fail(res, http::status::bad_request, fmt::format("unknown policy \"{}\"", *body->policy));
    }
    p.policy = &p.configured->for_key(body->key);
    p.slot = in.metric_slots.at(p.configured);
  } else {
    if (!in.config->allow_inline) {
      return fail(res, http::status::bad_request, "inline limits are disabled: name a configured \"policy\"");
    }
    auto inl = inline_policies_.get(body->limit, body->strategy, body->burst, in.config->max_inline_policies);
    if (!inl.ok()) return fail(res, http::status::bad_request, inl.status());
    p.owned = *std::move(inl);
    p.policy = p.owned.get();
    p.slot = inline_slot_;
  }
  const bool lease_policy = p.policy->strategy() == Strategy::kConcurrency;
  const bool lease_call = p.kind == Pending::Kind::kRelease || p.kind == Pending::Kind::kRenew;
  if (lease_call && !lease_policy) {
    return fail(res, http::status::bad_request,
                fmt::format("policy \"{}\" is {}: leases are released and renewed of a concurrency policy (a "
                            "reservation is settled with /v1/settle)",
                            p.policy->name(), to_string(p.policy->strategy())));
  }
  if (lease_policy && p.kind == Pending::Kind::kHit && !body->reservation) {
    return fail(res, http::status::bad_request,
                fmt::format("policy \"{}\" limits requests in progress: give \"reservation\", the lease's id, "
                            "and release it with /v1/release when the request ends",
                            p.policy->name()));
  }
  if (lease_policy && body->ttl_ms != 0) {
    return fail(res, http::status::bad_request,
                fmt::format("policy \"{}\": a lease lives for its limit's time to live ({}); \"ttl_ms\" is for "
                            "reservations",
                            p.policy->name(), to_string(p.policy->limits().front())));
  }
  p.key = std::move(body->key);
  p.cost = body->cost;
  if (body->reservation) p.reservation = *std::move(body->reservation);
  if (body->ttl_ms != 0) p.ttl = body->ttl_ms * 1000;
  return true;
}

bool Service::route_auth(const Request& req, Response& res, Pending& p, const Installed& in) {
  const std::string_view target = sv(req.target());
  const auto name = query_param(target, "policy");
  if (!name) return fail(res, http::status::bad_request, "give ?policy=NAME");
  const ServicePolicy* sp = in.config->find(*name);
  if (sp == nullptr) return fail(res, http::status::bad_request, fmt::format("unknown policy \"{}\"", *name));
  if (sp->policy->strategy() == Strategy::kConcurrency) {
    return fail(res, http::status::bad_request,
                fmt::format("policy \"{}\" limits requests in progress, and /v1/auth cannot see a request end: take "
                            "leases with /v1/hit and /v1/release (docs/http-api.md, \"Concurrency\")",
                            *name));
  }
  const bool header = sp->key_source.kind == KeySource::Kind::kHeader;
  std::string key;
  if (header) {
    if (const auto it = req.find(sp->key_source.name); it != req.end()) key = std::string(sv(it->value()));
  } else {
    key = query_param(target, sp->key_source.name).value_or("");
  }
  if (key.empty() || key.size() > kMaxKeyBytes) {  // the message is built only for a refusal
    const std::string source = header ? fmt::format("the {} header", sp->key_source.name)
                                      : fmt::format("the query parameter {}", sp->key_source.name);
    const std::string what = fmt::format("the key (policy \"{}\" takes it from {})", *name, source);
    return fail(res, http::status::bad_request, check_key(key, what));
  }
  p.kind = Pending::Kind::kAuth;
  p.configured = sp;
  p.policy = &sp->for_key(key);
  p.key = std::move(key);
  p.slot = in.metric_slots.at(sp);
  p.denied_status = in.config->auth_denied_status;
  return true;
}

// `?policy=NAME&key=KEY` of /v1/stats and /v1/keys: the policy for that key (its override if it
// has one), or null after answering 400.
const Policy* Service::key_query(const Request& req, Response& res, const Installed& in, std::string& key) {
  auto q = parse_key_query(sv(req.target()));
  if (!q.ok()) return fail(res, http::status::bad_request, q.status()), nullptr;
  const ServicePolicy* sp = in.config->find(q->policy);
  if (sp == nullptr) return fail(res, http::status::bad_request, fmt::format("unknown policy \"{}\"", q->policy)), nullptr;
  key = std::move(q->key);
  return &sp->for_key(key);
}

bool Service::route_stats(const Request& req, Response& res, Pending&, const Installed& in) {
  std::string key;
  const Policy* policy = key_query(req, res, in, key);
  if (policy == nullptr) return false;
  auto d = limiter_.stats(*policy, key);
  if (!d.ok()) return fail(res, http::status::bad_request, d.status());
  respond(res, http::status::ok, decision_json(*policy, *d, false));
  set_rate_limit_headers(res, *policy, *d, false);
  return false;
}

bool Service::route_clear(const Request& req, Response& res, Pending&, const Installed& in) {
  std::string key;
  const Policy* policy = key_query(req, res, in, key);
  if (policy == nullptr) return false;
  if (auto st = limiter_.clear(*policy, key); !st.ok()) {
    return fail(res, http::status::service_unavailable, fmt::format("storage error: {}", std::string(st.message())));
  }
  respond_empty(res, http::status::no_content);
  return false;
}

bool Service::route_healthz(const Request&, Response& res, Pending&, const Installed&) {
  respond(res, http::status::ok, "ok\n", "text/plain");
  return false;
}

bool Service::route_json(const Request& req, Response& res, Pending&, const Installed&) {
  if (!json_rls_) return fail(res, http::status::not_found, "no rate-limit rules are loaded (rls.config_dir)");
  json_rls_(req.body(), res);
  return false;
}

bool Service::route_healthcheck(const Request& req, Response& res, Pending& p, const Installed& in) {
  if (!healthcheck_) return route_healthz(req, res, p, in);
  const std::string why = healthcheck_();
  if (why.empty()) {
    respond(res, http::status::ok, "OK", "text/plain");  // envoyproxy's body
  } else {
    respond(res, http::status::internal_server_error, why + "\n", "text/plain");
  }
  return false;
}

bool Service::route_readyz(const Request&, Response& res, Pending&, const Installed& in) {
  if (not_ready_) {
    if (const std::string why = not_ready_(); !why.empty()) {
      respond(res, http::status::service_unavailable, "not ready: " + why + "\n", "text/plain");
      return false;
    }
  }
  bool closed = false;
  for (const ServicePolicy& p : in.config->policies) closed = closed || p.policy->fail_mode() == FailMode::kClosed;
  if (closed && !storage_up_.load(std::memory_order_relaxed)) {
    respond(res, http::status::service_unavailable,
            "not ready: the storage does not answer and a policy fails closed\n", "text/plain");
  } else if (closed && storage_degraded_recently(limiter_.clock().now())) {
    respond(res, http::status::service_unavailable,
            "not ready: the storage failed in the last 5 s and a policy fails closed\n", "text/plain");
  } else {
    respond(res, http::status::ok, "ready\n", "text/plain");
  }
  return false;
}

}  // namespace floodgate::server
