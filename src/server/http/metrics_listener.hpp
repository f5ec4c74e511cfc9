// A listener of its own for Prometheus (envoyproxy's USE_PROMETHEUS / PROMETHEUS_ADDR /
// PROMETHEUS_PATH): GET of one path answers the service's /metrics text, anything else 404.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"

namespace floodgate::server {

/// Serves `text()` at GET `path` on host:port, one request a connection (Connection: close), on a
/// thread of its own; a request must arrive within 10 s of the connection and be under 8 KiB.
/// Thread-safety: `start` and `stop` from one controlling thread; `text` is called on the
/// listener's thread.
class MetricsListener {
 public:
  MetricsListener(std::string host, std::uint16_t port, std::string path, std::function<std::string()> text);
  ~MetricsListener();  ///< stops

  /// Binds and starts. Errors: Unavailable naming the address.
  absl::Status start();
  void stop();
  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }

  struct State;

 private:
  std::string host_;
  std::uint16_t port_;
  std::string path_;
  std::function<std::string()> text_;
  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace floodgate::server
