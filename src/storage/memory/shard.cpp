#include "storage/memory/shard.hpp"

#include <cstring>

namespace floodgate::detail {

Chunk make_chunk(std::size_t bytes) {
  Chunk c(static_cast<std::byte*>(::operator new[](bytes, std::align_val_t{kLine})));
  std::memset(c.get(), 0, bytes);
  return c;
}

std::uint32_t Shard::take_record() {
  if (!free.empty()) {
    const std::uint32_t r = free.back();
    free.pop_back();
    return r;
  }
  const std::uint32_t r = used;
  if ((r >> kChunkBits) >= chunks.size()) chunks.push_back(make_chunk(kChunk * stride));
  if ((r >> 6) >= live.size()) live.push_back(0);
  ++used;
  new (record(r) + key_offset) RecordKey{{RecordKey::kDead}, {}};  // nobody knows it yet
  return r;
}

}  // namespace floodgate::detail
