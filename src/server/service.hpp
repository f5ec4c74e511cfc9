// The rate-limit service's HTTP semantics, without sockets: a request in, a response out.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include <boost/beast/http.hpp>

#include "absl/container/flat_hash_map.h"
#include "floodgate/limiter.hpp"
#include "server/config.hpp"
#include "server/metrics.hpp"

namespace floodgate::server {

namespace http = boost::beast::http;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

/// Routes and answers the API (docs/http-api.md):
///   POST /v1/hit, POST /v1/test, GET /v1/stats, DELETE /v1/keys, GET /v1/auth,
///   GET /metrics, GET /healthz, GET /readyz.
///
/// Thread-safety: `handle` and `reload` may be called from any number of threads.
class Service {
 public:
  Service(std::shared_ptr<const Config> config, std::shared_ptr<Storage> storage,
          std::shared_ptr<const Clock> clock = SystemClock::instance());

  /// Fills `res` (status, headers, body) for `req`. Never throws for bad input: it answers 4xx.
  void handle(const Request& req, Response& res);

  /// Installs a new configuration; requests that start afterwards use it. The storage, the listen
  /// address and the thread count are not changed by a reload.
  void reload(std::shared_ptr<const Config> config);

  [[nodiscard]] std::shared_ptr<const Config> config() const;
  [[nodiscard]] Metrics& metrics() noexcept { return metrics_; }
  [[nodiscard]] Limiter& limiter() noexcept { return limiter_; }

 private:
  struct Installed {
    std::shared_ptr<const Config> config;
    absl::flat_hash_map<std::string, std::size_t> metric_slots;  // policy name → metrics slot
  };
  struct Target;  // a resolved policy for one request

  std::shared_ptr<const Installed> current();
  void hit_or_test(const Request& req, Response& res, Effect effect, const Installed& in);
  void stats(const Request& req, Response& res, const Installed& in);
  void clear(const Request& req, Response& res, const Installed& in);
  void auth(const Request& req, Response& res, const Installed& in);
  void readyz(Response& res, const Installed& in);
  absl::StatusOr<std::shared_ptr<const Policy>> inline_policy(const Config& c, std::string_view limit,
                                                              std::string_view strategy,
                                                              std::int64_t burst);
  absl::StatusOr<Decision> decide(const ServicePolicy* sp, const Policy& policy, std::string_view key,
                                  std::int64_t cost, Effect effect, std::size_t slot);

  Limiter limiter_;
  std::shared_ptr<Storage> storage_;
  Metrics metrics_;
  std::size_t inline_slot_;

  mutable std::mutex install_mu_;
  std::shared_ptr<const Installed> installed_;  // guarded by install_mu_
  std::atomic<std::uint64_t> version_{0};

  std::mutex inline_mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<const Policy>> inline_policies_;  // inline_mu_

  std::atomic<Micros> last_degraded_{0};
};

/// The value of query parameter `name` in a request target ("/v1/auth?policy=api&key=a%20b"),
/// percent- and '+'-decoded; nullopt if absent.
std::optional<std::string> query_param(std::string_view target, std::string_view name);

}  // namespace floodgate::server
