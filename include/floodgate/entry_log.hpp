// floodgate/entry_log.hpp — the moving window's log: a ring of (time, count) entries in 16 bytes.
//
// Why not boost::circular_buffer: its 40 bytes made the moving window's state 64 and the memory
// store's record 88, so that most records straddled two cache lines; with this 16-byte ring (the
// buffer's address, then its first slot, its size and the base-2 logarithm of its capacity in one
// word) the state is 40 bytes and a record of one limit 64.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <stdexcept>

#include "floodgate/clock.hpp"

namespace floodgate::moving_window {

/// One log entry: `count` units admitted at `at`.
struct Entry {
  Micros at;
  std::int64_t count;
};

/// A double-ended ring of entries, oldest first. Its capacity is 0 or a power of two;
/// `set_capacity` changes it (to a power of two no less than the size). Copies are deep.
/// Thread-safety: none of its own; whoever holds the state it belongs to guards it (the memory
/// store: the record's lock). Only `set_capacity` (and a copy) allocates, and only it throws.
class EntryLog {
 public:
  /// The most entries a log holds: 2^27 (2 GiB of entries; the memory store refuses a hit that
  /// would grow a log past it, as it refuses one past its bound on all logs, 1 GiB unless raised).
  static constexpr std::size_t kMaxCapacity = std::size_t{1} << 27;

  EntryLog() noexcept = default;
  EntryLog(const EntryLog& other) { copy_from(other, other.capacity()); }
  EntryLog(EntryLog&& other) noexcept : buffer_(other.buffer_), bits_(other.bits_) {
    other.buffer_ = nullptr;
    other.bits_ = 0;
  }
  EntryLog& operator=(const EntryLog& other) {
    if (this != &other) {
      EntryLog copy(other);
      swap(copy);
    }
    return *this;
  }
  EntryLog& operator=(EntryLog&& other) noexcept {
    EntryLog moved(static_cast<EntryLog&&>(other));
    swap(moved);
    return *this;
  }
  ~EntryLog() { delete[] buffer_; }

  [[nodiscard]] bool empty() const noexcept { return size() == 0; }
  [[nodiscard]] std::size_t size() const noexcept { return (bits_ >> kSizeShift) & kCountMask; }
  [[nodiscard]] std::size_t capacity() const noexcept {
    return buffer_ == nullptr ? 0 : std::size_t{1} << (bits_ >> kLog2Shift);
  }
  [[nodiscard]] bool full() const noexcept { return size() == capacity(); }

  Entry& operator[](std::size_t i) noexcept { return slot(i); }
  const Entry& operator[](std::size_t i) const noexcept { return slot(i); }
  Entry& front() noexcept { return slot(0); }
  const Entry& front() const noexcept { return slot(0); }
  Entry& back() noexcept { return slot(size() - 1); }
  const Entry& back() const noexcept { return slot(size() - 1); }

  /// Appends; the caller makes room first (when `full()`: set_capacity).
  void push_back(const Entry& e) noexcept {
    slot(size()) = e;
    bits_ += kOne;
  }
  void pop_front() noexcept { set(head() + 1, size() - 1); }
  /// Removes the i-th entry (from the oldest), moving the newer ones down.
  void erase_at(std::size_t i) noexcept {
    const std::size_t n = size();
    for (std::size_t j = i; j + 1 < n; ++j) slot(j) = slot(j + 1);
    bits_ -= kOne;
  }
  void clear() noexcept { set(0, 0); }
  /// Moves the entries to a buffer of `capacity` (rounded up to a power of two, at least the size);
  /// 0 for an empty log frees the buffer. Throws std::length_error past kMaxCapacity (the log
  /// unchanged), and std::bad_alloc.
  void set_capacity(std::size_t capacity) {
    EntryLog moved;
    moved.copy_from(*this, capacity);
    swap(moved);
  }

  class const_iterator {
   public:
    using iterator_category = std::bidirectional_iterator_tag;
    using value_type = Entry;
    using difference_type = std::ptrdiff_t;
    using pointer = const Entry*;
    using reference = const Entry&;
    const_iterator() noexcept = default;
    const_iterator(const EntryLog* log, std::size_t i) noexcept : log_(log), i_(i) {}
    reference operator*() const noexcept { return (*log_)[i_]; }
    pointer operator->() const noexcept { return &(*log_)[i_]; }
    const_iterator& operator++() noexcept {
      ++i_;
      return *this;
    }
    const_iterator operator++(int) noexcept {
      const_iterator was = *this;
      ++i_;
      return was;
    }
    const_iterator& operator--() noexcept {
      --i_;
      return *this;
    }
    const_iterator operator--(int) noexcept {
      const_iterator was = *this;
      --i_;
      return was;
    }
    bool operator==(const const_iterator& o) const noexcept { return i_ == o.i_; }

   private:
    const EntryLog* log_ = nullptr;
    std::size_t i_ = 0;
  };
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;
  [[nodiscard]] const_iterator begin() const noexcept { return {this, 0}; }
  [[nodiscard]] const_iterator end() const noexcept { return {this, size()}; }
  [[nodiscard]] const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(end()); }
  [[nodiscard]] const_reverse_iterator rend() const noexcept { return const_reverse_iterator(begin()); }

  void swap(EntryLog& o) noexcept {
    Entry* const buffer = buffer_;
    const std::uint64_t bits = bits_;
    buffer_ = o.buffer_;
    bits_ = o.bits_;
    o.buffer_ = buffer;
    o.bits_ = bits;
  }

 private:
  // bits_: the first entry's slot (bits 0-26), the size (bits 27-54: up to 2^27), the base-2
  // logarithm of the capacity (bits 59-63).
  static constexpr unsigned kSizeShift = 27;
  static constexpr unsigned kLog2Shift = 59;
  static constexpr std::uint64_t kOne = std::uint64_t{1} << kSizeShift;
  static constexpr std::uint64_t kHeadMask = (std::uint64_t{1} << kSizeShift) - 1;
  static constexpr std::uint64_t kCountMask = (std::uint64_t{1} << 28) - 1;

  [[nodiscard]] std::size_t head() const noexcept { return bits_ & kHeadMask; }
  [[nodiscard]] Entry& slot(std::size_t i) const noexcept { return buffer_[(head() + i) & (capacity() - 1)]; }
  void set(std::size_t head, std::size_t size) noexcept {
    const std::size_t mask = capacity() == 0 ? 0 : capacity() - 1;
    bits_ = (bits_ & ~((kCountMask << kSizeShift) | kHeadMask)) | (static_cast<std::uint64_t>(size) << kSizeShift) |
            (static_cast<std::uint64_t>(head & mask));
  }
  // This log empty and without a buffer: `from`'s entries into a new buffer of `capacity`.
  void copy_from(const EntryLog& from, std::size_t capacity) {
    const std::size_t n = from.size();
    if (capacity < n) capacity = n;
    if (capacity == 0) return;
    if (capacity > kMaxCapacity) throw std::length_error("a moving window's log holds at most 2^27 entries");
    capacity = std::bit_ceil(capacity);
    auto* b = new Entry[capacity];
    for (std::size_t i = 0; i < n; ++i) b[i] = from[i];
    buffer_ = b;
    bits_ = (static_cast<std::uint64_t>(std::countr_zero(capacity)) << kLog2Shift) |
            (static_cast<std::uint64_t>(n) << kSizeShift);
  }

  Entry* buffer_ = nullptr;
  std::uint64_t bits_ = 0;
};
static_assert(sizeof(EntryLog) == 16);

}  // namespace floodgate::moving_window
