// The memory store's shard: a slab of records {k states, then a RecordKey} in chunks aligned to a
// cache line, indexed by a flat hash set of record numbers, under one BigReaderLock (table.cpp
// decides on the records; locking: locks.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "floodgate/clock.hpp"
#include "storage/memory/locks.hpp"
#include "storage/memory/record.hpp"

namespace floodgate::detail {

static_assert(sizeof(RecordKey) == 24);
static_assert(alignof(RecordKey) == 8 && offsetof(RecordKey, text) % alignof(char*) == 0);

inline std::size_t hash_key(std::string_view key) { return absl::Hash<std::string_view>{}(key); }

// A slab chunk of records, aligned to a cache line: a record of 64 bytes (a moving window's of one
// limit: its 40-byte state and the 24-byte key) then sits in one line.
constexpr std::size_t kLine = 64;
struct ChunkDeleter {
  void operator()(std::byte* p) const noexcept { ::operator delete[](p, std::align_val_t{kLine}); }
};
using Chunk = std::unique_ptr<std::byte[], ChunkDeleter>;
/// `bytes` zeroed bytes, aligned to kLine.
Chunk make_chunk(std::size_t bytes);

// A key with its hash, so that the shard choice and the index lookup share one hashing.
struct HashedKey {
  std::string_view key;
  std::size_t hash;
};

struct Shard;

// The eviction sampler's choice: of the live records it saw (`sampled`), the one absent earliest.
struct Victim {
  std::uint32_t record = 0;
  Micros absent_from = kNever;
  int sampled = 0;
};

// Hash and equality of record numbers through their keys, and of keys whose hash is already
// known (heterogeneous lookup): a key is hashed once per call, for the shard and the index.
struct IndexHash {
  using is_transparent = void;
  const Shard* shard;
  std::size_t operator()(std::uint32_t r) const;
  std::size_t operator()(const HashedKey& k) const { return k.hash; }
};
struct IndexEq {
  using is_transparent = void;
  const Shard* shard;
  bool operator()(std::uint32_t a, std::uint32_t b) const { return a == b; }
  bool operator()(std::uint32_t a, const HashedKey& b) const;
  bool operator()(const HashedKey& a, std::uint32_t b) const;
};

// One shard. Shared mode (decisions on known keys) reads `index`, `chunks` and the records and
// writes only a record under its RecordLock; exclusive mode changes everything else.
struct alignas(64) Shard {
  static constexpr std::uint32_t kChunkBits = 6;  // 64 records per chunk: small tables stay small
  static constexpr std::uint32_t kChunk = 1u << kChunkBits;

  mutable BigReaderLock lock;
  std::size_t stride = 0;
  std::size_t key_offset = 0;
  std::vector<Chunk> chunks;
  std::uint32_t used = 0;           // records ever made (live or free)
  std::vector<std::uint32_t> free;  // removed records, reused first
  std::vector<std::uint64_t> live;  // bitmap over records
  std::uint32_t cursor = 0;         // where the sweep and the eviction sampler go on from
  absl::flat_hash_set<std::uint32_t, IndexHash, IndexEq> index{0, IndexHash{this}, IndexEq{this}};

  std::byte* record(std::uint32_t r) const {
    return chunks[r >> kChunkBits].get() + (r & (kChunk - 1)) * stride;
  }
  RecordKey& key(std::uint32_t r) const {
    return *std::launder(reinterpret_cast<RecordKey*>(record(r) + key_offset));
  }
  bool is_live(std::uint32_t r) const { return (live[r >> 6] >> (r & 63)) & 1u; }
  void set_live(std::uint32_t r, bool on) {
    const std::uint64_t bit = std::uint64_t{1} << (r & 63);
    live[r >> 6] = on ? (live[r >> 6] | bit) : (live[r >> 6] & ~bit);
  }
  /// Exclusive mode: the position after the cursor (round the slab), where the sweep and the
  /// eviction sampler look next.
  std::uint32_t next_position() {
    cursor = cursor + 1 < used ? cursor + 1 : 0;
    return cursor;
  }
  /// Exclusive mode: a record to fill, neither live nor indexed: a removed one first, else a new
  /// one at the slab's end (its key dead: nobody knows it yet).
  std::uint32_t take_record();
  /// Exclusive mode: of up to `samples` live records from the cursor on, the one that
  /// `absent_from(r)` (the time from which record r is absent) names earliest.
  template <class AbsentFrom>
  Victim sample(int samples, AbsentFrom&& absent_from) {
    Victim v;
    for (std::uint32_t seen = 0; seen < used && v.sampled < samples; ++seen) {
      const std::uint32_t r = next_position();
      if (!is_live(r)) continue;
      ++v.sampled;
      const Micros t = absent_from(r);
      if (t < v.absent_from) {
        v.absent_from = t;
        v.record = r;
      }
    }
    return v;
  }
};

inline std::size_t IndexHash::operator()(std::uint32_t r) const { return hash_key(shard->key(r).view()); }

inline bool IndexEq::operator()(std::uint32_t a, const HashedKey& b) const {
  // A record that straddles two cache lines: ask for the second while the first arrives.
  __builtin_prefetch(shard->record(a) + shard->stride - 1);
  return same_key(shard->key(a).view(), b.key);
}
inline bool IndexEq::operator()(const HashedKey& a, std::uint32_t b) const {
  return same_key(a.key, shard->key(b).view());
}

}  // namespace floodgate::detail
