// A key's routes without a decision (/v1/stats, /v1/clear) and the health routes (/healthz,
// /healthcheck, /readyz, /json).
#include "server/api/service.hpp"

#include <fmt/format.h>

#include "server/api/requests.hpp"

namespace floodgate::server {

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
