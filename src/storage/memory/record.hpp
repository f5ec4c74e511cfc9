// The memory store's record: a key as the record holds it, with the lock word that guards the
// record, and what a thread remembers of the record it decided on last (table.cpp).
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "storage/memory/locks.hpp"

namespace floodgate::detail {

// A key's characters as two words, read with loads of 8, 4 or 1 byte(s) that overlap rather than
// with a variable-length copy (which the CPU cannot forward to the next load: a third of
// Limiter::hit's time on one key went to that stall). A key of up to 16 characters is exactly its
// characters, zero-padded (as a record holds it inline: RecordKey::text), so that with the length
// the pair names it; of a longer key the words are its first and last 8 characters, which tell
// most apart.
struct KeyWords {
  std::uint64_t head = 0;
  std::uint64_t tail = 0;
  bool operator==(const KeyWords&) const = default;
};
[[gnu::always_inline]] inline KeyWords words_of(std::string_view k) noexcept {
  const char* p = k.data();
  const std::size_t n = k.size();
  KeyWords w;
  if (n >= 8) {
    std::memcpy(&w.head, p, 8);
    std::memcpy(&w.tail, p + n - 8, 8);
    // Characters 8 to n - 1 sit at the top of `tail` (little-endian): bring them down.
    if (n <= 16) w.tail = n == 8 ? 0 : w.tail >> (8 * (16 - n));
  } else if (n >= 4) {
    std::uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + n - 4, 4);
    w.head = lo | ((std::uint64_t{hi} >> (8 * (8 - n))) << 32);
  } else if (n > 0) {
    const std::uint64_t three = static_cast<unsigned char>(p[0]) | (static_cast<unsigned char>(p[n / 2]) << 8) |
                                (static_cast<unsigned char>(p[n - 1]) << 16);
    w.head = three & ((std::uint64_t{1} << (8 * n)) - 1);
  }
  return w;
}
static_assert(std::endian::native == std::endian::little, "KeyWords and RecordKey::text are little-endian");

// Key equality without a call to memcmp for the short keys most limits are keyed by.
[[gnu::always_inline]] inline bool same_key(std::string_view a, std::string_view b) noexcept {
  const std::size_t n = a.size();
  if (n != b.size()) return false;
  if (n <= 16) return words_of(a) == words_of(b);
  return std::memcmp(a.data(), b.data(), n) == 0;
}

// A key as a record holds it: one word with its length, the record's lock bit and its holders'
// count (RecordLock), then its characters inline when they fit in 16 bytes (IPs, user ids),
// zero-padded as words_of gives them, else a pointer to them on the heap. 24 bytes, 8-byte aligned,
// so that a record of one 24-byte state (sliding window counter, the buckets) is 48 bytes and one
// of a 16-byte state 40.
struct alignas(8) RecordKey {
  static constexpr std::size_t kInline = 16;
  static constexpr std::uint32_t kDead = RecordLock::kBit - 1;  // a removed record's length
  /// Keys up to this length have a record (longer ones are refused: MemoryStorage::apply).
  static constexpr std::size_t kMaxSize = kDead - 1;
  std::atomic<std::uint64_t> word;  // holders << 32 | RecordLock::kBit | the key's length
  // The characters (words_of), or text[0] a char* to them: an aligned word, where LeakSanitizer
  // (which looks for pointers at aligned words only) sees the characters as reachable. Written
  // with atomic stores: a thread that remembered the record reads them without its lock.
  std::uint64_t text[2];

  [[nodiscard]] std::uint32_t size() const noexcept {
    return static_cast<std::uint32_t>(word.load(std::memory_order_relaxed) & RecordLock::kData);
  }
  [[nodiscard]] char* heap() const noexcept { return reinterpret_cast<char*>(text[0]); }
  [[nodiscard]] std::string_view view() const noexcept {
    const std::uint32_t n = size();
    return {n <= kInline ? reinterpret_cast<const char*>(text) : heap(), n};
  }
  /// Whether the record holds `key` (a removed record holds none). Under the record's lock.
  [[nodiscard]] bool holds(std::string_view key) const noexcept {
    return size() == key.size() && same_key(view(), key);
  }
  /// The inline characters, read without the record's lock (RecordLock's reader protocol).
  [[nodiscard]] KeyWords text_unlocked() noexcept {
    return {std::atomic_ref<std::uint64_t>(text[0]).load(std::memory_order_relaxed),
            std::atomic_ref<std::uint64_t>(text[1]).load(std::memory_order_relaxed)};
  }
  /// Writes `key` into a removed record. Under the record's lock.
  void assign(std::string_view key) {
    KeyWords w;
    if (key.size() > kInline) {
      char* to = new char[key.size()];
      std::copy(key.begin(), key.end(), to);
      w.head = reinterpret_cast<std::uint64_t>(to);
    } else {
      w = words_of(key);
    }
    std::atomic_ref<std::uint64_t>(text[0]).store(w.head, std::memory_order_relaxed);
    std::atomic_ref<std::uint64_t>(text[1]).store(w.tail, std::memory_order_relaxed);
    RecordLock::set_data(word, static_cast<std::uint32_t>(key.size()));
  }
  /// Frees the key's characters and marks the record removed. Under the record's lock.
  void release() noexcept {
    const std::uint32_t n = size();
    if (n != kDead && n > kInline) delete[] heap();
    RecordLock::set_data(word, kDead);
  }
};

// The record this thread last decided on, per table (by the table's number, never reused): a
// thread deciding again on the same key goes to the record without hashing the key, the shard's
// lock or the index, and checks there that the record still holds the key (records are removed
// and reused under their lock; their memory lives as long as the table): under the record's lock,
// or for an inline key by its words read as RecordLock's readers read. `size` and `words` tell a
// different key apart before the record is read.
struct Remembered {
  std::uint64_t table = 0;
  std::size_t size = 0;
  KeyWords words;
  std::byte* record = nullptr;

  [[nodiscard]] [[gnu::always_inline]] bool may_hold(std::uint64_t t, std::string_view k) const noexcept {
    return table == t && size == k.size() && words == words_of(k);
  }
  void remember(std::uint64_t t, std::string_view k, std::byte* r) noexcept {
    *this = {t, k.size(), words_of(k), r};
  }
};
}  // namespace floodgate::detail
