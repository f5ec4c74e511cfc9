// A control plane for the tests: an ADS server (StreamAggregatedResources) that follows the xDS
// state-of-the-world protocol as Envoy's documentation states it, written against the messages
// only: it serves a snapshot (a version and its resources) to whoever subscribes, pushes each new
// snapshot with a fresh nonce, and records every request it receives, untouched, so that a test
// checks what the client sent (node, version, nonce, error_detail), not what it says it did.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "envoy/service/discovery/v3/ads.grpc.pb.h"
#include "ratelimit/config/ratelimit/v3/rls_conf.pb.h"

namespace floodgate::testing {

namespace xds = ::envoy::service::discovery::v3;
namespace rlconf = ::ratelimit::config::ratelimit::v3;

inline constexpr const char* kRateLimitConfigType = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig";

class ControlPlane final : public xds::AggregatedDiscoveryService::Service {
 public:
  /// A request as received, with the stream it came on (1, 2, … in order of opening).
  struct Received {
    int stream;
    xds::DiscoveryRequest request;
  };

  /// Listens on 127.0.0.1:`port` (0: a free port). `credentials`: plain text when null.
  explicit ControlPlane(int port = 0, std::shared_ptr<grpc::ServerCredentials> credentials = nullptr) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:" + std::to_string(port),
                             credentials ? credentials : grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~ControlPlane() override { stop(); }

  void stop() {
    if (!server_) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    server_->Wait();
    server_.reset();
  }

  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  /// Sets the state of the world; an open stream gets it at once. Returns the response's nonce.
  std::string push(const std::string& version, const std::vector<rlconf::RateLimitConfig>& configs) {
    std::lock_guard<std::mutex> lock(mu_);
    version_ = version;
    resources_.clear();
    for (const auto& c : configs) resources_.emplace_back().PackFrom(c);
    has_snapshot_ = true;
    return send_locked();
  }

  /// Pushes resources of another type (the test of a response nobody subscribed to).
  std::string push_raw(const xds::DiscoveryResponse& response) {
    std::lock_guard<std::mutex> lock(mu_);
    if (writer_ == nullptr) return "";
    xds::DiscoveryResponse r = response;
    r.set_nonce(std::to_string(++nonce_));
    sent_.push_back(r);
    writer_->Write(r);
    return r.nonce();
  }

  /// Waits (up to `timeout`) for a request that `pred` accepts among those received, and returns
  /// it; nullopt-like (stream 0) when none came.
  Received wait_for(const std::function<bool(const Received&)>& pred,
                    std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
    std::unique_lock<std::mutex> lock(mu_);
    Received found{0, {}};
    cv_.wait_for(lock, timeout, [&] {
      for (const Received& r : received_) {
        if (pred(r)) {
          found = r;
          return true;
        }
      }
      return false;
    });
    return found;
  }

  /// The answer to the response with `nonce` (an ACK or a NACK).
  Received answer_to(const std::string& nonce) {
    return wait_for([&](const Received& r) { return r.request.response_nonce() == nonce; });
  }

  std::vector<Received> received() {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
  }

  /// The metadata (headers) of the latest stream.
  std::multimap<std::string, std::string> stream_headers() {
    std::lock_guard<std::mutex> lock(mu_);
    return headers_;
  }

  grpc::Status StreamAggregatedResources(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<xds::DiscoveryResponse, xds::DiscoveryRequest>* stream) override {
    int id = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      id = ++streams_;
      headers_.clear();
      for (const auto& [k, v] : context->client_metadata()) {
        headers_.emplace(std::string(k.data(), k.size()), std::string(v.data(), v.size()));
      }
    }
    xds::DiscoveryRequest request;
    bool first = true;
    while (stream->Read(&request)) {
      std::lock_guard<std::mutex> lock(mu_);
      received_.push_back({id, request});
      cv_.notify_all();
      if (first) {
        first = false;
        writer_ = stream;
        // The subscription: the current snapshot, unless the client already has its version.
        if (has_snapshot_ && request.version_info() != version_) send_locked();
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (writer_ == stream) writer_ = nullptr;
    return grpc::Status::OK;
  }

 private:
  std::string send_locked() {
    if (writer_ == nullptr) return "";
    xds::DiscoveryResponse r;
    r.set_version_info(version_);
    r.set_type_url(kRateLimitConfigType);
    r.set_nonce(std::to_string(++nonce_));
    for (const auto& a : resources_) *r.add_resources() = a;
    sent_.push_back(r);
    writer_->Write(r);
    return r.nonce();
  }

  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  int streams_ = 0;
  int nonce_ = 0;
  bool has_snapshot_ = false;
  std::string version_;
  std::vector<google::protobuf::Any> resources_;
  std::vector<xds::DiscoveryResponse> sent_;
  std::vector<Received> received_;
  std::multimap<std::string, std::string> headers_;
  grpc::ServerReaderWriter<xds::DiscoveryResponse, xds::DiscoveryRequest>* writer_ = nullptr;
};

}  // namespace floodgate::testing
