// The two locks of the in-memory store. Both spin briefly, then yield the CPU; neither sleeps on
// a kernel object on the fast path.
//
// Why not std::mutex / std::shared_mutex per shard: every decision then writes the shard's lock
// word, and when two threads work on different keys of the same shard that cache line moves
// between cores on about every other decision (measured: 2 threads gave 1.4× one thread). Here a
// decision writes only its own thread's reader slot and its own record's lock word, so threads on
// different keys share no written cache line.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>

namespace floodgate::detail {

/// Spins with a CPU hint, then yields: a waiter whose holder was preempted lets it run.
inline void backoff(int& spins) noexcept {
  if (++spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  } else {
    std::this_thread::yield();
  }
}

/// A lock word inside a record: guards one key's state between readers of its shard.
class RecordLock {
 public:
  static void lock(std::atomic<std::uint32_t>& word) noexcept {
    int spins = 0;
    for (;;) {
      std::uint32_t expected = 0;
      if (word.compare_exchange_weak(expected, 1, std::memory_order_acquire,
                                     std::memory_order_relaxed)) {
        return;
      }
      while (word.load(std::memory_order_relaxed) != 0) backoff(spins);
    }
  }
  static void unlock(std::atomic<std::uint32_t>& word) noexcept {
    word.store(0, std::memory_order_release);
  }
};

/// The reader slot of the calling thread: each of the first kOwnedSlots threads alive at once owns
/// one (given back when the thread exits), so it alone writes that slot of every BigReaderLock;
/// threads beyond them share slot kOwnedSlots. Defined in locks.cpp.
struct ReaderSlot {
  static constexpr unsigned kOwnedSlots = 8;
  static constexpr unsigned kUnset = ~0u;
  static inline thread_local unsigned current = kUnset;
  static unsigned mine() noexcept {
    const unsigned s = current;
    return s != kUnset ? s : take();
  }
  static unsigned take() noexcept;  // the first call of a thread: picks its slot
};

/// A big-reader lock: shared mode counts the thread in its own slot's cache line; exclusive mode
/// (rare: adding or removing keys) raises a flag and waits for the readers to drain.
///
/// Shared mode costs one locked instruction: entering must order the slot's increment before the
/// flag's read (an atomic read-modify-write), but a thread that owns its slot leaves with a plain
/// release store, since no other thread writes that slot.
///
/// Thread-safety: any number of threads. Writers are serialised by a mutex; a writer waits for
/// readers, and readers that arrive while a writer holds the lock wait for it. Shared mode may be
/// taken again by a thread that holds it.
class BigReaderLock {
 public:
  void lock_shared() noexcept {
    Slot& slot = slots_[ReaderSlot::mine()];
    int spins = 0;
    for (;;) {
      slot.readers.fetch_add(1, std::memory_order_seq_cst);
      if (!writer_.load(std::memory_order_seq_cst)) return;
      slot.readers.fetch_sub(1, std::memory_order_seq_cst);
      while (writer_.load(std::memory_order_acquire)) backoff(spins);
    }
  }
  void unlock_shared() noexcept {
    const unsigned s = ReaderSlot::mine();
    std::atomic<std::uint32_t>& readers = slots_[s].readers;
    if (s < ReaderSlot::kOwnedSlots) {
      readers.store(readers.load(std::memory_order_relaxed) - 1, std::memory_order_release);
    } else {
      readers.fetch_sub(1, std::memory_order_release);
    }
  }

  void lock() {
    writers_.lock();
    writer_.store(true, std::memory_order_seq_cst);
    for (Slot& slot : slots_) {
      int spins = 0;
      while (slot.readers.load(std::memory_order_seq_cst) != 0) backoff(spins);
    }
  }
  void unlock() {
    writer_.store(false, std::memory_order_release);
    writers_.unlock();
  }

 private:
  struct alignas(64) Slot {
    std::atomic<std::uint32_t> readers{0};
  };

  std::mutex writers_;
  alignas(64) std::atomic<bool> writer_{false};
  Slot slots_[ReaderSlot::kOwnedSlots + 1];
};

/// RAII for BigReaderLock's shared mode.
class SharedGuard {
 public:
  explicit SharedGuard(BigReaderLock& l) noexcept : l_(l) { l_.lock_shared(); }
  ~SharedGuard() { l_.unlock_shared(); }
  SharedGuard(const SharedGuard&) = delete;
  SharedGuard& operator=(const SharedGuard&) = delete;

 private:
  BigReaderLock& l_;
};

}  // namespace floodgate::detail
