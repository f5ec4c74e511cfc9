#include "storage/memory/locks.hpp"

#include <linux/membarrier.h>
#include <cstdlib>
#include <sys/syscall.h>
#include <unistd.h>

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

bool light_readers_now() noexcept {
  // Registration is needed once before the private expedited command; a kernel without it (or a
  // seccomp filter that refuses it) leaves the readers on the symmetric protocol.
  static const bool registered = [] {
    const long supported = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    return supported > 0 && (supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 &&
           syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
  }();
  return registered;
}

void heavy_barrier() noexcept {
  if (syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0) {
    // Registered, so this cannot fail short of memory corruption: stop rather than skip the
    // barrier that the readers' correctness rests on.
    std::abort();
  }
}

}  // namespace floodgate::detail
