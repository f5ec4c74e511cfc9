// The gRPC service's view of one request between its steps (rls/service.cpp prepares and decides it,
// rls/respond.cpp answers it).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "server/rls/service.hpp"

namespace floodgate::server {

struct RlsService::Item {
  const RlsRule* rule = nullptr;          // the matched rule (null: no match)
  std::shared_ptr<const Policy> policy;   // what the storage applies (null: no storage call)
  std::string key;
  std::int64_t hits = 1;
  std::uint32_t requests_per_unit = 0;
  RlsUnit unit = RlsUnit::kUnknown;
  bool deny_all = false;                  // requests_per_unit 0
  bool shadow = false;
  bool quota = false;                     // quota_mode: over alone does not refuse the request
  std::size_t slot = RlsMetrics::kMaxSeries;  // kMaxSeries: not counted
  std::size_t result = 0;                 // index into the storage results
  Decision decision;
};

struct RlsService::Prepared {
  const rlsv3::RateLimitRequest* request = nullptr;  // lives until the answer (should_rate_limit_async)
  std::shared_ptr<const Installed> installed;
  std::string domain;
  std::vector<Item> items;
  std::vector<Storage::BatchItem> batch;  // the items with a policy, in order
  std::vector<absl::StatusOr<Decision>> results;
  Micros now = 0;
  bool over = false;     // some descriptor blocks the request
  bool charged = false;  // the hits were committed

  // One storage call and nothing denied without it: the request can join any batch of hits.
  [[nodiscard]] bool single_hit() const { return batch.size() == 1 && !over; }
};

/// envoyproxy's response dynamic metadata: the domain, each descriptor's entries ("key=value"),
/// limit and hits_addend, the request's hits_addend, and under "metadata" the `metadata` of the
/// rules of the descriptors that pass, merged in order (maps merge key by key, recursively; any
/// other value is replaced by the later one) (rls/metadata.cpp).
void rls_dynamic_metadata(const rlsv3::RateLimitRequest& request, const std::vector<const RlsMeta*>& passed,
                          google::protobuf::Struct& out);

}  // namespace floodgate::server
