#include "storage/memory/locks.hpp"

namespace floodgate::detail {

namespace {

std::atomic<std::uint32_t> g_owned{0};  // bit i: slot i is owned by a live thread

// Gives the thread's slot back when the thread exits.
struct Owner {
  unsigned slot = ReaderSlot::kOwnedSlots;
  ~Owner() {
    if (slot < ReaderSlot::kOwnedSlots) g_owned.fetch_and(~(std::uint32_t{1} << slot), std::memory_order_acq_rel);
    ReaderSlot::current = ReaderSlot::kOwnedSlots;  // any later use in this thread shares
  }
};

}  // namespace

unsigned ReaderSlot::take() noexcept {
  thread_local Owner owner;
  std::uint32_t taken = g_owned.load(std::memory_order_relaxed);
  for (;;) {
    unsigned free = 0;
    while (free < kOwnedSlots && ((taken >> free) & 1u) != 0) ++free;
    if (free == kOwnedSlots) break;  // all owned: share the last slot
    if (g_owned.compare_exchange_weak(taken, taken | (std::uint32_t{1} << free), std::memory_order_acq_rel)) {
      owner.slot = free;
      break;
    }
  }
  current = owner.slot;
  return current;
}

}  // namespace floodgate::detail
