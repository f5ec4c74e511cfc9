#include "storage/memory/reservations.hpp"

#include <algorithm>
#include <limits>

#include "absl/hash/hash.h"
#include <fmt/format.h>

namespace floodgate {

Reservations::Reservations(std::size_t max) : max_(max), shards_(std::make_unique<Shard[]>(kShards)) {}

Reservations::Shard& Reservations::shard_for(const Policy& policy, std::string_view key) {
  const std::size_t h = absl::HashOf(policy.state_id_hash(), key);
  return shards_[h % kShards];
}

std::string Reservations::entry_key(const Policy& policy, std::string_view key, std::string_view id) {
  return fmt::format("{}:{}{}:{}{}", policy.state_id().size(), policy.state_id(), key.size(), key, id);
}

Reservations::Entry* Reservations::find(Shard& sh, const std::string& k, Micros now) {
  const auto it = sh.entries.find(k);
  if (it == sh.entries.end()) return nullptr;
  if (it->second.expires <= now) {
    sh.entries.erase(it);
    size_.fetch_sub(1, std::memory_order_relaxed);
    return nullptr;
  }
  return &it->second;
}

void Reservations::pop_expired(Shard& sh, Micros now) {
  while (!sh.order.empty() && sh.order.front().first <= now) {
    const auto it = sh.entries.find(sh.order.front().second);
    if (it != sh.entries.end() && it->second.expires == sh.order.front().first) {
      sh.entries.erase(it);
      size_.fetch_sub(1, std::memory_order_relaxed);
    }
    sh.order.pop_front();
  }
}

void Reservations::erase_expired(Shard& sh, Micros now) {
  pop_expired(sh, now);
  Micros next = kNever;
  if (sh.order.size() > 2 * sh.entries.size() + 64) {  // entries erased out of order: rebuild
    std::erase_if(sh.order, [&](const auto& o) {
      const auto e = sh.entries.find(o.second);
      return e == sh.entries.end() || e->second.expires != o.first;
    });
  }
  for (auto it = sh.entries.begin(); it != sh.entries.end();) {
    if (it->second.expires <= now) {
      sh.entries.erase(it++);
      size_.fetch_sub(1, std::memory_order_relaxed);
    } else {
      next = std::min(next, it->second.expires);
      ++it;
    }
  }
  sh.next_scan = next;
}

bool Reservations::has_room(Shard& sh, Micros now) {
  pop_expired(sh, now);
  const auto full = [this] { return size_.load(std::memory_order_relaxed) >= max_; };
  if (full() && now >= sh.next_scan) erase_expired(sh, now);
  // Then the other shards that hold expired entries (those another thread holds are skipped).
  for (std::size_t i = 0; i < kShards && full(); ++i) {
    Shard& other = shards_[i];
    if (&other == &sh || !other.mu.try_lock()) continue;
    if (now >= other.next_scan) erase_expired(other, now);
    other.mu.unlock();
  }
  if (!full()) return true;
  refusals_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

void Reservations::put(Shard& sh, std::string k, const Entry& e) {
  sh.order.emplace_back(e.expires, k);
  const auto [it, inserted] = sh.entries.insert_or_assign(std::move(k), e);
  if (inserted) size_.fetch_add(1, std::memory_order_relaxed);
  sh.next_scan = std::min(sh.next_scan, e.expires);
}

void Reservations::collect(Micros now) {
  for (std::size_t i = 0; i < kShards; ++i) {
    std::lock_guard<std::mutex> lock(shards_[i].mu);
    if (!shards_[i].entries.empty() && now >= shards_[i].next_scan) erase_expired(shards_[i], now);
  }
}

}  // namespace floodgate
