// The one request coalescer of the service, shared by HTTP and gRPC: requests that need a
// networked storage are handed to storage threads, which decide everything handed over since
// their last call with one storage round trip.
#pragma once

#include <condition_variable>
#include <functional>
#include <iterator>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace floodgate::server {

/// `submit` queues jobs from any thread; each of `threads` storage threads takes every queued job
/// at once and calls `decide` with them (one batch), so under load a thread goes from batch to
/// batch without sleeping, and a wake-up is paid only when it was idle. While one thread waits
/// for the storage, another gathers the next batch. `decide` answers its jobs itself (e.g. posts
/// the responses back to their I/O threads).
///
/// Thread-safety: `submit` from any thread. The destructor decides what is still queued, then
/// joins the threads.
template <class Job>
class Coalescer {
 public:
  using Decide = std::function<void(std::vector<Job>&)>;

  Coalescer(unsigned threads, Decide decide) : decide_(std::move(decide)) {
    for (unsigned i = 0; i < (threads == 0 ? 1 : threads); ++i) threads_.emplace_back([this] { run(); });
  }
  ~Coalescer() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  Coalescer(const Coalescer&) = delete;
  Coalescer& operator=(const Coalescer&) = delete;

  void submit(Job job) {
    bool wake = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(job));
      wake = idle_ > 0;
    }
    if (wake) cv_.notify_one();
  }

  /// Queues all of `jobs` (left empty) with one lock.
  void submit(std::vector<Job>& jobs) {
    if (jobs.empty()) return;
    bool wake = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.empty()) {
        queue_.swap(jobs);
      } else {
        queue_.insert(queue_.end(), std::make_move_iterator(jobs.begin()), std::make_move_iterator(jobs.end()));
      }
      wake = idle_ > 0;
    }
    jobs.clear();
    if (wake) cv_.notify_one();
  }

 private:
  void run() {
    std::vector<Job> batch;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        ++idle_;
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        --idle_;
        if (queue_.empty()) return;  // stopping, and every job was decided
        batch.swap(queue_);
      }
      decide_(batch);
      batch.clear();
    }
  }

  Decide decide_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Job> queue_;  // guarded by mu_
  int idle_ = 0;            // guarded by mu_: threads waiting on cv_
  bool stop_ = false;       // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace floodgate::server
