// A thread that maintains the storage and probes a networked one.
#include "server/common/storage_watch.hpp"

#include <algorithm>

#include "floodgate/clock.hpp"

namespace floodgate::server {

StorageWatch::StorageWatch(std::shared_ptr<Storage> storage, Report report, Options options)
    : storage_(std::move(storage)), report_(std::move(report)), options_(options) {
  thread_ = std::thread([this] { run(); });
}

StorageWatch::~StorageWatch() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void StorageWatch::run() {
  std::chrono::milliseconds backoff = options_.min_backoff;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    const absl::Status s = storage_->probe();
    report_(s.ok(), s);
    const Micros now = SystemClock::instance()->now();
    storage_->maintain(now);
    if (options_.after_maintain) options_.after_maintain(now);
    lock.lock();
    std::chrono::milliseconds wait = options_.up_interval;
    if (s.ok()) {
      backoff = options_.min_backoff;
    } else {
      wait = backoff;
      backoff = std::min(backoff * 2, options_.max_backoff);
    }
    cv_.wait_for(lock, wait, [this] { return stop_; });
  }
}

}  // namespace floodgate::server
