// The gRPC front of the rate-limit service: envoy.service.ratelimit.v3.RateLimitService.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/rls/service.hpp"

namespace grpc {
class Server;
class Service;
class HealthCheckServiceInterface;
}  // namespace grpc

namespace floodgate::server {

class GrpcInlineService;
class TlsState;

/// Serves ShouldRateLimit with no thread per call or per connection. With the memory store a call
/// is decided on the one thread that polls gRPC's completion queue and read it (microseconds;
/// grpc/inline.hpp); with a networked storage (RlsSettings::batching) gRPC's callback API matches it
/// and hands it to the service's storage threads, which decide concurrent calls in one batch (one
/// Redis round trip) and finish them, so no gRPC thread waits for Redis (docs/envoy.md).
///
/// With a TlsState it speaks TLS only (and asks for a client certificate, verified against the
/// client CA, when one is configured); its certificate provider re-reads the state's private
/// copies each second, so a reload reaches new connections within a second.
///
/// Thread-safety: `start` and `shutdown` are called by one controlling thread.
class GrpcServer {
 public:
  /// `tls`: null for plain text; else it outlives the server.
  GrpcServer(RlsService& rls, std::string host, std::uint16_t port, const TlsState* tls = nullptr);
  ~GrpcServer();

  /// Serves `service` too on this listener (e.g. the Rate Limit Quota Service). Before `start`;
  /// the service outlives the server.
  void add_service(grpc::Service* service) { extra_.push_back(service); }
  /// Binds and starts serving. Errors: Unavailable naming the address.
  absl::Status start();
  /// The bound port (useful when the configured port was 0).
  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
  /// Stops accepting calls; calls in flight get until `deadline` to finish.
  void shutdown(std::chrono::milliseconds deadline);
  /// What the health service reports while serving: SERVING when `ready` (the default), else
  /// NOT_SERVING (e.g. until the first rules have come over xDS). Any thread, before or after
  /// `start`; from `shutdown` on it stays NOT_SERVING.
  void set_ready(bool ready);

  class Handler;  // the generated service's implementation (grpc/server.cpp)

 private:
  RlsService& rls_;
  std::string host_;
  std::uint16_t port_;
  const TlsState* tls_;
  std::unique_ptr<Handler> handler_;        // with batching
  std::unique_ptr<GrpcInlineService> inline_;  // without
  std::vector<grpc::Service*> extra_;
  std::unique_ptr<grpc::Server> server_;
  std::mutex health_mu_;  // orders the health service's updates (start, set_ready, shutdown)
  bool ready_ = true;     // guarded by health_mu_
  bool serving_ = false;  // guarded by health_mu_: started and not shut down
  grpc::HealthCheckServiceInterface* health_ = nullptr;  // guarded by health_mu_; null when not serving
  void report_health();   // with health_mu_ held
};

}  // namespace floodgate::server
