// The state-of-the-world xDS protocol of one resource type on an ADS stream, without sockets: what
// to send first on a stream, and how to answer each response (ACK or NACK). The client
// (xds/client.hpp) moves these messages; the tests drive it directly.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "envoy/service/discovery/v3/discovery.pb.h"
#include "server/config/config.hpp"

namespace floodgate::server {

namespace discoveryv3 = ::envoy::service::discovery::v3;

/// Follows the xDS protocol (envoy's api/envoy/service/discovery/v3/discovery.proto and
/// "xDS REST and gRPC protocol"):
/// - a stream starts with a request naming the node, the type and no resource (a wildcard
///   subscription), with `version_info` the last version applied (empty before any) and no nonce;
/// - each response is applied whole or not at all: applied, it is ACKed with its `version_info`
///   and `nonce`; refused, it is NACKed with its `nonce`, the version still in force and
///   `error_detail` (INVALID_ARGUMENT, the reason);
/// - a response of another type is NACKed (nothing else was asked for on this stream).
///
/// Thread-safety: none; one stream's thread uses it.
class XdsSotw {
 public:
  /// Applies a response's resources: OK once they are in force, else why they were refused (the
  /// rules in force stay).
  using Apply = std::function<absl::Status(const discoveryv3::DiscoveryResponse&)>;

  XdsSotw(const XdsSettings& settings, std::string type_url);

  /// The first request of a stream.
  [[nodiscard]] discoveryv3::DiscoveryRequest subscribe() const;

  /// Answers `response` after `apply` has applied or refused it. `error` (optional) gets the
  /// refusal's text.
  discoveryv3::DiscoveryRequest on_response(const discoveryv3::DiscoveryResponse& response, const Apply& apply,
                                            absl::Status* error = nullptr);

  /// The version in force ("" before the first one applied).
  [[nodiscard]] const std::string& version() const noexcept { return version_; }

 private:
  discoveryv3::DiscoveryRequest request() const;

  envoy::config::core::v3::Node node_;
  std::string type_url_;
  std::string version_;
};

/// The wait before opening the stream again after `failures` streams in a row (1 or more) that
/// brought no response: initial × multiplier^(failures − 1), at most max, then spread uniformly
/// over ±jitter of itself by `random` in [0, 1). Never less than 1 ms.
std::chrono::milliseconds xds_backoff(const XdsSettings& settings, unsigned failures, double random);

}  // namespace floodgate::server
