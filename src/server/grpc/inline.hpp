// ShouldRateLimit on a completion queue of its own, decided on the thread that reads it: the
// gRPC front for a storage that decides in microseconds (the memory store).
#pragma once

#include <memory>
#include <mutex>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "server/rls/service.hpp"

namespace floodgate::server {

/// Parses a request from the received bytes, in place when they are one slice (the usual case).
/// False: malformed bytes, or a string field that is not valid UTF-8.
bool rls_parse(const grpc::ByteBuffer& in, rlsv3::RateLimitRequest& request);
/// The answer to a request that does not parse (INVALID_ARGUMENT).
grpc::Status rls_malformed();
/// The caller has gone (cancelled, or past its deadline): the call is not decided, not charged.
bool rls_caller_gone(grpc::ServerContextBase& context);

/// gRPC's asynchronous API with one completion queue and one thread that polls it, reads each
/// call, decides it and answers it. gRPC's callback API runs its calls on two or more threads
/// that hand the poller role and the transport's work to each other on every few calls (futex
/// waits and context switches, plus its executor threads): on the 2-core machine this thread
/// alone spends about 30% less CPU per decision and answers more calls per second
/// (measured with bench/grpc/cpu_per_decision.sh). A call is never waited on here: with a networked storage the service uses
/// the callback API and its storage threads instead (grpc/server.cpp).
///
/// Thread-safety: `attach` before the server is built, `start` after, `stop` after the server's
/// Shutdown and before the server is destroyed (the thread's last events still go through the
/// server's request objects); one controlling thread.
class GrpcInlineService {
 public:
  explicit GrpcInlineService(RlsService& rls) : rls_(rls) {}
  ~GrpcInlineService() { stop(); }
  GrpcInlineService(const GrpcInlineService&) = delete;
  GrpcInlineService& operator=(const GrpcInlineService&) = delete;

  /// Registers the method and the completion queue with `builder`.
  void attach(grpc::ServerBuilder& builder);
  /// Starts the thread (the server is built and started).
  void start();
  /// Offers no more call slots, shuts the queue down, lets the thread drain it, joins it (the
  /// server is shut down, not yet destroyed).
  void stop();

 private:
  using Service = rlsv3::RateLimitService::WithRawMethod_ShouldRateLimit<rlsv3::RateLimitService::Service>;
  struct Call;

  void request();  // offers one more call slot to gRPC, unless `stop` began
  void run();
  void answer(Call& call);

  RlsService& rls_;
  Service service_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::thread thread_;
  // Nothing may be started on a queue once it is shut down: `request` and `stop` agree here.
  std::mutex mu_;
  bool requesting_ = true;
};

}  // namespace floodgate::server
