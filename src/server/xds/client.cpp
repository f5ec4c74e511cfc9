// The ADS stream's thread: connect, subscribe, answer each response, reopen with backoff.
#include "server/xds/client.hpp"

#include <random>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "envoy/service/discovery/v3/ads.grpc.pb.h"
#include "server/config/yaml_errors.hpp"
#include "server/xds/rules_resource.hpp"

namespace floodgate::server {

namespace {

absl::StatusOr<std::string> pem(std::string_view field, const std::string& path) {
  if (path.empty()) return std::string();
  auto text = yaml::read_config_file(path);
  if (!text.ok()) return absl::InvalidArgumentError(fmt::format("{}: {}", field, std::string(text.status().message())));
  return *text;
}

}  // namespace

XdsClient::XdsClient(XdsSettings settings, XdsSotw::Apply apply)
    : settings_(std::move(settings)), apply_(std::move(apply)) {}

XdsClient::~XdsClient() { stop(); }

absl::Status XdsClient::start() {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  grpc::ChannelArguments args;
  if (settings_.tls) {
    grpc::SslCredentialsOptions o;
    auto ca = pem("rls.xds.tls.ca_file", settings_.ca_file);
    auto cert = pem("rls.xds.tls.cert_file", settings_.cert_file);
    auto key = pem("rls.xds.tls.key_file", settings_.key_file);
    for (const auto* s : {&ca, &cert, &key}) {
      if (!s->ok()) return s->status();
    }
    o.pem_root_certs = *ca;  // empty: the system's CAs
    o.pem_cert_chain = *cert;
    o.pem_private_key = *key;
    credentials = grpc::SslCredentials(o);
    if (!settings_.server_name.empty()) args.SetSslTargetNameOverride(settings_.server_name);
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }
  args.SetMaxReceiveMessageSize(static_cast<int>(settings_.max_message_bytes));
  // gRPC's own reconnection: a connection attempt every connect_retry while none can be made.
  const int retry = static_cast<int>(settings_.connect_retry.count());
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, retry);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, retry);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, retry);
  channel_ = grpc::CreateCustomChannel(settings_.server, credentials, args);
  thread_ = std::thread([this] { run(); });
  return absl::OkStatus();
}

void XdsClient::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    if (context_ != nullptr) context_->TryCancel();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool XdsClient::wait_for_rules(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return has_rules() || stopping_; }) && has_rules();
}

bool XdsClient::sleep_for(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_for(lock, d, [this] { return stopping_; });
}

// Until the channel is connected (true) or the client stops (false); gRPC tries every connect_retry.
bool XdsClient::wait_connected() {
  bool said = false;
  for (;;) {
    if (!sleep_for(std::chrono::milliseconds(0))) return false;
    if (channel_->WaitForConnected(std::chrono::system_clock::now() + std::chrono::milliseconds(100))) return true;
    if (!said && channel_->GetState(false) == GRPC_CHANNEL_TRANSIENT_FAILURE) {
      spdlog::warn("xDS: the control plane {} cannot be reached; trying every {} ms", settings_.server,
                   settings_.connect_retry.count());
      said = true;
    }
  }
}

void XdsClient::run() {
  XdsSotw sotw(settings_, kRateLimitConfigTypeUrl);
  auto stub = envoy::service::discovery::v3::AggregatedDiscoveryService::NewStub(channel_);
  std::mt19937_64 random(std::random_device{}());
  unsigned failures = 0;
  while (wait_connected()) {
    grpc::ClientContext context;
    for (const auto& [name, value] : settings_.headers) context.AddMetadata(name, value);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      context_ = &context;
    }
    streams_.fetch_add(1, std::memory_order_relaxed);
    auto stream = stub->StreamAggregatedResources(&context);
    bool answered = false;
    if (stream->Write(sotw.subscribe())) {
      connected_.store(true, std::memory_order_relaxed);
      discoveryv3::DiscoveryResponse response;
      while (stream->Read(&response)) {
        answered = true;
        absl::Status error;
        const auto reply = sotw.on_response(response, apply_, &error);
        if (error.ok()) {
          {
            std::lock_guard<std::mutex> lock(mu_);  // wait_for_rules' predicate reads it under mu_
            applied_.fetch_add(1, std::memory_order_release);
          }
          cv_.notify_all();
        } else {
          refused_.fetch_add(1, std::memory_order_relaxed);
          spdlog::error("xDS: version {} refused (NACK), the rules of version {} keep serving: {}",
                        response.version_info(), sotw.version().empty() ? "(none)" : sotw.version(),
                        std::string(error.message()));
        }
        if (!stream->Write(reply)) break;
      }
    }
    connected_.store(false, std::memory_order_relaxed);
    stream->WritesDone();
    const grpc::Status status = stream->Finish();
    {
      std::lock_guard<std::mutex> lock(mu_);
      context_ = nullptr;
      if (stopping_) return;
    }
    failures = answered ? 1 : failures + 1;
    const auto wait = xds_backoff(settings_, failures, std::uniform_real_distribution<double>(0, 1)(random));
    spdlog::warn("xDS: the stream to {} ended ({}: {}); opening it again in {} ms", settings_.server,
                 static_cast<int>(status.error_code()), status.error_message(), wait.count());
    if (!sleep_for(wait)) return;
  }
}

void XdsClient::render(PromText& out) const {
  out.family("floodgate_xds_updates_total", "counter", "Rule sets received over xDS: applied (ACK) or refused (NACK)");
  out.sample("floodgate_xds_updates_total", {{"result", "applied"}}, applied_.load(std::memory_order_relaxed));
  out.sample("floodgate_xds_updates_total", {{"result", "refused"}}, refused_.load(std::memory_order_relaxed));
  out.single("floodgate_xds_streams_total", "counter", "ADS streams opened to the control plane",
             streams_.load(std::memory_order_relaxed));
  out.single("floodgate_xds_connected", "gauge", "1 while the ADS stream is open",
             std::uint64_t{connected_.load(std::memory_order_relaxed) ? 1u : 0u});
  out.single("floodgate_xds_overlays_unmatched", "gauge",
             "rls.overlays that match no rule of the rules in force (a typo, or a policy not pushed now)",
             overlays_unmatched_.load(std::memory_order_relaxed));
}

}  // namespace floodgate::server
