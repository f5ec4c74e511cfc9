// The sync of a bucket's grant with the other instances on the store.
#include "server/rlqs/sync.hpp"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <random>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace floodgate::server::rlqs {

namespace {

double per_token(const Shape& shape, const SplitOptions& options) {
  return static_cast<double>(shape.fill_seconds) * (1 + std::max(0.0, options.headroom));
}

}  // namespace

std::vector<std::int64_t> wants_of(const Shape& shape, std::span<const Claim> claims, const SplitOptions& options) {
  std::vector<std::int64_t> out;
  out.reserve(std::min(claims.size(), kMaxQuotaWants));
  for (const Claim& c : claims) {
    if (out.size() == kMaxQuotaWants) break;
    if (std::isnan(c.demand) || c.demand < 0) {
      out.push_back(kNoHistory);
      continue;
    }
    const double w = std::ceil(c.demand * per_token(shape, options));
    const double total = static_cast<double>(shape.total);
    out.push_back(static_cast<std::int64_t>(std::isfinite(w) ? std::clamp(w, 0.0, total) : total));
  }
  return out;
}

std::uint64_t own_share(const Shape& shape, std::span<const Claim> own, std::span<const std::int64_t> others,
                        const SplitOptions& options) {
  std::vector<Claim> all(own.begin(), own.end());
  for (const std::int64_t w : others) {
    // Back to a demand: fair_split multiplies it by the same factor.
    all.push_back(Claim{w < 0 ? -1.0 : static_cast<double>(w) / per_token(shape, options), 0});
  }
  const std::vector<std::uint64_t> split = fair_split(shape, all, options);
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < own.size(); ++i) sum += split[i];
  return std::min(sum, shape.total);
}

QuotaSync::QuotaSync(std::shared_ptr<Storage> storage, SplitOptions split, Deliver deliver, SyncOptions options)
    : storage_(std::move(storage)), split_(split), deliver_(std::move(deliver)), options_(options) {
  std::random_device rd;
  const std::uint64_t id = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  member_ = fmt::format("{:016x}", id);
}

void QuotaSync::sync(Table& table, bool fresh_only, Micros now) {
  if (fresh_only && !table.has_fresh()) return;
  run(table, fresh_only ? Table::Pick::kFresh : Table::Pick::kAll, now);
}

void QuotaSync::sync_short(Table& table, Micros now) {
  if (table.has_short()) run(table, Table::Pick::kShort, now);
}

void QuotaSync::run(Table& table, Table::Pick pick, Micros now) {
  // Read under the sync's lock: what a bucket asks for is what the last grant left it.
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Table::Local> released;
  const std::vector<Table::Local> locals = table.locals(pick, &released);
  for (const Table::Local& l : released) {  // no clients left here: the grant goes back at once
    const QuotaClaim claim{{}, 0, l.shape.total, now + options_.ttl_periods * options_.period};
    if (auto r = storage_->share_quota(l.key, member_, claim, now); !r.ok()) fail(l.key, r.status());
  }
  for (const Table::Local& l : locals) sync_one(table, l, now);
}

void QuotaSync::sync_one(Table& table, const Table::Local& l, Micros now) {
  QuotaClaim claim;
  claim.wants = wants_of(l.shape, l.claims, split_);
  claim.total = l.shape.total;
  // A bucket new here asks for its clients' fair share as if alone; the store grants what is free.
  claim.requested = l.fresh ? own_share(l.shape, l.claims, {}, split_) : l.requested;
  claim.expiry = now + options_.ttl_periods * options_.period;
  const absl::StatusOr<QuotaShare> share = storage_->share_quota(l.key, member_, claim, now);
  if (!share.ok()) {  // the grant held stays until its expiry (Table::sweep then shrinks it to 0)
    fail(l.key, share.status());
    return;
  }
  const std::uint64_t next = own_share(l.shape, l.claims, share->others, split_);
  std::vector<Assignment> out;
  table.grant(l.key, l.shape, std::min(share->granted, next), next, claim.expiry, now, out);
  deliver_(out);
  if (next >= share->granted) return;
  // Less is wanted than is recorded: the clients are shrunk (pushed) first, then the record.
  claim.requested = next;
  if (auto r = storage_->share_quota(l.key, member_, claim, now); !r.ok()) fail(l.key, r.status());
}

void QuotaSync::fail(const std::string& key, const absl::Status& status) {
  errors_.fetch_add(1, std::memory_order_relaxed);
  const std::int64_t second = std::chrono::duration_cast<std::chrono::seconds>(
                                  std::chrono::steady_clock::now().time_since_epoch()).count();
  if (last_log_.exchange(second) == second) return;  // at most one line a second
  spdlog::warn("rlqs: sharing bucket {} through the storage failed ({}); its grant ends with its time to live",
               key, std::string(status.message()));
}

}  // namespace floodgate::server::rlqs
