// envoy.service.rate_limit_quota.v3.RateLimitQuotaService on floodgate's gRPC listener: one
// stream per client; each report is answered at once for every bucket it names, and a rebalance
// pushes changed assignments to the other clients of the bucket on their own streams.
#pragma once

#include <atomic>
#include <condition_variable>
#include <thread>
#include <cstdint>
#include <memory>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "envoy/service/rate_limit_quota/v3/rlqs.grpc.pb.h"
#include "floodgate/clock.hpp"
#include "server/common/prometheus.hpp"
#include "server/rlqs/rules.hpp"
#include "server/rlqs/sync.hpp"
#include "server/rlqs/table.hpp"

namespace floodgate::server {
class JsonOut;
}  // namespace floodgate::server

namespace floodgate::server::rlqs {

namespace rlqsv3 = envoy::service::rate_limit_quota::v3;

class Stream;

/// What the service counts, for /metrics.
struct Counters {
  std::atomic<std::uint64_t> streams{0};        ///< open now
  std::atomic<std::uint64_t> reports{0};        ///< bucket usages received
  std::atomic<std::uint64_t> ignored{0};        ///< usages without a usable bucket_id
  std::atomic<std::uint64_t> pushed{0};         ///< assignments sent to another client after a rebalance
  std::atomic<std::uint64_t> refused_streams{0};  ///< ended INVALID_ARGUMENT
  std::atomic<std::uint64_t> refused_buckets{0};  ///< over a stream's own cap (the table counts its own)
};

struct ServiceOptions {
  TableOptions table;
  /// Buckets one stream may have tracked at once; its further limited buckets are answered
  /// DENY_ALL for one interval (so one client cannot fill the table for the others).
  std::size_t max_buckets_per_stream = 10'000;
  /// The store the instances share (traits().shared: Redis): each bucket's rate is then shared
  /// with the other instances on it (sync.hpp). Null, or a store of this process alone: this
  /// instance splits each bucket's whole rate among its own clients.
  std::shared_ptr<Storage> storage;
  SyncOptions sync;
};

/// Thread-safety: the gRPC callback threads call it concurrently; `reload` from any thread.
class Service final : public rlqsv3::RateLimitQuotaService::CallbackService {
 public:
  Service(std::shared_ptr<const Rules> rules, std::shared_ptr<const Clock> clock, ServiceOptions options = {});
  ~Service() override;
  /// The service of `rules` (null: none, no service) on `storage`: shared with the other instances
  /// on it when it is shared (Redis). Errors: FailedPrecondition for a networked storage that
  /// cannot share quotas (memcached): `--rlqs-config` needs the memory or a Redis storage.
  static absl::StatusOr<std::unique_ptr<Service>> open(std::shared_ptr<const Rules> rules,
                                                       std::shared_ptr<const Clock> clock,
                                                       std::shared_ptr<Storage> storage);

  /// Publishes new rules: each bucket takes them at its next report (a changed limit is pushed to
  /// every client of the bucket then).
  void reload(std::shared_ptr<const Rules> rules);
  [[nodiscard]] std::shared_ptr<const Rules> rules() const;

  grpc::ServerBidiReactor<rlqsv3::RateLimitQuotaUsageReports, rlqsv3::RateLimitQuotaResponse>*
  StreamRateLimitQuotas(grpc::CallbackServerContext* context) override;

  /// floodgate_rlqs_* families.
  void render_metrics(PromText& out) const;
  /// Per rule: floodgate_rlqs_rule_{clients,buckets,assigned_rate,reported_rate}; and
  /// floodgate_rlqs_sync_errors_total.
  void render_rule_metrics(PromText& out) const;
  /// GET /v1/live's "rlqs" (live.cpp): per limited rule, its limit and this instance's split of it.
  void render_live(JsonOut& out) const;

  // For streams.
  Table& table() noexcept { return table_; }
  Counters& counters() noexcept { return counters_; }
  const ServiceOptions& options() const noexcept { return options_; }
  [[nodiscard]] Micros now() const noexcept { return clock_->now(); }
  /// Hands assignments of other clients to their streams (those gone are skipped).
  void deliver(const std::vector<Assignment>& assignments, ClientId except);
  /// Drops silent clients, at most once a second (called by streams as reports come).
  void maybe_sweep(Micros now);
  void unregister(ClientId id);
  /// Shares the buckets new to this instance through the store now (nothing without one).
  void sync_fresh();

 private:
  std::shared_ptr<const Clock> clock_;
  ServiceOptions options_;
  Table table_;
  Counters counters_;
  mutable std::mutex rules_mu_;
  std::shared_ptr<const Rules> rules_;  // guarded by rules_mu_
  std::mutex streams_mu_;
  absl::flat_hash_map<ClientId, std::shared_ptr<Stream>> streams_;  // guarded by streams_mu_
  std::atomic<ClientId> next_id_{1};
  std::atomic<Micros> next_sweep_{0};
  // With a shared store: the sync, and its thread (every options_.sync.period).
  std::unique_ptr<QuotaSync> sync_;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;  // guarded by stop_mu_
  std::thread syncer_;
};

}  // namespace floodgate::server::rlqs
