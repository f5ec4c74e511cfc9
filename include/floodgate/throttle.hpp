// floodgate/throttle.hpp — waiting for a slot instead of failing (client-side throttling).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>

#include <boost/asio/any_io_executor.hpp>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "floodgate/limiter.hpp"

namespace floodgate {

/// The outcome of an acquisition.
struct AcquireResult {
  /// OK when the slot was acquired. Otherwise: DeadlineExceeded (it cannot fit by the deadline —
  /// answered at once, without waiting — or the deadline passed while queued), Cancelled
  /// (`shutdown` or the caller's stop token), InvalidArgument (the cost never fits the policy), or
  /// the storage's error.
  absl::Status status;
  /// How long the call waited, on the limiter's clock (µs).
  Micros waited = 0;
  /// The decision that admitted it (OK only).
  Decision decision;

  [[nodiscard]] bool acquired() const noexcept { return status.ok(); }
};

/// The outcome of a lease's acquisition (Throttle::acquire_lease).
struct LeaseResult {
  /// As AcquireResult::status: OK when a slot was taken (or the storage failed and the policy's
  /// fail mode let the request through: `lease.decision().degraded`, and the lease holds nothing).
  absl::Status status;
  Micros waited = 0;
  /// The lease (holds nothing unless OK and not degraded).
  Lease lease;
  [[nodiscard]] bool acquired() const noexcept { return status.ok(); }
};

/// Waits for a slot: `acquire` blocks until the policy admits the request, `async_acquire`
/// completes a handler. Built on the non-blocking decision: a denied request's `retry_after` says
/// exactly how long to sleep (no polling, no fixed extra sleep), and the deadline is checked before
/// sleeping. Waiters of this Throttle on one key are served in FIFO order (a later caller never
/// overtakes an earlier one). With a shaping policy (leaky bucket `shape`), an admitted request
/// also waits its `delay`, so requests leave at a constant rate. All waiting goes through the
/// limiter's Clock, so a ManualClock runs it on simulated time.
///
/// Across processes (a Redis storage) callers share the limit exactly; FIFO order holds within
/// one process.
///
/// Thread-safety: every method may be called from any thread. `shutdown` (and the destructor)
/// wake every waiter promptly with Cancelled.
class Throttle {
 public:
  explicit Throttle(std::shared_ptr<Limiter> limiter);
  ~Throttle();
  Throttle(const Throttle&) = delete;
  Throttle& operator=(const Throttle&) = delete;

  /// Blocks until `cost` units for `key` are admitted, or `timeout` (µs, ≥ 0) has passed, or
  /// `stop` is requested. When the slot cannot come before the deadline it returns at once (not
  /// acquired), without waiting for the deadline.
  AcquireResult acquire(const Policy& policy, std::string_view key, std::int64_t cost,
                        Micros timeout, std::stop_token stop = {});

  /// Waits for a lease of a concurrency policy ("20 concurrent"), FIFO among this Throttle's
  /// waiters on the key, until `timeout` (µs) has passed or `stop` is requested. A slot frees
  /// when a holder releases it, which no decision foresees: a denied attempt polls again after
  /// 1 ms, doubling to 16 ms, each wait jittered down to half (waiters of several processes
  /// spread out), and never later than the oldest lease's end: no release wakes a waiter, so a
  /// slot freed meanwhile reaches it up to about 16 ms later (about 6 ms at the median; docs/
  /// benchmarks.md, "A freed slot's way to a waiter"). Unlike `acquire`, it waits up to
  /// the deadline even when `retry_after` is later (a release may come first). Errors as
  /// `acquire`; InvalidArgument for a policy that is not a concurrency policy.
  LeaseResult acquire_lease(const Policy& policy, std::string_view key, std::int64_t cost, Micros timeout,
                            std::stop_token stop = {});

  /// The asynchronous form: never blocks the calling thread; `handler` runs on `executor` with
  /// the result. Waits use the executor's timers on the system clock (use the blocking form for
  /// simulated time). `policy` must outlive the operation.
  void async_acquire(boost::asio::any_io_executor executor, const Policy& policy, std::string key,
                     std::int64_t cost, Micros timeout, std::function<void(AcquireResult)> handler);

  /// Wakes every waiter with Cancelled; later calls are Cancelled at once.
  void shutdown();

  [[nodiscard]] Limiter& limiter() const noexcept { return *limiter_; }

  struct Waiter;  // implementation detail

 private:
  struct Queue;
  friend struct AsyncAcquire;

  std::shared_ptr<Waiter> enqueue(const Policy& policy, std::string_view key);
  bool is_head(const Waiter& w) const;      // requires mu_
  void remove(const std::shared_ptr<Waiter>& w);  // requires mu_; wakes the next one
  struct Attempt {
    enum Kind : std::uint8_t { kAdmitted, kFinished, kRetry } kind;
    absl::Status status;    // kFinished: why
    Decision decision;      // kAdmitted
    Micros wait_until = 0;  // kRetry: when to try again
    static Attempt finished(absl::Status s) { return Attempt{kFinished, std::move(s), Decision{}, 0}; }
  };
  Attempt attempt(const Policy& policy, std::string_view key, std::int64_t cost, Micros deadline);
  Attempt attempt_lease(const Policy& policy, std::string_view key, std::int64_t cost, Micros deadline, int tries,
                        Lease& out);
  // acquire's loop; with `lease`, it waits for a lease into it (acquire_lease).
  AcquireResult wait(const Policy& policy, std::string_view key, std::int64_t cost, Micros timeout,
                     std::stop_token stop, Lease* lease);
  absl::Status leave_at_rate(const Decision& d, Micros deadline, std::stop_token stop);

  std::shared_ptr<Limiter> limiter_;
  mutable std::mutex mu_;
  bool shutdown_ = false;                                            // guarded by mu_
  absl::flat_hash_map<std::string, std::unique_ptr<Queue>> queues_;  // guarded by mu_
};

}  // namespace floodgate
