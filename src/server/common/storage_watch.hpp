// Watches whether the storage's servers answer, so that the service can start before its store
// and report readiness from it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "floodgate/storage.hpp"

namespace floodgate::server {

/// Probes a storage (Storage::probe) on a thread of its own: every `up_interval` while it answers,
/// and while it does not with a backoff from `min_backoff` doubling to `max_backoff`. Reports
/// every probe's outcome to `report` (on the watch thread). Decisions never wait for it: they fail
/// by their policy's fail mode until the storage answers, and reconnect on their own. After each
/// probe it calls Storage::maintain (the memory store frees idle tables even when no decision
/// comes), then `Options::after_maintain`.
///
/// Thread-safety: construct and destroy from one thread; `report` runs on the watch thread.
class StorageWatch {
 public:
  struct Options {
    std::chrono::milliseconds up_interval{1000};
    std::chrono::milliseconds min_backoff{100};
    std::chrono::milliseconds max_backoff{1000};
    /// Called after each Storage::maintain, on the watch thread, with the time (µs since the
    /// epoch): serve's Housekeeping. None by default.
    std::function<void(Micros now)> after_maintain;
  };
  /// `up`: whether this probe succeeded; `error`: its failure (OK when up).
  using Report = std::function<void(bool up, const absl::Status& error)>;

  StorageWatch(std::shared_ptr<Storage> storage, Report report, Options options);
  StorageWatch(std::shared_ptr<Storage> storage, Report report) : StorageWatch(std::move(storage), std::move(report), Options{}) {}
  /// Stops the thread (waits for a probe in flight, at most the storage's command timeout).
  ~StorageWatch();
  StorageWatch(const StorageWatch&) = delete;
  StorageWatch& operator=(const StorageWatch&) = delete;

 private:
  void run();

  std::shared_ptr<Storage> storage_;
  Report report_;
  Options options_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace floodgate::server
