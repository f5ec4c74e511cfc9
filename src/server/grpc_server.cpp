#include "server/grpc_server.hpp"

#include <grpcpp/grpcpp.h>

#include <fmt/format.h>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"

namespace floodgate::server {

class GrpcServer::Handler final : public rlsv3::RateLimitService::CallbackService {
 public:
  explicit Handler(RlsService& rls) : rls_(rls) {}

  grpc::ServerUnaryReactor* ShouldRateLimit(grpc::CallbackServerContext* context,
                                            const rlsv3::RateLimitRequest* request,
                                            rlsv3::RateLimitResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    rls_.should_rate_limit_async(*request, *response, [reactor](grpc::Status s) { reactor->Finish(std::move(s)); });
    return reactor;
  }

 private:
  RlsService& rls_;
};

GrpcServer::GrpcServer(RlsService& rls, std::string host, std::uint16_t port)
    : rls_(rls), host_(std::move(host)), port_(port) {}

GrpcServer::~GrpcServer() {
  if (server_) shutdown(std::chrono::milliseconds(0));
}

absl::Status GrpcServer::start() {
  handler_ = std::make_unique<Handler>(rls_);
  const std::string address = host_.find(':') != std::string::npos ? fmt::format("[{}]:{}", host_, port_)
                                                                    : fmt::format("{}:{}", host_, port_);
  grpc::ServerBuilder builder;
  int bound = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &bound);
  builder.RegisterService(handler_.get());
  // A request larger than the service's own cap is answered INVALID_ARGUMENT by RlsService; far
  // larger ones are refused by gRPC before they are parsed (RESOURCE_EXHAUSTED).
  const std::size_t cap = rls_.limits().max_message_bytes;
  builder.SetMaxReceiveMessageSize(static_cast<int>(std::min<std::size_t>(cap * 4, 64u << 20)));
  server_ = builder.BuildAndStart();
  if (!server_ || bound == 0) {
    server_.reset();
    return absl::UnavailableError(fmt::format("cannot listen for gRPC on {}", address));
  }
  port_ = static_cast<std::uint16_t>(bound);
  return absl::OkStatus();
}

void GrpcServer::shutdown(std::chrono::milliseconds deadline) {
  if (!server_) return;
  server_->Shutdown(std::chrono::system_clock::now() + deadline);
  server_->Wait();
  server_.reset();
}

}  // namespace floodgate::server
