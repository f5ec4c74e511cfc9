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

/// A lock word inside a record: guards one key's state between readers of its shard, and lets a
/// reader that writes nothing decide without it (a sequence lock). Bit 31 is the lock; bits 0–30
/// are the record's own data (the key's length, RecordKey), which only the lock's holder changes
/// (`set_data`); bits 32–63 count the holders: every unlock adds one. A reader that loads the word
/// unlocked, copies the record, and then (after an acquire fence) finds
/// the same word again, read a state that no holder changed meanwhile (it wraps after 2^32 holders
/// between a reader's two loads).
class RecordLock {
 public:
  static constexpr std::uint64_t kBit = std::uint64_t{1} << 31;
  static constexpr std::uint64_t kData = kBit - 1;
  static constexpr std::uint64_t kOneHolder = std::uint64_t{1} << 32;

  [[gnu::always_inline]] static void lock(std::atomic<std::uint64_t>& word) noexcept {
    std::uint64_t expected = word.load(std::memory_order_relaxed) & ~kBit;
    if (word.compare_exchange_strong(expected, expected | kBit, std::memory_order_acquire,
                                     std::memory_order_relaxed)) [[likely]] {
      // A reader that sees a store the holder makes from here also sees the lock (seqlock).
      std::atomic_thread_fence(std::memory_order_release);
      return;
    }
    lock_contended(word);
  }
  [[gnu::noinline]] static void lock_contended(std::atomic<std::uint64_t>& word) noexcept {
    int spins = 0;
    for (;;) {
      std::uint64_t seen = word.load(std::memory_order_relaxed);
      while ((seen & kBit) != 0) {
        backoff(spins);
        seen = word.load(std::memory_order_relaxed);
      }
      if (word.compare_exchange_weak(seen, seen | kBit, std::memory_order_acquire,
                                     std::memory_order_relaxed)) {
        std::atomic_thread_fence(std::memory_order_release);
        return;
      }
    }
  }
  /// Tries the lock once, from the word `seen` unlocked: fails if any holder came in between.
  [[gnu::always_inline]] static bool try_lock_from(std::atomic<std::uint64_t>& word, std::uint64_t seen) noexcept {
    if (!word.compare_exchange_strong(seen, seen | kBit, std::memory_order_acquire, std::memory_order_relaxed)) {
      return false;
    }
    std::atomic_thread_fence(std::memory_order_release);
    return true;
  }
  static void unlock(std::atomic<std::uint64_t>& word) noexcept {
    word.store((word.load(std::memory_order_relaxed) & ~kBit) + kOneHolder, std::memory_order_release);
  }
  /// Replaces the data bits; by the lock's holder only (`data` < kBit).
  static void set_data(std::atomic<std::uint64_t>& word, std::uint32_t data) noexcept {
    const std::uint64_t w = word.load(std::memory_order_relaxed);
    word.store((w & ~kData) | data, std::memory_order_relaxed);
  }
};

/// RAII for RecordLock: a decision returned from under it is built in place (no copy after the
/// unlock).
class RecordGuard {
 public:
  explicit RecordGuard(std::atomic<std::uint64_t>& word) noexcept : word_(word) { RecordLock::lock(word_); }
  ~RecordGuard() { RecordLock::unlock(word_); }
  RecordGuard(const RecordGuard&) = delete;
  RecordGuard& operator=(const RecordGuard&) = delete;

 private:
  std::atomic<std::uint64_t>& word_;
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

/// Whether the readers of a RareWriterLock may enter with plain stores: true when the kernel
/// offers the process-wide barrier (membarrier's private expedited command) that its writers then
/// issue. Decided once per process (locks.cpp).
bool light_readers_now() noexcept;
[[gnu::always_inline]] inline bool light_readers() noexcept {
  static const bool light = light_readers_now();  // inline: a decision's check costs no call
  return light;
}
/// Makes every running thread of the process execute a full memory barrier (membarrier(2)).
void heavy_barrier() noexcept;

/// A big-reader lock: shared mode counts the thread in its own slot's cache line; exclusive mode
/// (rare: adding or removing keys) raises a flag and waits for the readers to drain.
///
/// Shared mode costs one locked instruction: entering must order the slot's increment before the
/// flag's read (an atomic read-modify-write), but a thread that owns its slot leaves with a plain
/// release store, since no other thread writes that slot.
///
/// `kRareWriters` (RareWriterLock) moves that ordering to the writer: a reader that owns its slot
/// enters with a plain store and a compiler barrier, and the writer, after raising its flag, makes
/// every running thread execute a full barrier (heavy_barrier, about 0.3 µs here) before it reads
/// the slots: either the writer then sees the reader's count or the reader sees the flag (the
/// asymmetric Dekker pattern of user-space RCU). For locks whose writers are rare, such as the
/// memory store's directory of tables; where the kernel lacks membarrier both sides fall back to
/// the symmetric protocol.
///
/// Thread-safety: any number of threads. Writers are serialised by a mutex; a writer waits for
/// readers, and readers that arrive while a writer holds the lock wait for it. Shared mode may be
/// taken again by a thread that holds it.
template <bool kRareWriters>
class ReaderLock {
 public:
  void lock_shared() noexcept {
    const unsigned s = ReaderSlot::mine();
    std::atomic<std::uint32_t>& readers = slots_[s].readers;
    const bool light = kRareWriters && s < ReaderSlot::kOwnedSlots && light_readers();
    int spins = 0;
    for (;;) {
      if (light) {
        readers.store(readers.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        std::atomic_signal_fence(std::memory_order_seq_cst);  // the writer's barrier does the rest
        if (!writer_.load(std::memory_order_acquire)) return;
      } else {
        readers.fetch_add(1, std::memory_order_seq_cst);
        if (!writer_.load(std::memory_order_seq_cst)) return;
      }
      unlock_shared();
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
    if (kRareWriters && light_readers()) heavy_barrier();
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

using BigReaderLock = ReaderLock<false>;
using RareWriterLock = ReaderLock<true>;

/// RAII for a ReaderLock's shared mode.
template <class Lock>
class SharedGuard {
 public:
  explicit SharedGuard(Lock& l) noexcept : l_(l) { l_.lock_shared(); }
  ~SharedGuard() { l_.unlock_shared(); }
  SharedGuard(const SharedGuard&) = delete;
  SharedGuard& operator=(const SharedGuard&) = delete;

 private:
  Lock& l_;
};

}  // namespace floodgate::detail
