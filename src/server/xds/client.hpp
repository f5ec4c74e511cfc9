// The xDS client of rate-limit rules: one ADS stream to the control plane, kept open.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "server/common/prometheus.hpp"
#include "server/config/config.hpp"
#include "server/xds/sotw.hpp"

namespace grpc {
class Channel;
class ClientContext;
}  // namespace grpc

namespace floodgate::server {

/// Subscribes to the RateLimitConfig resources of the control plane `settings.server` on one
/// StreamAggregatedResources stream (XdsSotw says what is sent), on a thread of its own. Each
/// response goes to `apply` (which checks the whole set and publishes it, or refuses it) and is
/// then ACKed or NACKed. While the control plane cannot be reached a connection is tried every
/// `connect_retry`; a stream that ends or fails is opened again after xds_backoff (growing while
/// streams bring nothing, jittered). The rules in force keep serving meanwhile.
///
/// Sends the node id and metadata on every request, `headers` as the stream's metadata; TLS with
/// the CA, client certificate and server name of the settings; accepts responses up to
/// `max_message_bytes`.
///
/// Thread-safety: `start` and `stop` from one controlling thread; the rest from any thread.
class XdsClient {
 public:
  XdsClient(XdsSettings settings, XdsSotw::Apply apply);
  ~XdsClient();  ///< stops

  /// Reads the TLS files and starts the stream's thread. Errors: InvalidArgument naming the
  /// setting and the file that cannot be read.
  absl::Status start();
  /// Ends the stream and joins the thread (a NACK or ACK being sent is finished first).
  void stop();

  /// Waits up to `timeout` for the first set of rules applied; true once there is one.
  bool wait_for_rules(std::chrono::milliseconds timeout);
  /// A set of rules has been applied (ready to serve).
  [[nodiscard]] bool has_rules() const noexcept { return applied_.load(std::memory_order_acquire) > 0; }

  /// How many of rls.overlays matched no rule of the rules in force (floodgate_xds_overlays_unmatched).
  void set_overlays_unmatched(std::uint64_t n) noexcept { overlays_unmatched_.store(n, std::memory_order_relaxed); }

  /// floodgate_xds_* families: updates applied and refused, streams opened, connected now,
  /// overlays that match nothing.
  void render(PromText& out) const;

 private:
  void run();
  bool wait_connected();
  bool sleep_for(std::chrono::milliseconds d);

  XdsSettings settings_;
  XdsSotw::Apply apply_;
  std::shared_ptr<grpc::Channel> channel_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;                  // guarded by mu_
  grpc::ClientContext* context_ = nullptr;  // guarded by mu_: the open stream's, for TryCancel
  std::atomic<std::uint64_t> applied_{0};
  std::atomic<std::uint64_t> refused_{0};
  std::atomic<std::uint64_t> streams_{0};
  std::atomic<bool> connected_{false};
  std::atomic<std::uint64_t> overlays_unmatched_{0};
};

}  // namespace floodgate::server
