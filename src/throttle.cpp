#include "floodgate/throttle.hpp"

#include <deque>
#include <random>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <fmt/format.h>

namespace floodgate {

// One caller waiting on a key. `wake` interrupts its current wait: for a blocking caller it stops
// the stop_source of its current Clock::wait_until; for an asynchronous one it posts a retry.
struct Throttle::Waiter {
  std::string queue_key;
  std::function<void()> wake;  // guarded by Throttle::mu_
};

struct Throttle::Queue {
  std::deque<std::shared_ptr<Waiter>> waiters;  // FIFO; front is the one that may try
};

namespace {
std::string queue_key(const Policy& policy, std::string_view key) {
  std::string k = policy.fingerprint();
  k += '\0';
  k.append(key.data(), key.size());
  return k;
}
}  // namespace

Throttle::Throttle(std::shared_ptr<Limiter> limiter) : limiter_(std::move(limiter)) {}

Throttle::~Throttle() { shutdown(); }

std::shared_ptr<Throttle::Waiter> Throttle::enqueue(const Policy& policy, std::string_view key) {
  auto w = std::make_shared<Waiter>();
  w->queue_key = queue_key(policy, key);
  auto& q = queues_[w->queue_key];
  if (!q) q = std::make_unique<Queue>();
  q->waiters.push_back(w);
  return w;
}

bool Throttle::is_head(const Waiter& w) const {
  const auto it = queues_.find(w.queue_key);
  return it != queues_.end() && !it->second->waiters.empty() && it->second->waiters.front().get() == &w;
}

void Throttle::remove(const std::shared_ptr<Waiter>& w) {
  const auto it = queues_.find(w->queue_key);
  if (it == queues_.end()) return;
  auto& waiters = it->second->waiters;
  const bool was_head = !waiters.empty() && waiters.front() == w;
  for (auto i = waiters.begin(); i != waiters.end(); ++i) {
    if (*i == w) {
      waiters.erase(i);
      break;
    }
  }
  if (waiters.empty()) {
    queues_.erase(it);
  } else if (was_head && waiters.front()->wake) {
    waiters.front()->wake();  // the next in line may try now
  }
}

void Throttle::shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  shutdown_ = true;
  for (auto& [k, q] : queues_) {
    for (auto& w : q->waiters) {
      if (w->wake) w->wake();
    }
  }
}

// One try of the head of the line, without mu_: admitted, finished (an error or a slot after the
// deadline), or the time to retry at.
// A lease (a concurrency policy): a slot frees when another holder releases it, which no
// decision can foresee, so a denied acquisition polls — after 1 ms, then twice as long each time up
// to 16 ms, each wait jittered down to half so that waiters of several processes spread out — and
// never longer than `retry_after` (the oldest lease's end).
Throttle::Attempt Throttle::attempt_lease(const Policy& policy, std::string_view key, std::int64_t cost,
                                          Micros deadline, int tries, Lease& out) {
  const Clock& clock = limiter_->clock();
  auto l = limiter_->acquire(policy, key, cost);
  if (!l.ok()) return Attempt::finished(l.status());
  if (l->decision().allowed) {  // held; or the storage failed and the fail mode let it through
    const Decision d = l->decision();
    out = *std::move(l);
    return Attempt{Attempt::kAdmitted, absl::OkStatus(), d, 0};
  }
  if (!l->decision().can_retry()) {
    return Attempt::finished(absl::InvalidArgumentError(fmt::format(
        "a lease of {} slots never fits policy \"{}\"", cost, policy.name())));
  }
  const Micros now = clock.now();
  if (now >= deadline) {
    return Attempt::finished(absl::DeadlineExceededError("no slot was released before the deadline"));
  }
  thread_local std::minstd_rand jitter{std::random_device{}()};
  const Micros backoff = Micros{1000} << std::min(tries, 4);
  const Micros poll = backoff / 2 + static_cast<Micros>(jitter() % static_cast<std::uint32_t>(backoff / 2 + 1));
  return Attempt{Attempt::kRetry, absl::OkStatus(), Decision{},
                 std::min(deadline, now + std::min(poll, l->decision().retry_after))};
}

