// GET /metrics: the service's families (Metrics), the pipeline's counters (Limiter), the
// storage's own counters and servers, and the extra families (the gRPC rules), in one text.
#include <algorithm>

#include "server/common/library_log.hpp"
#include "server/api/service.hpp"

namespace floodgate::server {

bool Service::route_metrics(const Request&, Response& res, Pending&, const Installed&) {
  respond(res, http::status::ok, metrics_text(), "text/plain; version=0.0.4");
  return false;
}

std::string Service::metrics_text() {
  PromText out;
  metrics_.render(out);
  out.single("floodgate_blocked_cache_hits_total", "counter",
             "Decisions the blocked-key cache answered without a storage call.", limiter_.blocked_cache_hits());
  out.single("floodgate_storage_degraded_total", "counter",
             "Decisions made by a fail mode because the storage failed (every policy and API).",
             limiter_.degraded_count());
  const BudgetStats slices = limiter_.budget_stats();
  out.single("floodgate_budget_local_decisions_total", "counter",
             "Hits admitted against a budget slice, without a storage call.", slices.local);
  out.single("floodgate_budget_storage_calls_total", "counter",
             "Storage calls made for budget slices (take the next slice, give back its unused units).",
             slices.store_calls);
  out.single("floodgate_budget_slices_total", "counter", "Budget slices taken.", slices.slices);
  out.single("floodgate_budget_held_units", "gauge",
             "Units in this process's budget slices, not yet used (held back from other processes).",
             static_cast<std::uint64_t>(std::max<std::int64_t>(0, slices.held)));
  out.single("floodgate_library_log_suppressed_total", "counter",
             "Log lines of libraries (protobuf, gRPC) dropped by the log's rate limit.", library_log_suppressed());
  out.single("floodgate_grpc_tls_handshake_failures_total", "counter",
             "TLS handshakes on the gRPC listener that failed (mTLS refusals among them).",
             grpc_tls_handshake_failures());
  const Storage& storage = limiter_.storage();
  for (const StorageCounter& c : storage.counters()) out.single(c.name, c.gauge ? "gauge" : "counter", c.help, c.value);
  const auto servers = storage.servers();
  if (!servers.empty()) {
    out.family("floodgate_storage_breaker_open", "gauge",
               "1 while calls to the server fail at once (its circuit breaker is open).");
    for (const auto& s : servers) {
      out.sample("floodgate_storage_breaker_open", {{"server", s.name}}, std::uint64_t{s.breaker_open ? 1u : 0u});
    }
    out.family("floodgate_storage_connections", "gauge", "Open connections to the server.");
    for (const auto& s : servers) out.sample("floodgate_storage_connections", {{"server", s.name}}, std::uint64_t{s.connections});
  }
  if (extra_metrics_) extra_metrics_(out);
  return out.take();
}

}  // namespace floodgate::server
