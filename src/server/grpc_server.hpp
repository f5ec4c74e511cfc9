// The gRPC front of the rate-limit service: envoy.service.ratelimit.v3.RateLimitService.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "server/rls.hpp"

namespace grpc {
class Server;
}

namespace floodgate::server {

/// Serves ShouldRateLimit with gRPC's callback API: a call is decided on the gRPC thread that
/// read it and finished there, with no thread per call or per connection. With the memory store
/// a decision takes microseconds; with Redis the deciding thread waits one round trip (a call's
/// descriptors go in one pipelined batch), and gRPC's callback executor adds threads while
/// calls wait (docs/envoy.md).
///
/// Thread-safety: `start` and `shutdown` are called by one controlling thread.
class GrpcServer {
 public:
  GrpcServer(RlsService& rls, std::string host, std::uint16_t port);
  ~GrpcServer();

  /// Binds and starts serving. Errors: Unavailable naming the address.
  absl::Status start();
  /// The bound port (useful when the configured port was 0).
  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
  /// Stops accepting calls; calls in flight get until `deadline` to finish.
  void shutdown(std::chrono::milliseconds deadline);

  class Handler;  // the generated service's implementation (grpc_server.cpp)

 private:
  RlsService& rls_;
  std::string host_;
  std::uint16_t port_;
  std::unique_ptr<Handler> handler_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace floodgate::server
