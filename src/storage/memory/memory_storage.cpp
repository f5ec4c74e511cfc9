// The in-memory storage: an immutable snapshot of per-policy tables (table.hpp), replaced when a
// policy is first seen, so that finding a policy's table takes no lock.
#include "floodgate/memory_storage.hpp"

#include "absl/container/flat_hash_map.h"
#include "storage/memory/table.hpp"

namespace floodgate {

// ---- the storage: an immutable snapshot of tables, replaced when a policy is first seen -------
// Tables are found by the policy's precomputed fingerprint hash, and the fingerprint compared.
struct FingerprintHash {
  using is_transparent = void;
  std::size_t operator()(const std::string& f) const { return std::hash<std::string>{}(f); }
  std::size_t operator()(const Policy* p) const { return p->fingerprint_hash(); }
};
struct FingerprintEq {
  using is_transparent = void;
  bool operator()(const std::string& a, const std::string& b) const { return a == b; }
  bool operator()(const std::string& a, const Policy* b) const { return a == b->fingerprint(); }
  bool operator()(const Policy* a, const std::string& b) const { return a->fingerprint() == b; }
};

struct MemoryStorage::Snapshot {
  absl::flat_hash_map<std::string, Table*, FingerprintHash, FingerprintEq> tables;
};

MemoryStorage::MemoryStorage(MemoryStorageOptions options) : options_(options) {
  auto empty = std::make_unique<const Snapshot>();
  tables_.store(empty.get(), std::memory_order_release);
  snapshots_.push_back(std::move(empty));
}

MemoryStorage::~MemoryStorage() = default;

const MemoryStorage::Table* MemoryStorage::find_table(const Policy& policy) const {
  const Snapshot* snap = tables_.load(std::memory_order_acquire);
  const auto it = snap->tables.find(&policy);
  return it == snap->tables.end() ? nullptr : it->second;
}

MemoryStorage::Table& MemoryStorage::table_for(const Policy& policy) {
  if (const Table* t = find_table(policy)) return const_cast<Table&>(*t);
  std::lock_guard<std::mutex> lock(write_mu_);
  const Snapshot* current = tables_.load(std::memory_order_acquire);
  if (auto it = current->tables.find(policy.fingerprint()); it != current->tables.end()) {
    return *it->second;
  }
  owned_.push_back(make_table(policy, options_));
  auto next = std::make_unique<Snapshot>(*current);
  next->tables.emplace(policy.fingerprint(), owned_.back().get());
  tables_.store(next.get(), std::memory_order_release);
  Table& t = *owned_.back();
  snapshots_.push_back(std::move(next));  // readers may still hold the old one: keep it
  return t;
}

absl::StatusOr<Decision> MemoryStorage::apply(const Policy& policy, std::string_view key,
                                              std::int64_t cost, Effect effect, Micros now) {
  return table_for(policy).apply(key, cost, effect, now);
}

absl::Status MemoryStorage::clear(const Policy& policy, std::string_view key) {
  if (const Table* t = find_table(policy)) const_cast<Table*>(t)->clear(key);
  return absl::OkStatus();
}

std::size_t MemoryStorage::size(const Policy& policy) const {
  const Table* t = find_table(policy);
  return t == nullptr ? 0 : t->size();
}

std::uint64_t MemoryStorage::evictions() const noexcept {
  std::lock_guard<std::mutex> lock(write_mu_);
  std::uint64_t n = 0;
  for (const auto& t : owned_) n += t->evictions.load(std::memory_order_relaxed);
  return n;
}

std::uint64_t MemoryStorage::reclaimed() const noexcept {
  std::lock_guard<std::mutex> lock(write_mu_);
  std::uint64_t n = 0;
  for (const auto& t : owned_) n += t->reclaimed.load(std::memory_order_relaxed);
  return n;
}

std::vector<StorageCounter> MemoryStorage::counters() const {
  return {{"floodgate_memory_evictions_total", "Keys evicted at the max_keys bound.", evictions()},
          {"floodgate_memory_reclaimed_total", "Absent keys reclaimed.", reclaimed()}};
}

}  // namespace floodgate
