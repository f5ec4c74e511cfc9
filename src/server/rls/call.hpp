// One ShouldRateLimit call between its steps: the rules it runs under, each descriptor matched,
// decided and answered (rls/service.cpp prepares and decides it, rls/respond.cpp answers it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "floodgate/clock.hpp"
#include "floodgate/decision.hpp"
#include "floodgate/policy.hpp"
#include "floodgate/storage.hpp"
#include "server/rls/metrics.hpp"
#include "server/rls/rules.hpp"

namespace floodgate::server {

namespace rlsv3 = ::envoy::service::ratelimit::v3;

/// The rules a call runs under, with each rule's metrics slot; replaced whole by a reload.
struct RlsInstalled {
  std::shared_ptr<const RlsConfig> config;
  absl::flat_hash_map<const RlsRule*, std::size_t> slots;
};

/// One descriptor of a call.
struct RlsItem {
  const RlsRule* rule = nullptr;          // the matched rule (null: no match)
  std::shared_ptr<const Policy> policy;   // what the storage applies (null: no storage call)
  std::string key;
  std::int64_t hits = 1;
  std::uint32_t requests_per_unit = 0;
  RlsUnit unit = RlsUnit::kUnknown;
  bool deny_all = false;                  // requests_per_unit 0
  bool shadow = false;
  bool quota = false;                     // quota_mode: over alone does not refuse the request
  // A quota on a fixed window, counted as envoyproxy counts (RlsRule::counter): what the storage
  // applies instead of `policy`; every hit is committed and the verdict is the count against
  // requests_per_unit (respond). Null otherwise.
  std::shared_ptr<const Policy> counter;
  std::size_t slot = RlsMetrics::kMaxSeries;  // kMaxSeries: not counted
  std::size_t result = 0;                 // index into the storage results
  Decision decision;
  std::string reservation;                // the id entry's value of a rule with a reservation
  Micros reservation_ttl = 0;
};

/// A call between matching and deciding.
struct RlsCall {
  const rlsv3::RateLimitRequest* request = nullptr;  // lives until the answer (should_rate_limit_async)
  std::shared_ptr<const RlsInstalled> installed;
  std::string domain;
  std::vector<RlsItem> items;
  std::vector<Storage::BatchItem> batch;  // the items with a policy, in order
  std::vector<absl::StatusOr<Decision>> results;
  Micros now = 0;
  bool over = false;     // some descriptor blocks the request
  bool charged = false;  // the hits were committed

  // One storage call and nothing denied without it: the request can join any batch of hits.
  [[nodiscard]] bool single_hit() const { return batch.size() == 1 && !over; }
};

/// Whether a decision refuses the call: denied, and not by a rule in shadow mode.
inline bool blocks(bool shadow, const Decision& d) noexcept { return !d.allowed && !shadow; }

/// envoyproxy's response dynamic metadata: the domain, each descriptor's entries ("key=value"),
/// limit and hits_addend, the request's hits_addend, and under "metadata" the `metadata` of the
/// rules of the descriptors that pass, merged in order as envoyproxy merges: maps key by key,
/// recursively; otherwise a key already set keeps the earlier descriptor's value (rls/metadata.cpp).
void rls_dynamic_metadata(const rlsv3::RateLimitRequest& request, const std::vector<const RlsMeta*>& passed,
                          google::protobuf::Struct& out);

}  // namespace floodgate::server
