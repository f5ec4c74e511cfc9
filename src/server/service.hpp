// The rate-limit service's HTTP semantics, without sockets: a request in, a response out.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include <boost/beast/http.hpp>

#include "absl/container/flat_hash_map.h"
#include "floodgate/limiter.hpp"
#include "server/config.hpp"
#include "server/live.hpp"
#include "server/metrics.hpp"

namespace floodgate::server {

namespace http = boost::beast::http;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

/// Routes and answers the API (docs/http-api.md):
///   POST /v1/hit, POST /v1/test, GET /v1/stats, DELETE /v1/keys, GET /v1/auth,
///   GET /metrics, GET /healthz, GET /readyz; the dashboard: GET / (the page), POST /v1/simulate
///   (a trace through several strategies on a private store), GET /v1/live (per-second counts and
///   the most-denied keys per policy).
///
/// Thread-safety: `handle` and `reload` may be called from any number of threads.
class Service {
 public:
  Service(std::shared_ptr<const Config> config, std::shared_ptr<Storage> storage,
          std::shared_ptr<const Clock> clock = SystemClock::instance());

  /// A request that needs a decision from the storage, between `prepare` and `finish`.
  struct Pending {
    enum class Kind : std::uint8_t { kHit, kTest, kAuth };
    Kind kind = Kind::kHit;
    std::shared_ptr<const void> installed;  // keeps the configuration it was resolved under alive
    const ServicePolicy* configured = nullptr;  // null for an inline policy
    std::shared_ptr<const Policy> owned;        // the inline policy
    const Policy* policy = nullptr;
    std::string key;
    std::int64_t cost = 1;
    std::size_t slot = 0;
    int denied_status = 429;
  };

  /// Fills `res` (status, headers, body) for `req`. Never throws for bad input: it answers 4xx.
  /// Equivalent to `prepare`, then one decision, then `finish`.
  void handle(const Request& req, Response& res);

  /// Routes `req`. Returns true when it needs a decision (then `pending` describes it and `res` is
  /// finished by `finish`); false when `res` is already complete (errors, metrics, health, …).
  bool prepare(const Request& req, Response& res, Pending& pending);

  /// Decides many prepared requests with one storage round trip (Storage::apply_batch), applying
  /// each policy's fail mode to storage errors. `out` has one slot per request.
  void decide(std::span<Pending* const> pending, std::span<absl::StatusOr<Decision>> out);

  /// Completes the response of a prepared request from its decision.
  void finish(const Pending& pending, const absl::StatusOr<Decision>& decision, Response& res);

  /// Whether the storage is worth coalescing requests for (a networked one); the memory store
  /// answers in nanoseconds and is called directly.
  [[nodiscard]] bool batches() const noexcept { return batches_; }

  /// Installs a new configuration; requests that start afterwards use it. The storage, the listen
  /// address and the thread count are not changed by a reload.
  void reload(std::shared_ptr<const Config> config);

  [[nodiscard]] std::shared_ptr<const Config> config() const;

  /// Text appended to `/metrics` (e.g. the gRPC service's counters). Set before serving.
  void set_extra_metrics(std::function<std::string()> extra) { extra_metrics_ = std::move(extra); }
  [[nodiscard]] Metrics& metrics() noexcept { return metrics_; }
  [[nodiscard]] Limiter& limiter() noexcept { return limiter_; }

 private:
  struct Installed {
    std::shared_ptr<const Config> config;
    absl::flat_hash_map<std::string, std::size_t> metric_slots;  // policy name → metrics slot
  };
  struct Target;  // a resolved policy for one request

  std::shared_ptr<const Installed> current();
  bool prepare_hit_or_test(const Request& req, Response& res, Pending& p, const Installed& in);
  const Policy* query_target(const Request& req, Response& res, const Installed& in, std::string& key);
  void stats(const Request& req, Response& res, const Installed& in);
  void clear(const Request& req, Response& res, const Installed& in);
  bool prepare_auth(const Request& req, Response& res, Pending& p, const Installed& in);
  void readyz(Response& res, const Installed& in);
  void simulate(const Request& req, Response& res);
  void live(Response& res, const Installed& in);
  absl::StatusOr<std::shared_ptr<const Policy>> inline_policy(const Config& c, std::string_view limit,
                                                              std::string_view strategy,
                                                              std::int64_t burst);
  void count(const Pending& p, const Decision& d, Micros now);

  Limiter limiter_;
  std::shared_ptr<Storage> storage_;
  bool batches_ = false;
  Metrics metrics_;
  LiveStats live_;
  std::size_t inline_slot_;

  mutable std::mutex install_mu_;
  std::shared_ptr<const Installed> installed_;  // guarded by install_mu_
  std::atomic<std::uint64_t> version_{0};

  std::mutex inline_mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<const Policy>> inline_policies_;  // inline_mu_

  std::atomic<Micros> last_degraded_{0};
  std::function<std::string()> extra_metrics_;
};

/// The value of query parameter `name` in a request target ("/v1/auth?policy=api&key=a%20b"),
/// percent- and '+'-decoded; nullopt if absent.
std::optional<std::string> query_param(std::string_view target, std::string_view name);

}  // namespace floodgate::server
