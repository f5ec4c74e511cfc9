// What an idle service gives back: unused compiled policies, and the allocator's free heap.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "floodgate/clock.hpp"
#include "server/common/prometheus.hpp"

namespace floodgate::server {

/// Run by `serve` on the storage watch's thread after each Storage::maintain (about once a second;
/// never on a decision's thread):
/// - every `sweep_every`, each sweep drops what was not used since its previous run (the compiled
///   inline limits and limit overrides: PolicyCache::drop_unused);
/// - when a sweep dropped something, or the allocator's free heap has grown by `trim_after` bytes
///   or more since the lowest it was seen after the last trim (tables freed by the store, gRPC's
///   buffers...), it gives the free pages back to the system (glibc `malloc_trim(0)`), at most
///   once per `trim_every`. A few small objects left among freed memory pin its pages (a
///   thousand cached policies held 15 MB of a soak's freed tables resident): once they go, the
///   pages can go. Without it, the pages of freed memory stay resident after a flood: glibc only
///   returns the top of each thread's arena by itself.
///
/// A trim locks one allocator arena at a time while it returns that arena's pages, so a thread
/// allocating in it waits at most that long (floodgate_memory_trim_longest_seconds); decisions on
/// the memory store allocate only for a new key or policy.
///
/// Thread-safety: `run` from one thread at a time; the counters may be read from any thread.
class Housekeeping {
 public:
  struct Options {
    /// How often the sweeps run: a compiled policy unused for between one and two of these is
    /// dropped (compiled again if it comes back; its state lives in the storage). Default 5 s.
    Micros sweep_every = 5 * kMicrosPerSecond;
    /// Shortest time between two trims. Default 2 s.
    Micros trim_every = 2 * kMicrosPerSecond;
    /// Growth of the free heap that calls for a trim. Default 1 MiB.
    std::size_t trim_after = std::size_t{1} << 20;
  };
  /// Drops what was not used since its previous run; returns how many things it dropped.
  using Sweep = std::function<std::size_t()>;

  Housekeeping(std::vector<Sweep> sweeps, Options options);
  explicit Housekeeping(std::vector<Sweep> sweeps) : Housekeeping(std::move(sweeps), Options{}) {}

  /// One round at `now` (µs, any monotonic origin).
  void run(Micros now);

  /// Things the sweeps dropped, in all.
  [[nodiscard]] std::uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }
  /// Trims made.
  [[nodiscard]] std::uint64_t trims() const noexcept { return trims_.load(std::memory_order_relaxed); }
  /// The longest trim, in µs.
  [[nodiscard]] Micros longest_trim() const noexcept { return longest_.load(std::memory_order_relaxed); }
  /// floodgate_policies_dropped_total, floodgate_memory_trims_total,
  /// floodgate_memory_trim_longest_seconds.
  void render(PromText& out) const;

  /// Bytes the allocator holds free (glibc: mallinfo2's fordblks; 0 elsewhere, and then no trim).
  [[nodiscard]] static std::size_t free_heap();

 private:
  void trim_if_due(Micros now);

  std::vector<Sweep> sweeps_;
  Options options_;
  Micros next_sweep_ = 0;
  Micros next_trim_ = 0;
  std::size_t lowest_free_ = 0;
  bool seen_ = false;
  bool dropped_since_trim_ = false;
  std::atomic<std::uint64_t> dropped_{0};
  std::atomic<std::uint64_t> trims_{0};
  std::atomic<Micros> longest_{0};
};

}  // namespace floodgate::server
