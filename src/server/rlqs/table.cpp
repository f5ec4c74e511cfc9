// The quota table: reports in, changed assignments out.
#include "server/rlqs/table.hpp"

#include <algorithm>

namespace floodgate::server::rlqs {

namespace {

constexpr Micros kMaxInterval = 60 * kMicrosPerSecond;

}  // namespace

Table::Bucket* Table::bucket_for(const Report& r) {
  auto it = buckets_.find(r.key);
  if (it == buckets_.end()) {
    if (buckets_.size() >= options_.max_buckets || entries_ >= options_.max_entries) return nullptr;
    it = buckets_.emplace(r.key, Bucket{r.shape, {}}).first;
  }
  Bucket& bucket = it->second;
  if (!(bucket.shape == r.shape)) {  // the rule changed (a reload): every client hears it
    bucket.shape = r.shape;
    bucket.force = true;
    for (auto& [id, e] : bucket.clients) e.sent = false;  // held counts tokens of the old shape
  }
  return &bucket;
}

bool Table::report(const Report& r, std::vector<Assignment>& out) {
  std::lock_guard<std::mutex> lock(mu_);
  Bucket* bucket = bucket_for(r);
  if (bucket == nullptr) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  auto e = bucket->clients.find(r.client);
  const bool fresh = e == bucket->clients.end();
  if (fresh && entries_ >= options_.max_entries) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    if (bucket->clients.empty()) buckets_.erase(r.key);
    return false;
  }
  if (fresh) {
    e = bucket->clients.emplace(r.client, Entry{}).first;
    ++entries_;
  }
  Entry& entry = e->second;
  if (r.elapsed_seconds > 0) {  // a first report (0) says nothing of the rate
    const double requests = static_cast<double>(r.allowed) + static_cast<double>(r.denied);
    entry.demand = requests / static_cast<double>(r.elapsed_seconds);
    entry.interval = std::min<Micros>(r.elapsed_seconds, kMaxInterval / kMicrosPerSecond) * kMicrosPerSecond;
  }
  if (entry.interval == 0) entry.interval = options_.default_interval;
  entry.last = r.now;
  // A bucket of many clients is rebalanced at most every rebalance_gap (its reports come every few
  // ms); a new client, a new rule and small buckets at once.
  const bool due = fresh || bucket->force || bucket->clients.size() <= options_.eager_clients ||
                   r.now - bucket->rebalanced >= options_.rebalance_gap;
  if (due) {
    drop_silent(*bucket, r.now, r.client);
    rebalance(r.key, *bucket, r.client, r.now, out);
  } else {
    bucket->dirty = true;
    out.push_back(assignment(r.key, *bucket, r.client, entry, r.now));  // what it holds, renewed
  }
  return true;
}

void Table::leave(ClientId client, const std::vector<std::string>& keys, Micros now, std::vector<Assignment>& out) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& key : keys) {
    auto it = buckets_.find(key);
    if (it == buckets_.end()) continue;
    Bucket& bucket = it->second;
    if (bucket.clients.erase(client) == 0) continue;
    --entries_;
    drop_silent(bucket, now, 0);
    if (bucket.clients.empty()) {
      buckets_.erase(it);
    } else {
      rebalance(key, bucket, 0, now, out);
    }
  }
}

void Table::sweep(Micros now, std::vector<Assignment>& out) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    const std::size_t dropped = drop_silent(it->second, now, 0);
    if (it->second.clients.empty()) {
      buckets_.erase(it++);
      continue;
    }
    if (dropped > 0 || it->second.dirty) rebalance(it->first, it->second, 0, now, out);
    ++it;
  }
}

std::size_t Table::drop_silent(Bucket& bucket, Micros now, ClientId keep) {
  std::size_t dropped = 0;
  for (auto it = bucket.clients.begin(); it != bucket.clients.end();) {
    const Entry& e = it->second;
    if (it->first != keep && now - e.last > options_.silent_intervals * e.interval) {
      bucket.clients.erase(it++);
      ++dropped;
    } else {
      ++it;
    }
  }
  entries_ -= dropped;
  return dropped;
}

Assignment Table::assignment(const std::string& key, const Bucket& bucket, ClientId client, const Entry& e,
                             Micros now) {
  // The assignment lives as long as the entry does (silent_intervals of its interval after its
  // last report): a share is never given to others while its holder may still use it.
  const Micros left = e.last + options_.silent_intervals * e.interval - now;
  Assignment a;
  a.client = client;
  a.key = key;
  a.shape = bucket.shape;
  a.tokens_per_fill = e.held;
  a.max_tokens = max_tokens_for(bucket.shape, e.held);
  a.ttl_seconds = static_cast<std::uint32_t>(std::max<Micros>(1, left / kMicrosPerSecond));
  a.seq = ++seq_;
  return a;
}

void Table::rebalance(const std::string& key, Bucket& bucket, ClientId reporter, Micros now,
                      std::vector<Assignment>& out) {
  std::vector<ClientId> ids;
  std::vector<Claim> claims;
  ids.reserve(bucket.clients.size());
  claims.reserve(bucket.clients.size());
  for (const auto& [id, e] : bucket.clients) {
    ids.push_back(id);
    claims.push_back(Claim{e.demand, e.sent ? e.held : 0});
  }
  const std::vector<std::uint64_t> grants = fair_split(bucket.shape, claims, options_.split);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    Entry& e = bucket.clients[ids[i]];
    const bool changed = bucket.force || !e.sent || grants[i] != e.held;
    e.held = grants[i];
    e.sent = true;
    if (changed || ids[i] == reporter) out.push_back(assignment(key, bucket, ids[i], e, now));
  }
  bucket.force = false;
  bucket.dirty = false;
  bucket.rebalanced = now;
}

std::size_t Table::buckets() const {
  std::lock_guard<std::mutex> lock(mu_);
  return buckets_.size();
}

std::size_t Table::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_;
}

std::uint64_t Table::held_sum(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = buckets_.find(key);
  if (it == buckets_.end()) return 0;
  std::uint64_t sum = 0;
  for (const auto& [id, e] : it->second.clients) sum += e.held;
  return sum;
}

}  // namespace floodgate::server::rlqs