Throttle::Attempt Throttle::attempt(const Policy& policy, std::string_view key, std::int64_t cost,
                                    Micros deadline) {
  const Clock& clock = limiter_->clock();
  if (policy.strategy() == Strategy::kConcurrency) {
    return Attempt::finished(absl::InvalidArgumentError(fmt::format(
        "policy \"{}\" limits requests in progress: wait for a lease with acquire_lease", policy.name())));
  }
  if (policy.shape()) {
    // A shaper admits at once and says how long to wait: check that against the deadline before
    // consuming (a concurrent process may still lengthen it between test and hit).
    auto peek = limiter_->test(policy, key, cost);
    if (peek.ok() && peek->allowed && peek->delay > deadline - clock.now()) {
      return Attempt::finished(absl::DeadlineExceededError(fmt::format(
                                      "the slot comes in {} s, after the deadline", format_seconds(peek->delay))));
    }
  }
  auto d = limiter_->hit(policy, key, cost);
  if (!d.ok()) return Attempt::finished(d.status());
  if (d->allowed) return Attempt{Attempt::kAdmitted, absl::OkStatus(), *d, 0};
  if (!d->can_retry()) {
    return Attempt::finished(absl::InvalidArgumentError(fmt::format(
                                    "a cost of {} never fits policy \"{}\"", cost, policy.name())));
  }
  const Micros now = clock.now();
  if (d->retry_after > deadline - now) {
    return Attempt::finished(absl::DeadlineExceededError(fmt::format("the slot comes in {} s, after the deadline ({} s left)",
                                                    format_seconds(d->retry_after), format_seconds(std::max<Micros>(0, deadline - now)))));
  }
  return Attempt{Attempt::kRetry, absl::OkStatus(), Decision{}, now + d->retry_after};
}

// An admitted shaper's request waits its delay, so requests leave at the constant rate.
absl::Status Throttle::leave_at_rate(const Decision& d, Micros deadline, std::stop_token stop) {
  const Clock& clock = limiter_->clock();
  if (d.delay <= 0) return absl::OkStatus();
  if (d.delay > deadline - clock.now()) {
    return absl::DeadlineExceededError(
        fmt::format("the slot comes in {} s, after the deadline (it was taken meanwhile)", format_seconds(d.delay)));
  }
  if (!clock.wait_until(clock.now() + d.delay, stop)) {
    return absl::CancelledError("cancelled while waiting for the shaper's delay");
  }
  return absl::OkStatus();
}

AcquireResult Throttle::acquire(const Policy& policy, std::string_view key, std::int64_t cost,
                                Micros timeout, std::stop_token stop) {
  return wait(policy, key, cost, timeout, std::move(stop), nullptr);
}

LeaseResult Throttle::acquire_lease(const Policy& policy, std::string_view key, std::int64_t cost, Micros timeout,
                                    std::stop_token stop) {
  LeaseResult out;
  if (policy.strategy() != Strategy::kConcurrency) {
    out.status = absl::InvalidArgumentError(fmt::format(
        "policy \"{}\" is {}: leases are taken of a concurrency policy", policy.name(), to_string(policy.strategy())));
    return out;
  }
  AcquireResult r = wait(policy, key, cost, timeout, std::move(stop), &out.lease);
  out.status = std::move(r.status);
  out.waited = r.waited;
  return out;
}

AcquireResult Throttle::wait(const Policy& policy, std::string_view key, std::int64_t cost, Micros timeout,
                             std::stop_token stop, Lease* lease) {
  const Clock& clock = limiter_->clock();
  const Micros start = clock.now();
  const Micros deadline = timeout >= kNever - start ? kNever : start + std::max<Micros>(0, timeout);
  AcquireResult result;
  auto finish = [&](absl::Status s) {
    result.status = std::move(s);
    result.waited = clock.now() - start;
    return result;
  };

  std::unique_lock<std::mutex> lock(mu_);
  if (shutdown_) return finish(absl::CancelledError("the throttle is shut down"));
  const std::shared_ptr<Waiter> me = enqueue(policy, key);
  for (int tries = 0;; ++tries) {
    if (shutdown_ || stop.stop_requested()) {
      remove(me);
      return finish(absl::CancelledError(shutdown_ ? "the throttle is shut down" : "cancelled"));
    }
    Micros wait_until = deadline;  // not at the head: wait for the turn, at most until the deadline
    if (is_head(*me)) {
      lock.unlock();  // the decision may go over the network
      Attempt a = lease != nullptr ? attempt_lease(policy, key, cost, deadline, tries, *lease)
                                   : attempt(policy, key, cost, deadline);
      lock.lock();
      if (a.kind != Attempt::kRetry) {
        remove(me);  // the next in line may go on while this one waits its delay
        lock.unlock();
        if (a.kind == Attempt::kFinished) return finish(std::move(a.status));
        result.decision = a.decision;
        return finish(leave_at_rate(a.decision, deadline, stop));
      }
      wait_until = a.wait_until;
    } else if (clock.now() >= deadline) {
      remove(me);
      return finish(absl::DeadlineExceededError("the deadline passed while waiting in line"));
    }
    // Sleep until `wait_until`, or until woken (turn change, shutdown) or stopped by the caller.
    std::stop_source wake;
    me->wake = [wake]() mutable { wake.request_stop(); };
    std::stop_callback on_stop(stop, [wake]() mutable { wake.request_stop(); });
    lock.unlock();
    clock.wait_until(wait_until, wake.get_token());
    lock.lock();
    me->wake = nullptr;
  }
}

