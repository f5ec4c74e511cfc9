// The rate-limit service's HTTP semantics, without sockets: a request in, a response out.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "floodgate/limiter.hpp"
#include "server/config/config.hpp"
#include "server/api/inline_policies.hpp"
#include "server/api/live.hpp"
#include "server/api/metrics.hpp"
#include "server/common/published.hpp"
#include "server/api/requests.hpp"
#include "server/api/responses.hpp"

namespace floodgate::server {

class JsonOut;

/// Routes and answers the API (docs/http-api.md):
///   POST /v1/hit, POST /v1/test, GET /v1/stats, DELETE /v1/keys, GET /v1/auth,
///   GET /metrics, GET /healthz, GET /readyz; the dashboard: GET / (the page), POST /v1/simulate
///   (api/route_simulate.cpp), GET /v1/live (api/route_live.cpp). GET routes also answer HEAD.
/// DELETE /v1/keys, POST /v1/simulate and GET /v1/live are admin endpoints: they need
/// `Authorization: Bearer <config.admin.token>`; without a configured token they are refused.
/// Every decision goes through the Limiter's pipeline (floodgate/limiter.hpp); this class only
/// resolves the policy and key of a request, applies the allow list and counts per policy.
///
/// Thread-safety: `handle`, `prepare`, `decide`, `finish` and `reload` may be called from any
/// number of threads.
/// What a route needs from the transport before its request is read whole.
struct RouteNeeds {
  /// Its body may be up to HttpLimits::max_simulate_body_bytes (a trace); others get max_body_bytes.
  bool large_body = false;
  /// It takes milliseconds (a simulation): the transport runs it with `handle` off its I/O
  /// threads, and `prepare` is not called for it.
  bool off_thread = false;
};

class Service {
 public:
  /// Decides through `limiter`, which must outlive the service. `floodgate serve` owns one Limiter
  /// that this service and the gRPC service (RlsService) borrow, so one pipeline decides and counts
  /// for both.
  Service(std::shared_ptr<const Config> config, Limiter& limiter);
  /// With a Limiter of its own over `storage` (tests, and a service embedded alone).
  Service(std::shared_ptr<const Config> config, std::shared_ptr<Storage> storage,
          std::shared_ptr<const Clock> clock = SystemClock::instance());

  /// A request that needs a decision from the storage, between `prepare` and `finish`. Built
  /// afresh by `prepare` for each request: nothing one request resolved (its policy, reservation,
  /// time to live, allow list) can reach the next request of the same connection.
  struct Pending {
    enum class Kind : std::uint8_t { kHit, kTest, kAuth, kSettle, kRelease, kRenew };
    Kind kind = Kind::kHit;
    std::shared_ptr<const void> installed;  // keeps the configuration it was resolved under alive
    const ServicePolicy* configured = nullptr;  // null for an inline policy
    std::shared_ptr<const Policy> owned;        // the inline policy
    const Policy* policy = nullptr;
    std::string key;
    std::int64_t cost = 1;  ///< for kSettle, the actual usage
    std::string reservation;  ///< kHit: reserve under this id (empty: a plain hit); kSettle: the id
    Micros ttl = kDefaultReservationTtl;
    std::size_t slot = 0;
    int denied_status = 429;
    int outage_status = 503;  ///< Config::outage_status
    bool head = false;  // answered without a body
  };

  /// What the route of `method` and `path` (origin form, without the query) needs. Unknown routes,
  /// and methods a route does not take, need nothing special. Cheap: asked for every request.
  [[nodiscard]] static RouteNeeds needs(http::verb method, std::string_view path) noexcept;
  /// The body limit of a route with `needs`.
  [[nodiscard]] static std::size_t body_limit(const RouteNeeds& needs, const HttpLimits& limits) noexcept {
    return needs.large_body ? limits.max_simulate_body_bytes : limits.max_body_bytes;
  }

  /// Fills `res` (status, headers, body) for `req`. Never throws for bad input: it answers 4xx.
  /// Equivalent to `prepare`, then one decision, then `finish`.
  void handle(const Request& req, Response& res);

  /// Routes `req`. Returns the decision it needs, a value of this request alone (then `res` is
  /// finished by `finish`); nullopt when `res` is already complete (errors, metrics, health, …).
  [[nodiscard]] std::optional<Pending> prepare(const Request& req, Response& res);

  /// Decides many prepared requests at one time with one storage round trip
  /// (Limiter::decide). `out` has one slot per request.
  void decide(std::span<Pending* const> pending, std::span<absl::StatusOr<Decision>> out);

  /// A prepared hit that this process's budget slice of its key admits at once (Limiter::try_budget):
  /// counted and `res` finished, true; false when it must be decided as usual (`decide`). Cheap:
  /// asked by the I/O thread before it hands a request to the storage threads.
  bool decide_locally(const Pending& pending, Response& res, std::string* header_lines = nullptr);

  /// Completes the response of a prepared request from its decision. With `header_lines`, the
  /// rate-limit headers are appended there as header lines (append_rate_limit_headers), for the
  /// HTTP server to write after `res`'s own fields, instead of being set in `res`.
  void finish(const Pending& pending, const absl::StatusOr<Decision>& decision, Response& res,
              std::string* header_lines = nullptr);

  /// Whether requests are worth coalescing (a networked storage, unless `batching: off`).
  [[nodiscard]] bool batches() const noexcept { return batches_; }

  /// Installs a new configuration; requests that start afterwards use it. The storage, the listen
  /// address and the thread count are not changed by a reload.
  void reload(std::shared_ptr<const Config> config);

  [[nodiscard]] std::shared_ptr<const Config> config() const { return installed_.get()->config; }

