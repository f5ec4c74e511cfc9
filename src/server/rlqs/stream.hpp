// One client's RLQS stream: reads usage reports one at a time, answers each bucket of a report at
// once, and writes assignments pushed by other streams' rebalances. Envoy's ways are accepted:
// `domain` on every message (the first one's is kept), reports with no bucket, time_elapsed 0 or
// whole seconds.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "server/rlqs/messages.hpp"
#include "envoy/service/rate_limit_quota/v3/rlqs.grpc.pb.h"
#include "server/rlqs/rules.hpp"
#include "server/rlqs/table.hpp"

namespace floodgate::server::rlqs {

namespace rlqsv3 = envoy::service::rate_limit_quota::v3;
class Service;

/// Owned by itself (a shared_ptr it holds from `start` to OnDone) and by the service's registry,
/// so that a push from another thread never reaches a freed stream. After its last write it
/// finishes, and pushes are dropped.
class Stream final
    : public grpc::ServerBidiReactor<rlqsv3::RateLimitQuotaUsageReports, rlqsv3::RateLimitQuotaResponse> {
 public:
  Stream(Service& service, ClientId id) : service_(service), id_(id) {}

  /// Starts reading; `self` keeps the stream alive until gRPC is done with it.
  void start(std::shared_ptr<Stream> self);
  /// Queues assignments for this client (any thread); a later one of a bucket replaces an
  /// earlier one not yet written.
  void push(const Assignment& a);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override;

 private:
  using BucketAction = rlqsv3::RateLimitQuotaResponse::BucketAction;

  /// A report: answers every bucket in it. False: the stream is refused (no domain).
  bool handle(const rlqsv3::RateLimitQuotaUsageReports& reports);
  void handle_usage(const rlqsv3::RateLimitQuotaUsageReports::BucketQuotaUsage& usage,
                    const Rules& rules, std::vector<Assignment>& out);
  void untrack(const std::string& key, std::vector<Assignment>& out);
  /// Queues an assignment of a tracked bucket unless a later one is queued or written (under mu_).
  void queue_assignment_locked(const Assignment& a);
  /// Starts a write if none is under way and something is queued; finishes when closing and drained.
  void flush();
  void close(grpc::Status status);
  std::uint32_t interval_ttl() const;

  Service& service_;
  const ClientId id_;
  std::shared_ptr<Stream> self_;
  rlqsv3::RateLimitQuotaUsageReports in_;  // the read in flight (the reading side only)
  std::string domain_;                     // the reading side only
  std::int64_t interval_seconds_ = 5;      // the client's last time_elapsed; the reading side only

  std::mutex mu_;
  struct Tracked {
    rlqsv3::BucketId id;
    std::uint64_t seq = 0;  // of the last assignment queued (Assignment::seq)
  };
  // Buckets of this client in the table, by key (read by pushes from other threads).
  absl::flat_hash_map<std::string, Tracked> tracked_;  // guarded by mu_
  absl::flat_hash_map<std::string, BucketAction> pending_;            // guarded by mu_
  rlqsv3::RateLimitQuotaResponse wire_;  // the write in flight; touched only by the one writer
  bool writing_ = false;   // guarded by mu_
  bool closing_ = false;   // guarded by mu_: no more reads; finish once drained
  bool finished_ = false;  // guarded by mu_
  bool broken_ = false;    // guarded by mu_: a write failed; nothing more is written
  grpc::Status status_;    // guarded by mu_: how it finishes
};

}  // namespace floodgate::server::rlqs