// ---- the asynchronous form: the same queue, timers instead of a blocked thread ---------------
struct AsyncAcquire : std::enable_shared_from_this<AsyncAcquire> {
  Throttle* throttle;
  boost::asio::any_io_executor executor;
  const Policy* policy;
  std::string key;
  std::int64_t cost;
  Micros start;
  Micros deadline;
  std::function<void(AcquireResult)> handler;
  std::shared_ptr<Throttle::Waiter> me;
  boost::asio::steady_timer timer;
  bool done = false;

  AsyncAcquire(Throttle* t, boost::asio::any_io_executor ex)
      : throttle(t), executor(ex), timer(ex) {}

  void complete(absl::Status s, Decision d = {}) {  // requires throttle->mu_
    if (done) return;
    done = true;
    throttle->remove(me);
    AcquireResult r;
    r.status = std::move(s);
    r.decision = d;
    r.waited = throttle->limiter().clock().now() - start;
    boost::asio::post(executor, [h = std::move(handler), r]() { h(r); });
  }

  // Runs on the executor: one step of the same loop as Throttle::acquire.
  void step() {
    std::unique_lock<std::mutex> lock(throttle->mu_);
    if (done) return;
    if (throttle->shutdown_) return complete(absl::CancelledError("the throttle is shut down"));
    const Clock& clock = throttle->limiter().clock();
    Micros wait_until = deadline;
    if (throttle->is_head(*me)) {
      lock.unlock();
      auto d = throttle->limiter().hit(*policy, key, cost);
      lock.lock();
      if (done) return;
      if (!d.ok()) return complete(d.status());
      if (d->allowed) {
        if (d->delay > 0) {  // shaper: complete after the delay, off the queue already
          throttle->remove(me);
          me = std::make_shared<Throttle::Waiter>();  // a detached waiter: nothing to wake
          timer.expires_after(std::chrono::microseconds(d->delay));
          timer.async_wait([self = shared_from_this(), dd = *d](boost::system::error_code) {
            std::lock_guard<std::mutex> l(self->throttle->mu_);
            self->complete(absl::OkStatus(), dd);
          });
          return;
        }
        return complete(absl::OkStatus(), *d);
      }
      if (!d->can_retry()) {
        return complete(absl::InvalidArgumentError(
            fmt::format("a cost of {} never fits policy \"{}\"", cost, policy->name())));
      }
      const Micros now = clock.now();
      if (d->retry_after > deadline - now) {
        return complete(absl::DeadlineExceededError(
            fmt::format("the slot comes in {} s, after the deadline", format_seconds(d->retry_after))));
      }
      wait_until = now + d->retry_after;
    } else if (clock.now() >= deadline) {
      return complete(absl::DeadlineExceededError("the deadline passed while waiting in line"));
    }
    const Micros delay = std::max<Micros>(0, wait_until - clock.now());
    timer.expires_after(std::chrono::microseconds(std::min<Micros>(delay, Micros{1} << 40)));
    timer.async_wait([self = shared_from_this()](boost::system::error_code) { self->step(); });
  }
};

void Throttle::async_acquire(boost::asio::any_io_executor executor, const Policy& policy,
                             std::string key, std::int64_t cost, Micros timeout,
                             std::function<void(AcquireResult)> handler) {
  if (policy.strategy() == Strategy::kConcurrency) {
    AcquireResult r;
    r.status = absl::InvalidArgumentError(fmt::format(
        "policy \"{}\" limits requests in progress: wait for a lease with acquire_lease", policy.name()));
    boost::asio::post(executor, [h = std::move(handler), r]() { h(r); });
    return;
  }
  auto op = std::make_shared<AsyncAcquire>(this, executor);
  op->policy = &policy;
  op->key = std::move(key);
  op->cost = cost;
  op->start = limiter_->clock().now();
  op->deadline = timeout >= kNever - op->start ? kNever : op->start + std::max<Micros>(0, timeout);
  op->handler = std::move(handler);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutdown_) {
      AcquireResult r;
      r.status = absl::CancelledError("the throttle is shut down");
      boost::asio::post(executor, [h = std::move(op->handler), r]() { h(r); });
      return;
    }
    op->me = enqueue(policy, op->key);
    // Woken (turn change, shutdown): cancel the timer so the step runs now.
    op->me->wake = [weak = std::weak_ptr<AsyncAcquire>(op)] {
      if (auto self = weak.lock()) {
        boost::asio::post(self->executor, [self] { self->timer.cancel(); });
      }
    };
  }
  boost::asio::post(executor, [op] { op->step(); });
}

}  // namespace floodgate
