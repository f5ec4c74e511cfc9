// The gRPC server of Envoy's RateLimitService: listeners, TLS, and calls handed to RlsService.
#include "server/grpc/server.hpp"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>


#include "absl/synchronization/mutex.h"

#include <fmt/format.h>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "server/grpc/inline.hpp"
#include "server/common/library_log.hpp"
#include "server/net/tls.hpp"

namespace floodgate::server {

// With batching (a networked storage). The method is registered raw (bytes in, bytes out): the request is parsed here, so that a
// malformed one (invalid UTF-8 in a string field, truncated bytes) is answered INVALID_ARGUMENT
// with a message, where the generated method answered UNIMPLEMENTED with none. protobuf's own
// complaint goes through the rate-limited library log (common/library_log.hpp).
class GrpcServer::Handler final
    : public rlsv3::RateLimitService::WithRawCallbackMethod_ShouldRateLimit<rlsv3::RateLimitService::Service> {
 public:
  explicit Handler(RlsService& rls) : rls_(rls) {}

  grpc::ServerUnaryReactor* ShouldRateLimit(grpc::CallbackServerContext* context, const grpc::ByteBuffer* in,
                                            grpc::ByteBuffer* out) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    auto call = std::make_shared<Call>();
    if (!rls_parse(*in, call->request)) {
      reactor->Finish(rls_malformed());
      return reactor;
    }
    Call& c = *call;
    rls_.should_rate_limit_async(
        c.request, c.response,
        [reactor, out, call = std::move(call)](grpc::Status s) {
          bool own = false;
          if (s.ok()) s = grpc::SerializationTraits<rlsv3::RateLimitResponse>::Serialize(call->response, out, &own);
          reactor->Finish(std::move(s));
        },
        [context] { return rls_caller_gone(*context); });
    return reactor;
  }

 private:
  struct Call {
    rlsv3::RateLimitRequest request;
    rlsv3::RateLimitResponse response;
  };

  RlsService& rls_;
};

GrpcServer::GrpcServer(RlsService& rls, std::string host, std::uint16_t port, const TlsState* tls)
    : rls_(rls), host_(std::move(host)), port_(port), tls_(tls) {}

namespace {

// TLS from the state's private copies (net/tls.hpp), re-read by gRPC's file watcher each second.
std::shared_ptr<grpc::ServerCredentials> credentials(const TlsState* tls) {
  if (tls == nullptr) return grpc::InsecureServerCredentials();
  namespace ex = grpc::experimental;
  constexpr unsigned kRefreshSeconds = 1;
  const bool mutual = !tls->current()->client_ca.empty();
  auto provider = mutual ? std::make_shared<ex::FileWatcherCertificateProvider>(
                               tls->key_path(), tls->cert_path(), tls->client_ca_path(), kRefreshSeconds)
                         : std::make_shared<ex::FileWatcherCertificateProvider>(tls->key_path(), tls->cert_path(),
                                                                                 kRefreshSeconds);
  ex::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (mutual) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return ex::TlsServerCredentials(options);
}

}  // namespace

GrpcServer::~GrpcServer() {
  if (server_) shutdown(std::chrono::milliseconds(0));
}

absl::Status GrpcServer::start() {
  route_library_logs();
  // gRPC locks absl::Mutex several times per call. Debian builds abseil without NDEBUG, which
  // leaves its lock-order (deadlock) detection on: every lock is recorded in a graph of held locks,
  // about 0.6 µs per decision in a profile of ShouldRateLimit (1 µs over TLS, which locks more).
  // It is a debugging aid for abseil's users; a server has no use for it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  const std::string address = host_.find(':') != std::string::npos ? fmt::format("[{}]:{}", host_, port_)
                                                                    : fmt::format("{}:{}", host_, port_);
  // The standard health service (grpc.health.v1.Health: Check and Watch), for Kubernetes' gRPC
  // probes: SERVING once started, NOT_SERVING from shutdown on.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int bound = 0;
  builder.AddListeningPort(address, credentials(tls_), &bound);
  // gRPC binds with SO_REUSEPORT by default: a second server on this address would share its
  // connections (and split the counts) without a word. Off: an address another process holds is
  // refused at start.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  if (rls_.settings().batching) {
    handler_ = std::make_unique<Handler>(rls_);
    builder.RegisterService(handler_.get());
  } else {
    inline_ = std::make_unique<GrpcInlineService>(rls_);
    inline_->attach(builder);
  }
  for (grpc::Service* service : extra_) builder.RegisterService(service);
  // A request larger than the service's own cap is answered INVALID_ARGUMENT by RlsService; far
  // larger ones are refused by gRPC before they are parsed (RESOURCE_EXHAUSTED).
  const std::size_t cap = rls_.settings().max_message_bytes;
  builder.SetMaxReceiveMessageSize(static_cast<int>(std::min<std::size_t>(cap * 4, 64u << 20)));
  server_ = builder.BuildAndStart();
  if (!server_ || bound == 0) {
    if (inline_) inline_->stop();
    server_.reset();
    return absl::UnavailableError(fmt::format(
        "cannot listen for gRPC on {}: the address is in use (another process listening there?) or not "
        "this machine's",
        address));
  }
  port_ = static_cast<std::uint16_t>(bound);
  if (inline_) inline_->start();
  std::lock_guard<std::mutex> lock(health_mu_);
  serving_ = true;
  health_ = server_->GetHealthCheckService();
  report_health();
  return absl::OkStatus();
}

void GrpcServer::report_health() {
  if (health_ == nullptr) return;
  const bool up = serving_ && ready_;
  health_->SetServingStatus(std::string(rlsv3::RateLimitService::service_full_name()), up);
  health_->SetServingStatus("ratelimit", up);  // the name envoyproxy/ratelimit reports
  health_->SetServingStatus(up);
}

void GrpcServer::set_ready(bool ready) {
  std::lock_guard<std::mutex> lock(health_mu_);
  ready_ = ready;
  report_health();
}

void GrpcServer::shutdown(std::chrono::milliseconds deadline) {
  if (!server_) return;
  {  // Health watchers hear NOT_SERVING before the calls in flight drain.
    std::lock_guard<std::mutex> lock(health_mu_);
    serving_ = false;
    report_health();
  }
  server_->Shutdown(std::chrono::system_clock::now() + deadline);
  server_->Wait();
  // The inline service's queue is drained while the server still exists: its last events (call
  // slots gRPC gives back unused) finish through the server's request objects; destroying the
  // server first crashed there, now and then, at exit.
  if (inline_) inline_->stop();
  {
    std::lock_guard<std::mutex> lock(health_mu_);
    health_ = nullptr;
  }
  server_.reset();
}

}  // namespace floodgate::server
