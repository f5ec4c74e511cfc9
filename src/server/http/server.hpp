// The HTTP/1.1 front of the service: Boost.Beast on Asio, one I/O thread per core.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "server/config/config.hpp"
#include "server/api/service.hpp"

namespace floodgate::server {

class TlsState;
struct ServerState;

/// Listens on one address, which no other process may hold (no SO_REUSEPORT: a second server on
/// the same address is refused at start), and accepts on every I/O thread (the threads share
/// nothing but the listening socket and the service). Keep-alive; requests pipelined on a
/// connection are answered in order, with at most `max_pipelined` requests buffered ahead; header
/// and body limits (431, 413); idle, request and write deadlines (slow clients are dropped); a
/// bound on open connections. With a TlsState it speaks HTTPS only: each connection is set up with
/// the certificate in force when it was accepted (so a reload reaches new connections at once).
///
/// Thread-safety: `start`, `drain` and `join` are called by one controlling thread.
class HttpServer {
 public:
  /// `tls`: null for plain HTTP; else it outlives the server.
  HttpServer(Service& service, const Config& config, const TlsState* tls = nullptr);
  ~HttpServer();

  /// Binds and starts the I/O threads. Errors: Unavailable naming the address (held by another
  /// process, denied).
  absl::Status start();
  /// The bound port (useful when the configured port was 0).
  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
  /// Stops accepting, lets in-flight requests finish (keep-alive connections are closed after
  /// their current response) for at most `drain_timeout`, then stops the threads.
  void drain();
  /// Waits for the I/O threads to end.
  void join();

 private:
  Service& service_;
  std::string host_;
  std::uint16_t port_;
  unsigned threads_;
  std::shared_ptr<ServerState> shared_;
  std::vector<std::thread> workers_;
};

}  // namespace floodgate::server