  /// Answers `POST /json` (envoyproxy/ratelimit's JSON form of a RateLimitRequest: rls/json.hpp)
  /// with `answer`, given the body. Without it, /json is 404. Set before serving.
  using JsonRls = std::function<void(std::string_view body, Response& res)>;
  void set_json_rls(JsonRls answer) { json_rls_ = std::move(answer); }

  /// Why the service is not ready (empty: ready as far as this goes), asked by /readyz before its
  /// storage checks; e.g. no rate-limit rules have come over xDS yet. Set before serving.
  void set_not_ready(std::function<std::string()> why) { not_ready_ = std::move(why); }
  /// Whether envoyproxy's `/healthcheck` answers 200 (else 500 with the reason returned; empty:
  /// healthy), e.g. 500 from SIGTERM on and, with HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED, until
  /// rules are loaded. Unset: as /healthz. Set before serving.
  void set_healthcheck(std::function<std::string()> why_unhealthy) { healthcheck_ = std::move(why_unhealthy); }

  /// Families appended to `/metrics` (e.g. the gRPC service's counters). Set before serving.
  void set_extra_metrics(std::function<void(PromText&)> extra) { extra_metrics_ = std::move(extra); }
  /// Keys appended to GET /v1/live's object (e.g. the RLQS split, "rlqs"). Set before serving.
  void set_extra_live(std::function<void(JsonOut&)> extra) { extra_live_ = std::move(extra); }
  [[nodiscard]] Metrics& metrics() noexcept { return metrics_; }
  /// The text of GET /metrics (Prometheus exposition 0.0.4), for another listener that serves it.
  /// Thread-safe.
  [[nodiscard]] std::string metrics_text();
  [[nodiscard]] Limiter& limiter() noexcept { return limiter_; }
  /// Drops the compiled inline limits not used since the previous call (serve's Housekeeping
  /// calls it every few seconds; their state stays in the storage). Returns how many.
  std::size_t drop_unused_policies() { return inline_policies_.drop_unused(); }

  /// Whether the storage answered its last probe (StorageWatch). While it does not and some policy
  /// fails closed, /readyz answers 503. True until told otherwise. When it answers again, the
  /// failures before that no longer hold /readyz at 503 (only failures after it do, for 5 s).
  void set_storage_reachable(bool up) noexcept;

 private:
  struct Installed {
    std::shared_ptr<const Config> config;
    absl::flat_hash_map<const ServicePolicy*, std::size_t> metric_slots;  // a policy of `config` → its metrics slot
  };
  using Handler = bool (Service::*)(const Request&, Response&, Pending&, const Installed&);
  struct Route {
    std::string_view path;
    http::verb verb;
    Handler handler;
    bool admin = false;  ///< needs the admin bearer token (api/admin_auth.hpp)
    RouteNeeds needs{};
  };
  static const Route kRoutes[];

  bool route_hit(const Request& req, Response& res, Pending& p, const Installed& in);
  bool route_hits(const Request& req, Response& res, Pending& p, const Installed& in);  // route_hits.cpp
  bool route_test(const Request& req, Response& res, Pending& p, const Installed& in);
  bool route_settle(const Request& req, Response& res, Pending& p, const Installed& in);
  bool route_release(const Request& req, Response& res, Pending& p, const Installed& in);
  bool route_renew(const Request& req, Response& res, Pending& p, const Installed& in);
  bool route_auth(const Request& req, Response& res, Pending& p, const Installed& in);
  bool route_stats(const Request& req, Response& res, Pending& p, const Installed& in);
  bool route_clear(const Request& req, Response& res, Pending& p, const Installed& in);
  bool route_metrics(const Request& req, Response& res, Pending& p, const Installed& in);
  bool route_simulate(const Request& req, Response& res, Pending& p, const Installed& in);
  bool route_live(const Request& req, Response& res, Pending& p, const Installed& in);
  bool route_healthz(const Request& req, Response& res, Pending& p, const Installed& in);
  bool route_json(const Request& req, Response& res, Pending& p, const Installed& in);
  bool route_readyz(const Request& req, Response& res, Pending& p, const Installed& in);
  bool route_healthcheck(const Request& req, Response& res, Pending& p, const Installed& in);

  bool admit(const Request& req, Response& res, const Installed& in);
  bool dispatch(const Request& req, Response& res, Pending& pending, const Installed& in);
  static void strip_body(Response& res);
  bool prepare_body(const Request& req, Response& res, Pending& p, const Installed& in);
  bool resolve_body(DecisionBody body, Response& res, Pending& p, const Installed& in);
  const Policy* key_query(const Request& req, Response& res, const Installed& in, std::string& key);
  [[nodiscard]] bool storage_degraded_recently(Micros now) const;
  void count(const Pending& p, const Decision& d, Micros now);

  Service(std::shared_ptr<const Config> config, std::unique_ptr<Limiter> owned, Limiter* borrowed);

  std::unique_ptr<Limiter> own_limiter_;  // with the storage constructor only
  Limiter& limiter_;
  bool batches_ = false;
  Metrics metrics_;
  LiveStats live_;
  std::size_t inline_slot_;
  Published<Installed> installed_;
  InlinePolicies inline_policies_;
  std::atomic<Micros> last_degraded_{0};
  std::atomic<bool> storage_up_{true};
  JsonRls json_rls_;
  std::atomic<Micros> recovered_at_{0};  // when the storage last answered after not answering
  std::function<void(PromText&)> extra_metrics_;
  std::function<void(JsonOut&)> extra_live_;
  std::function<std::string()> not_ready_;
  std::function<std::string()> healthcheck_;
};

}  // namespace floodgate::server
