// GET /v1/live: per configured policy (and "inline"), decisions per second over the last
// LiveStats::kSeconds seconds, totals since start, the degraded state and the most-denied keys;
// and the storage: its servers and the degraded decisions of the whole pipeline; then the keys of
// set_extra_live (the RLQS split).
#include "server/api/json_out.hpp"
#include "server/api/service.hpp"
#include "storage/url.hpp"

namespace floodgate::server {

namespace {

constexpr std::size_t kTop = 10;
constexpr std::size_t kDegradedSeconds = 5;

// "gcra 10/second burst 20" (Policy::describe without the leading "name: ").
std::string describe_limits(const Policy& p) {
  std::string d = p.describe();
  if (const std::size_t colon = d.find(": "); colon != std::string::npos) d.erase(0, colon + 2);
  return d;
}

void write_counts(JsonOut& j, std::string_view name, const std::vector<std::uint64_t>& v) {
  j.key(name).begin_array();
  for (const std::uint64_t n : v) j.num(n);
  j.end();
}

void write_servers(JsonOut& j, const std::vector<Storage::ServerState>& servers) {
  j.key("servers").begin_array();
  for (const Storage::ServerState& s : servers) {
    j.begin_object().key("name").str(s.name).key("breaker").str(s.breaker_open ? "open" : "closed");
    j.key("reconnecting").boolean(s.reconnecting).key("connections").num(s.connections).end();
  }
  j.end();
}

}  // namespace

bool Service::route_live(const Request&, Response& res, Pending&, const Installed& in) {
  const Micros now = limiter_.clock().now();
  const Micros last = last_degraded_.load(std::memory_order_relaxed);
  JsonOut j;
  j.begin_object().key("now").seconds(now).key("seconds").num(LiveStats::kSeconds);
  j.key("storage").begin_object().key("url").str(redact_storage_url(in.config->storage));
  j.key("degraded").boolean(storage_degraded_recently(now));
  if (last == 0) {
    j.key("last_degraded_ago").null();
  } else {
    j.key("last_degraded_ago").seconds(now - last);
  }
  j.key("degraded_total").num(limiter_.degraded_count());
  write_servers(j, limiter_.storage().servers());
  j.end();
  j.key("policies").begin_array();
  auto one = [&](std::string_view name, std::size_t slot, const ServicePolicy* sp) {
    const LiveStats::Series series = live_.read(slot, now, kTop);
    const auto& degraded = series.per_second[LiveStats::kDegraded];
    std::uint64_t recent = 0;
    for (std::size_t i = degraded.size() - kDegradedSeconds; i < degraded.size(); ++i) recent += degraded[i];
    j.begin_object().key("name").str(name);
    j.key("policy").str(sp != nullptr ? describe_limits(*sp->policy) : "inline limits");
    j.key("fail").str(sp != nullptr && sp->policy->fail_mode() == FailMode::kClosed ? "closed" : "open");
    j.key("shadow").boolean(sp != nullptr && sp->shadow).key("state").str(recent > 0 ? "degraded" : "ok");
    j.key("totals").begin_object();
    j.key("allowed").num(metrics_.total(slot, Metrics::kAllowed));
    j.key("denied").num(metrics_.total(slot, Metrics::kDenied));
    j.key("shadow_denied").num(metrics_.total(slot, Metrics::kShadowDenied));
    j.key("degraded").num(metrics_.total(slot, Metrics::kDegraded)).end();
    write_counts(j, "allowed", series.per_second[LiveStats::kAllowed]);
    write_counts(j, "denied", series.per_second[LiveStats::kDenied]);
    write_counts(j, "degraded", degraded);
    j.key("top_denied").begin_array();
    for (const TopKeys::Item& it : series.top_denied) {
      j.begin_object().key("key").str(it.key).key("count").num(it.count).key("error").num(it.error).end();
    }
    j.end().end();
  };
  for (const ServicePolicy& sp : in.config->policies) one(sp.policy->name(), in.metric_slots.at(&sp), &sp);
  if (in.config->allow_inline) one("inline", inline_slot_, nullptr);
  j.end();
  if (extra_live_) extra_live_(j);
  j.end();
  respond(res, http::status::ok, j.take());
  res.set(http::field::cache_control, "no-store");
  return false;
}

}  // namespace floodgate::server
