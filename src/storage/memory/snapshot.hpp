// A record's states read without its lock, as they were at one instant (RecordLock's reader
// protocol, locks.hpp): a decision that writes nothing (a denial, a test) then makes no write to
// the record. For plain states only (trivially copyable, a multiple of 8 bytes): table.cpp's
// kOptimistic tables.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>

#include "floodgate/policy.hpp"
#include "storage/memory/locks.hpp"
#include "storage/memory/record.hpp"

namespace floodgate::detail {

// k states copied from a record without its lock, for a snapshot (RecordLock's reader protocol):
// the copy may race with a holder's writes, and is used only if the word shows that none came in
// between (a sequence lock). By the language's rules a racing read is undefined even when its
// value is thrown away, and ThreadSanitizer reports it: the copy is left out of TSan's
// instrumentation, as it must be for any sequence lock with plain reads. Word by word with atomic
// loads instead, each decision paid a tenth more (their copy defeats store-to-load forwarding).
// The concurrency tests hold the decisions taken this way to exact totals.
// One fixed-size copy per state, never a call to memcpy (which ThreadSanitizer intercepts).
template <class S>
__attribute__((no_sanitize("thread"))) void load_states(const S* from, std::byte* to, std::size_t k) noexcept {
  for (std::size_t i = 0; i < k; ++i) {
    __builtin_memcpy(to + i * sizeof(S), static_cast<const void*>(from + i), sizeof(S));
    asm volatile("" ::: "memory");  // keeps the loop from becoming a call to memcpy
  }
}

enum class Snapshot { kTaken, kOtherKey, kBusy };

// A snapshot: the record's lock word when it was taken, and a copy of its states.
template <class S>
struct Reading {
  std::uint64_t word;
  alignas(16) std::byte states[kMaxLimitsPerPolicy * sizeof(S)];
  S* copy() { return std::launder(reinterpret_cast<S*>(states)); }
};

// Whether the record's word is still `w` (no holder came in since it was read).
[[gnu::always_inline]] inline bool same_word(const RecordKey& rk, std::uint64_t w) noexcept {
  std::atomic_thread_fence(std::memory_order_acquire);
  return rk.word.load(std::memory_order_relaxed) == w;
}

// Reads the `k` states `st` of the record of `rk` as they were at one instant (kTaken). With
// `expect`, the record is one this thread remembered, whose inline key must still be the `n`
// characters of `expect`. kBusy: a holder was in the record; kOtherKey: it holds another key.
template <class S>
[[gnu::always_inline]] inline Snapshot snapshot(RecordKey& rk, const KeyWords* expect, std::size_t n, const S* st,
                                                std::size_t k, Reading<S>& r) {
  r.word = rk.word.load(std::memory_order_acquire);
  if ((r.word & RecordLock::kBit) != 0) return Snapshot::kBusy;
  if (expect != nullptr && ((r.word & RecordLock::kData) != n || rk.text_unlocked() != *expect)) {
    return same_word(rk, r.word) ? Snapshot::kOtherKey : Snapshot::kBusy;
  }
  load_states(st, r.states, k);
  return same_word(rk, r.word) ? Snapshot::kTaken : Snapshot::kBusy;
}

}  // namespace floodgate::detail
