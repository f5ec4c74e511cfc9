// The decision routes: /v1/hit, /v1/settle, /v1/release, /v1/renew, /v1/test (a JSON body) and
// /v1/auth (the request's own headers, for nginx's auth_request).
#include "server/api/service.hpp"

#include <fmt/format.h>

#include "server/api/requests.hpp"

namespace floodgate::server {

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

}  // namespace floodgate::server
