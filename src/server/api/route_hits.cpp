// POST /v1/hits: hits of several configured policies decided as one, all or nothing (as the
// descriptors of one gRPC call are): a minute's GCRA beside a calendar month's fixed window, each
// a policy of its own, charged together or not at all.
#include <algorithm>

#include <boost/json.hpp>
#include <fmt/format.h>

#include "floodgate/headers.hpp"
#include "server/api/outage.hpp"
#include "server/api/requests.hpp"
#include "server/api/service.hpp"

namespace floodgate::server {

namespace {

constexpr std::size_t kMaxGroupHits = 16;

struct GroupHit {
  const ServicePolicy* configured = nullptr;
  std::string key;
  std::int64_t cost = 1;
};

absl::Status bad(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

// One item of "hits": {"policy": NAME, "key": KEY, "cost": N}; `at` names it ("hits[1]").
absl::StatusOr<GroupHit> parse_hit(const boost::json::value& v, const std::string& at, const Config& config) {
  if (!v.is_object()) return bad(fmt::format("{} must be an object: {{\"policy\": …, \"key\": …}}", at));
  GroupHit hit;
  for (const auto& field : v.as_object()) {
    const std::string_view name(field.key().data(), field.key().size());
    if (name == "policy") {
      if (!field.value().is_string()) return bad(fmt::format("{}.policy must be a configured policy's name", at));
      const std::string_view policy(field.value().as_string().data(), field.value().as_string().size());
      hit.configured = config.find(policy);
      if (hit.configured == nullptr) return bad(fmt::format("{}.policy: unknown policy \"{}\"", at, policy));
    } else if (name == "key") {
      if (!field.value().is_string()) return bad(fmt::format("{}.key must be a non-empty string", at));
      hit.key = std::string(field.value().as_string().data(), field.value().as_string().size());
    } else if (name == "cost") {
      if (!field.value().is_int64() || field.value().as_int64() < 0 || field.value().as_int64() > kMaxAmount) {
        return bad(fmt::format("{}.cost must be a whole number from 0 to 2^53", at));
      }
      hit.cost = field.value().as_int64();
    } else {
      return bad(fmt::format("{}: unknown field \"{}\" (a hit of a group takes policy, key and cost)", at, name));
    }
  }
  if (hit.configured == nullptr) return bad(fmt::format("{}.policy is required", at));
  if (auto s = check_key(hit.key, at + ".key"); !s.ok()) return s;
  if (hit.configured->policy->strategy() == Strategy::kConcurrency) {
    return bad(fmt::format("{}.policy \"{}\" limits requests in progress: take its leases with /v1/hit", at,
                           hit.configured->policy->name()));
  }
  return hit;
}

absl::StatusOr<std::vector<GroupHit>> parse_hits(std::string_view body, const Config& config) {
  boost::system::error_code ec;
  const boost::json::value v = boost::json::parse(body, ec);
  if (ec || !v.is_object()) return bad("the body must be a JSON object: {\"hits\": [{\"policy\": …, \"key\": …}, …]}");
  for (const auto& field : v.as_object()) {
    if (field.key() != "hits") {
      return bad(fmt::format("unknown field \"{}\" (the body takes \"hits\")",
                             std::string_view(field.key().data(), field.key().size())));
    }
  }
  const boost::json::value* hits = v.as_object().if_contains("hits");
  if (hits == nullptr || !hits->is_array() || hits->as_array().empty() || hits->as_array().size() > kMaxGroupHits) {
    return bad(fmt::format("\"hits\" must be an array of 1 to {} hits", kMaxGroupHits));
  }
  std::vector<GroupHit> out;
  for (std::size_t i = 0; i < hits->as_array().size(); ++i) {
    auto hit = parse_hit(hits->as_array()[i], fmt::format("hits[{}]", i), config);
    if (!hit.ok()) return hit.status();
    out.push_back(*std::move(hit));
  }
  return out;
}

// The item whose figures X-RateLimit-* and Retry-After give: the denying one with the longest
// wait, else the one with the least remaining.
std::size_t named_item(const std::vector<Decision>& d) {
  std::size_t at = 0;
  for (std::size_t i = 1; i < d.size(); ++i) {
    const bool better = d[at].allowed ? (!d[i].allowed || d[i].remaining < d[at].remaining)
                                      : (!d[i].allowed && d[i].retry_after > d[at].retry_after);
    if (better) at = i;
  }
  return at;
}

// RateLimit-Policy and RateLimit list every item of every policy (draft-11 allows several);
// X-RateLimit-* and Retry-After are the named item's.
void set_group_headers(Response& res, const std::vector<const Policy*>& policies, const std::vector<Decision>& d) {
  std::string policy_field;
  std::string current_field;
  const std::size_t named = named_item(d);
  for (std::size_t i = 0; i < d.size(); ++i) {
    for_each_rate_limit_header(*policies[i], d[i], [&](std::string_view name, std::string_view value) {
      std::string* list = name == "RateLimit-Policy" ? &policy_field : name == "RateLimit" ? &current_field : nullptr;
      if (list != nullptr) {
        list->append(list->empty() ? "" : ", ").append(value);
      } else if (i == named) {
        res.set(name, value);
      }
    });
  }
  res.set("RateLimit-Policy", policy_field);
  res.set("RateLimit", current_field);
}

}  // namespace

bool Service::route_hits(const Request& req, Response& res, Pending&, const Installed& in) {
  auto hits = parse_hits(req.body(), *in.config);
  if (!hits.ok()) {
    respond_error(res, http::status::bad_request, hits.status());
    return false;
  }
  const std::size_t n = hits->size();
  std::vector<Pending> pending(n);
  std::vector<Limiter::Request> requests;
  std::vector<const Policy*> policies;
  for (std::size_t i = 0; i < n; ++i) {
    GroupHit& h = (*hits)[i];
    Pending& p = pending[i];
    p.configured = h.configured;
    p.policy = &h.configured->for_key(h.key);
    p.key = std::move(h.key);
    p.cost = h.cost;
    p.slot = in.metric_slots.at(h.configured);
    // A shadow policy's denial does not stop the others.
    requests.push_back(Limiter::Request{p.policy, p.key, p.cost, Effect::kHit, h.configured->shadow});
    policies.push_back(p.policy);
  }
  std::vector<absl::StatusOr<Decision>> out(n);
  const Micros now = limiter_.clock().now();
  const bool committed = limiter_.decide_group(requests, now, out);
  std::vector<Decision> decisions;
  bool outage = false;
  for (std::size_t i = 0; i < n; ++i) {
    if (!out[i].ok()) {
      const bool bound = out[i].status().code() == absl::StatusCode::kResourceExhausted;
      respond_error(res, bound ? http::status::service_unavailable : http::status::bad_request,
                    fmt::format("hits[{}]: {}", i, std::string(out[i].status().message())));
      return false;
    }
    Decision counted = *out[i];
    counted.allowed = counted.allowed && committed;  // a refused group charged nothing
    count(pending[i], counted, now);
    outage = outage || is_outage(*out[i]);
    decisions.push_back(*out[i]);
  }
  std::string body = fmt::format("{{\"allowed\": {}, \"hits\": [", committed ? "true" : "false");
  for (std::size_t i = 0; i < n; ++i) {
    const bool shadow_denied = pending[i].configured->shadow && !decisions[i].allowed;
    std::string one = decision_json(*policies[i], decisions[i], shadow_denied);
    while (!one.empty() && one.back() == '\n') one.pop_back();
    body.append(i == 0 ? "" : ", ").append(one);
  }
  body.append("]}\n");
  const http::status status = committed ? http::status::ok
                                        : (outage ? static_cast<http::status>(in.config->outage_status)
                                                  : http::status::too_many_requests);
  respond(res, status, std::move(body));
  set_group_headers(res, policies, decisions);
  if (!committed && outage) mark_outage(res, nullptr);
  if (committed) res.erase("Retry-After");
  return false;
}

}  // namespace floodgate::server
