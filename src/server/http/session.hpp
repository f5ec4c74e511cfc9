// A connection of the HTTP server: the stream it reads and writes (plain or TLS), and how it is
// started and answered. Internal to http/server.cpp and http/session.cpp.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>

#include "server/http/server_state.hpp"
#include "server/net/stream_deadline.hpp"
#include "server/net/tls_stream.hpp"

namespace floodgate::server::detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;

class Session;

// A connection's byte stream: TCP, or TLS over TCP (TlsStream). It is an Asio stream like either
// (Beast's readers and Asio's writers take it), so one Session serves both; the TLS handshake is
// `handshake`, a no-op on plain connections.
class Stream {
 public:
  using executor_type = asio::any_io_executor;

  /// TLS with `ctx`, plain without.
  Stream(tcp::socket socket, const TlsServerContext* ctx) {
    if (ctx != nullptr) {
      tls_.emplace(std::move(socket), *ctx);
    } else {
      plain_.emplace(std::move(socket));
    }
  }

  executor_type get_executor() noexcept { return tls_ ? tls_->get_executor() : plain_->get_executor(); }
  tcp::socket& socket() noexcept { return tls_ ? tls_->socket() : plain_->socket(); }
  /// The deadline of the operations that follow (beast::tcp_stream's).
  void expires_after(std::chrono::steady_clock::duration d) {
    if (tls_) return tls_->expires_after(d);
    plain_->expires_after(d);
  }
  [[nodiscard]] bool is_tls() const noexcept { return tls_.has_value(); }

  template <class Buffers, class Handler>
  void async_read_some(const Buffers& buffers, Handler&& handler) {
    if (tls_) return tls_->async_read_some(buffers, std::forward<Handler>(handler));
    plain_->async_read_some(buffers, std::forward<Handler>(handler));
  }
  template <class Buffers, class Handler>
  void async_write_some(const Buffers& buffers, Handler&& handler) {
    if (tls_) return tls_->async_write_some(buffers, std::forward<Handler>(handler));
    plain_->async_write_some(buffers, std::forward<Handler>(handler));
  }
  /// Writes what the socket takes now without waiting (plain connections; 0 on TLS ones and on
  /// any error, which the asynchronous write that follows then reports).
  std::size_t try_write_some(asio::const_buffer buffer) noexcept {
    return tls_ ? 0 : plain_->try_write_some(buffer);
  }
  template <class Handler>
  void handshake(Handler&& handler) {
    if (!tls_) return asio::post(get_executor(), [h = std::forward<Handler>(handler)]() mutable { h({}); });
    tls_->async_handshake(std::forward<Handler>(handler));
  }
  /// TLS: sends close_notify (then `handler`), without waiting for the peer's, as RFC 8446 §6.1
  /// allows, so only our own write can take time.
  template <class Handler>
  void send_close_notify(Handler&& handler) {
    tls_->async_send_close_notify(std::forward<Handler>(handler));
  }

 private:
  std::optional<PlainStream> plain_;
  std::optional<TlsStream> tls_;
};

}  // namespace floodgate::server::detail

namespace floodgate::server::detail {

/// Starts serving an accepted connection (TLS with the material in force when the server has it).
void start_session(tcp::socket socket, const std::shared_ptr<ServerState>& shared, Batcher& batcher);

/// On a storage thread: decides a batch of waiting requests with one round trip, then answers them
/// back on their I/O thread.
void decide_batch(Batcher& batcher, Service& service, std::vector<std::shared_ptr<Session>>& batch);

}  // namespace floodgate::server::detail
