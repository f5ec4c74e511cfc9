// Instances of the Rate Limit Quota Service on one shared store (Redis) keep each bucket's global
// rate together: each syncs its buckets through Storage::share_quota about once a second (at once
// for a bucket new to it, every short_retry for one granted less than it asked), sending its clients' wants and receiving the others'. It runs
// fair_split over every client of the bucket, its own and the others', and asks for the sum of
// its own clients' shares; the store grants what the other instances' grants leave free, so the
// grants of all instances never sum past the bucket's total. Its own clients are split the grant.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "floodgate/storage.hpp"
#include "server/rlqs/fair_split.hpp"
#include "server/rlqs/table.hpp"

namespace floodgate::server::rlqs {

/// Each client's want in tokens per fill as the split reads it (demand × fill_seconds ×
/// (1 + headroom), rounded up, at most total), kNoHistory for a client without history; at most
/// kMaxQuotaWants of them (the first ones).
std::vector<std::int64_t> wants_of(const Shape& shape, std::span<const Claim> claims, const SplitOptions& options);

/// The sum of what fair_split gives `own` when it splits `shape.total` over `own` and clients of
/// wants `others` (tokens per fill, kNoHistory: without history) together.
std::uint64_t own_share(const Shape& shape, std::span<const Claim> own, std::span<const std::int64_t> others,
                        const SplitOptions& options);

struct SyncOptions {
  Micros period = kMicrosPerSecond;  ///< between two syncs of every bucket
  int ttl_periods = 3;               ///< a grant not renewed for this many periods ends
  /// Between two syncs of a bucket granted less than it asked (the instances that hold the rest
  /// give it back at their own next sync): it takes it within this of that, not a period.
  Micros short_retry = kMicrosPerSecond / 5;
};

/// Thread-safe: syncs are serialized (one bucket at a time), so that grants apply in order.
class QuotaSync {
 public:
  using Deliver = std::function<void(const std::vector<Assignment>&)>;
  QuotaSync(std::shared_ptr<Storage> storage, SplitOptions split, Deliver deliver, SyncOptions options = {});

  /// Syncs every bucket of `table` (`fresh_only`: those not granted yet) and gives back the grants
  /// of the buckets released; the assignments that change are delivered.
  void sync(Table& table, bool fresh_only, Micros now);
  /// Syncs again the buckets of `table` granted less than they asked at their last sync.
  void sync_short(Table& table, Micros now);

  [[nodiscard]] std::uint64_t errors() const noexcept { return errors_.load(std::memory_order_relaxed); }
  [[nodiscard]] const std::string& member() const noexcept { return member_; }
  [[nodiscard]] const SyncOptions& options() const noexcept { return options_; }

 private:
  void run(Table& table, Table::Pick pick, Micros now);
  void sync_one(Table& table, const Table::Local& local, Micros now);
  void fail(const std::string& key, const absl::Status& status);

  std::shared_ptr<Storage> storage_;
  SplitOptions split_;
  Deliver deliver_;
  SyncOptions options_;
  std::string member_;  // this instance in the store: a random 64-bit id
  std::mutex mu_;
  std::atomic<std::uint64_t> errors_{0};
  std::atomic<std::int64_t> last_log_{0};
};

}  // namespace floodgate::server::rlqs
