// Envoy's RateLimitService (envoy.service.ratelimit.v3) without sockets: a request message in, a
// response message and a status out. The gRPC server (grpc/server.hpp) is a thin shell around it.
#pragma once

#include <functional>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/support/status.h>

#include "absl/container/flat_hash_map.h"
#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "floodgate/clock.hpp"
#include "floodgate/limiter.hpp"
#include "server/common/coalescer.hpp"
#include "server/config/config.hpp"
#include "server/rls/call.hpp"
#include "server/common/published.hpp"
#include "server/rls/rules.hpp"
#include "server/common/policy_cache.hpp"
#include "server/rls/metrics.hpp"

namespace floodgate::server {

namespace rlsv3 = ::envoy::service::ratelimit::v3;

/// Answers ShouldRateLimit following envoyproxy/ratelimit's documented behaviour:
/// - each descriptor's entries walk the domain's tree (RlsDomain::match); at each level a
///   key+value node wins over a wildcard value, which wins over a key-only node (the default for
///   any value); the rule is the last entry's node's rate_limit; no match (or an unknown domain)
///   → OK with no current_limit;
/// - a descriptor's `limit` override replaces the rule's limit (same algorithm, own state);
/// - hits: the descriptor's hits_addend, else the request's; 0 means 1;
/// - any descriptor over limit → OVER_LIMIT overall, and no descriptor is charged: one
///   descriptor is one atomic storage call; several are one Limiter::decide_group, all or nothing
///   (atomic across processes on a single Redis; docs/envoy.md);
/// - shadow_mode rules answer OK but count as over limit (and shadow) in metrics;
/// - `replaces`: a matched rule named in another matched rule's `replaces` is not applied;
/// - limit_remaining saturates at 2^32−1; duration_until_reset is the decision's reset_after;
/// - storage failure: the rule's fail mode (open: OK, closed: OVER_LIMIT), decided by the Limiter.
///
/// Thread-safety: `should_rate_limit` and `reload` may be called from any number of threads.
class RlsService {
 public:
  /// Decides through `limiter`, which must outlive the service (`floodgate serve` owns one Limiter
  /// that this service and the HTTP API borrow, so one pipeline decides and counts for both).
  RlsService(Limiter& limiter, RlsSettings settings);
  /// With a Limiter of its own over `storage`.
  RlsService(std::shared_ptr<Storage> storage, std::shared_ptr<const Clock> clock, RlsSettings settings);
  /// Finishes the queued requests (calling their `done`), then stops the storage threads.
  ~RlsService();

  /// Installs rules; requests that start afterwards use them.
  void reload(std::shared_ptr<const RlsConfig> config);
  [[nodiscard]] std::shared_ptr<const RlsConfig> config() const { return installed_.get()->config; }

  /// Fills `response`; a non-OK status (INVALID_ARGUMENT naming the problem) means `response` is
  /// not to be sent.
  grpc::Status should_rate_limit(const rlsv3::RateLimitRequest& request,
                                 rlsv3::RateLimitResponse& response);

  /// The same, without blocking the caller when `settings().batching`: the decision is made on a
  /// storage thread, and `done` is called there with the status once `response` is filled.
  /// `request` and `response` must live until then. Without batching, runs `done` before it
  /// returns.
  ///
  /// `gone` (optional) says whether the caller has gone (cancelled, or its deadline passed). It is
  /// asked just before deciding: a call whose caller has gone is not decided and costs nothing
  /// (DEADLINE_EXCEEDED, counted in floodgate_rls_abandoned_total); once decided, a charge stands.
  void should_rate_limit_async(const rlsv3::RateLimitRequest& request, rlsv3::RateLimitResponse& response,
                               std::function<void(grpc::Status)> done, std::function<bool()> gone = {});

  /// The answer to a caller that has gone before its call was decided (DEADLINE_EXCEEDED, nothing
  /// charged); counts it in floodgate_rls_abandoned_total. For a caller that decides with
  /// `should_rate_limit` itself after asking whether its caller has gone.
  grpc::Status abandoned();

  [[nodiscard]] const RlsSettings& settings() const noexcept { return settings_; }
  [[nodiscard]] RlsMetrics& metrics() noexcept { return metrics_; }
  /// Drops the compiled limit overrides not used since the previous call (serve's Housekeeping
  /// calls it every few seconds; their state stays in the storage). Returns how many.
  std::size_t drop_unused_overrides() { return overrides_.drop_unused(); }

 private:
  struct Job {
    std::unique_ptr<RlsCall> prepared;
    rlsv3::RateLimitResponse* response;
    std::function<void(grpc::Status)> done;
    std::function<bool()> gone;
  };

  grpc::Status validate(const rlsv3::RateLimitRequest& request) const;
  grpc::Status prepare(const rlsv3::RateLimitRequest& request, RlsCall& p);
  grpc::Status resolve(const rlsv3::RateLimitRequest& request, int i, const RlsDomain& domain,
                       const RlsInstalled& in, RlsItem& it);
  void decide(RlsCall& p);
  grpc::Status respond(RlsCall& p, rlsv3::RateLimitResponse& response);
  void decide_jobs(std::vector<Job>& jobs);
  // A request's limit of `rule` (cached); `counter`: its fixed window as a quota counts
  // (rls_counter), null for another algorithm.
  std::shared_ptr<const Policy> override_policy(const RlsDomain& domain, const RlsRule* rule,
                                                std::uint32_t requests_per_unit, RlsUnit unit, bool counter = false);
  void count(const RlsItem& item, const Decision& d, bool charged);

  RlsService(std::unique_ptr<Limiter> owned, Limiter* borrowed, RlsSettings settings);

  std::unique_ptr<Limiter> own_limiter_;  // with the storage constructor only
  Limiter& limiter_;
  RlsSettings settings_;
  bool envoyproxy_keys_;  // the storage keeps eligible rules in envoyproxy's keys (storage traits)
  RlsMetrics metrics_;
  Published<RlsInstalled> installed_;
  PolicyCache overrides_{1024};  // compiled limit overrides, least recently used dropped
  std::unique_ptr<Coalescer<Job>> coalescer_;  // with batching; last, so it is destroyed first
};

}  // namespace floodgate::server
