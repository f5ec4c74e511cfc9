// The live view's counters: per policy and second, with the most-denied keys.
#include "server/api/live.hpp"

namespace floodgate::server {

LiveStats::PerThread& LiveStats::local() { return per_thread_entry(id_, mu_, threads_); }

LiveStats::Slot& LiveStats::slot_of(PerThread& t, std::size_t slot) {
  Slot* s = t.slots[slot].load(std::memory_order_acquire);
  if (s != nullptr) return *s;
  std::lock_guard<std::mutex> lock(mu_);
  owned_.push_back(std::make_unique<Slot>());
  s = owned_.back().get();
  t.slots[slot].store(s, std::memory_order_release);
  return *s;
}

void LiveStats::count(std::size_t slot, Kind kind, std::string_view key, Micros now) {
  if (slot >= Metrics::kMaxPolicies) slot = 0;
  Slot& s = slot_of(local(), slot);
  const std::int64_t second = now / kMicrosPerSecond;
  Bucket& b = s.ring[static_cast<std::size_t>(second) % kSeconds];
  if (b.second.load(std::memory_order_relaxed) != second) {  // only this thread writes the ring
    for (auto& n : b.n) n.store(0, std::memory_order_relaxed);
    b.second.store(second, std::memory_order_release);
  }
  b.n[kind].fetch_add(1, std::memory_order_relaxed);
  if (kind != kDenied) return;
  const std::int64_t minute = second / 60;
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.minute != minute) {
    if (s.minute == minute - 1) {
      std::swap(s.previous, s.current);
    } else {
      s.previous.clear();
    }
    s.current.clear();
    s.minute = minute;
  }
  s.current.add(key);
}

LiveStats::Series LiveStats::read(std::size_t slot, Micros now, std::size_t top) const {
  Series out;
  for (auto& v : out.per_second) v.assign(kSeconds, 0);
  if (slot >= Metrics::kMaxPolicies) return out;
  const std::int64_t second = now / kMicrosPerSecond;
  const std::int64_t minute = second / 60;
  TopKeys denied(kTopCapacity);
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& t : threads_) {
    const Slot* s = t->slots[slot].load(std::memory_order_acquire);
    if (s == nullptr) continue;
    for (std::size_t i = 0; i < kSeconds; ++i) {
      const std::int64_t want = second - static_cast<std::int64_t>(kSeconds - 1 - i);
      if (want < 0) continue;
      const Bucket& b = s->ring[static_cast<std::size_t>(want) % kSeconds];
      if (b.second.load(std::memory_order_acquire) != want) continue;
      for (std::size_t k = 0; k < kKinds; ++k) out.per_second[k][i] += b.n[k].load(std::memory_order_relaxed);
    }
    std::lock_guard<std::mutex> top_lock(s->mu);
    if (s->minute == minute) {
      denied.merge(s->current);
      denied.merge(s->previous);
    } else if (s->minute == minute - 1) {
      denied.merge(s->current);
    }
  }
  out.top_denied = denied.top(top);
  return out;
}

}  // namespace floodgate::server
