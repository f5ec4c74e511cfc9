// The quota table: reports in, changed assignments out.
#include "server/rlqs/table.hpp"

#include <algorithm>
#include <string_view>

#include "absl/container/flat_hash_set.h"

namespace floodgate::server::rlqs {

namespace {

constexpr Micros kMaxInterval = 60 * kMicrosPerSecond;

}  // namespace

Table::Bucket* Table::bucket_for(const Report& r) {
  auto it = buckets_.find(r.key);
  if (it == buckets_.end()) {
    if (buckets_.size() >= options_.max_buckets || entries_ >= options_.max_entries) return nullptr;
    Bucket fresh;
    fresh.shape = r.shape;
    it = buckets_.emplace(r.key, std::move(fresh)).first;
    if (options_.shared) fresh_.push_back(r.key);
  }
  Bucket& bucket = it->second;
  if (bucket.rule != r.rule) bucket.rule = r.rule;
  if (bucket.domain != r.domain) bucket.domain = r.domain;
  if (!(bucket.shape == r.shape)) {  // the rule changed (a reload): every client hears it
    // A shared grant keeps its fraction of the rate in the new tokens (the next sync records it).
    const auto rescale = [&](std::uint64_t v) {
      const long double part = static_cast<long double>(v) * static_cast<long double>(r.shape.total) /
                               static_cast<long double>(std::max<std::uint64_t>(1, bucket.shape.total));
      return std::min(static_cast<std::uint64_t>(part), r.shape.total);
    };
    bucket.budget = rescale(bucket.budget);
    bucket.requested = rescale(bucket.requested);
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
      erase_bucket(it);
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
      erase_bucket(it++);
      continue;
    }
    Bucket& b = it->second;
    // A shared grant not renewed by its end (the store failed): nothing more is handed out.
    const bool lapsed = options_.shared && b.expiry != 0 && b.expiry <= now && b.budget > 0;
    if (lapsed) b.budget = 0;
    if (dropped > 0 || b.dirty || lapsed) rebalance(it->first, b, 0, now, out);
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
  const std::vector<std::uint64_t> grants = fair_split(split_shape(bucket), claims, options_.split);
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

void Table::erase_bucket(absl::flat_hash_map<std::string, Bucket>::iterator it) {
  if (options_.shared && it->second.expiry != 0) released_.push_back(Local{it->first, it->second.shape, {}, 0, false});
  buckets_.erase(it);
}

Shape Table::split_shape(const Bucket& bucket) const {
  Shape s = bucket.shape;
  if (options_.shared) s.total = std::min(bucket.budget, s.total);
  return s;
}

std::vector<Table::Local> Table::locals(Pick pick, std::vector<Local>* released) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Local> out;
  const auto add = [&](const std::string& key, const Bucket& b) {
    Local l{key, b.shape, {}, b.requested, b.expiry == 0};
    l.claims.reserve(b.clients.size());
    for (const auto& [id, e] : b.clients) l.claims.push_back(Claim{e.demand, e.sent ? e.held : 0});
    out.push_back(std::move(l));
  };
  if (pick == Pick::kAll) {
    for (const auto& [key, b] : buckets_) add(key, b);
  } else {
    std::vector<std::string>& keys = pick == Pick::kFresh ? fresh_ : short_;
    absl::flat_hash_set<std::string_view> seen;
    for (const std::string& key : keys) {
      const auto it = buckets_.find(key);
      if (it == buckets_.end() || !seen.insert(it->first).second) continue;
      if (pick == Pick::kFresh ? it->second.expiry == 0 : it->second.budget < it->second.requested) add(key, it->second);
    }
  }
  (pick == Pick::kShort ? short_ : fresh_).clear();
  if (released != nullptr) released->swap(released_);
  return out;
}

bool Table::has_fresh() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !fresh_.empty() || !released_.empty();
}

bool Table::has_short() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !short_.empty();
}

void Table::grant(const std::string& key, const Shape& shape, std::uint64_t budget, std::uint64_t requested,
                  Micros expiry, Micros now, std::vector<Assignment>& out) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = buckets_.find(key);
  if (it == buckets_.end() || !(it->second.shape == shape)) return;
  Bucket& b = it->second;
  const bool changed = b.expiry == 0 || b.budget != budget;
  b.budget = std::min(budget, shape.total);
  b.requested = std::min(requested, shape.total);
  b.expiry = expiry;
  if (b.budget < b.requested) short_.push_back(key);  // asked again soon (sync.hpp)
  if (changed) rebalance(key, b, 0, now, out);
}

std::map<std::pair<std::string, std::string>, Table::RuleLoad> Table::load_by_rule() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::pair<std::string, std::string>, RuleLoad> out;
  for (const auto& [key, b] : buckets_) {
    RuleLoad& l = out[{b.domain, b.rule}];
    ++l.buckets;
    for (const auto& [id, e] : b.clients) {
      ++l.clients;
      l.assigned += static_cast<double>(e.held) / b.shape.fill_seconds;
      if (e.demand > 0) l.reported += e.demand;
    }
  }
  return out;
}

}  // namespace floodgate::server::rlqs
