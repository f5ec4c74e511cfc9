// The HTTP server's TLS: GnuTLS driven directly on the non-blocking socket.
// Internal to the HTTP server (http/session.hpp, net/tls.cpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include <boost/asio.hpp>
#include <boost/beast/core/error.hpp>
#include <gnutls/gnutls.h>

#include "absl/status/statusor.h"
#include "server/net/stream_deadline.hpp"

namespace floodgate::server::detail {

/// What every HTTPS connection of one certificate shares: the certificate chain and key, the
/// client CA (mutual TLS: a client certificate is required and must verify against it), the
/// protocol and cipher priorities, the session ticket key. Immutable; shared by the I/O threads.
class TlsServerContext {
 public:
  /// From PEM texts (`client_ca` empty: no client certificate is asked for). Errors:
  /// InvalidArgument with GnuTLS's reason, naming which of the three it could not use.
  static absl::StatusOr<std::shared_ptr<const TlsServerContext>> create(const std::string& cert_chain,
                                                                       const std::string& key,
                                                                       const std::string& client_ca);
  ~TlsServerContext();
  TlsServerContext(const TlsServerContext&) = delete;
  TlsServerContext& operator=(const TlsServerContext&) = delete;

  /// Sets up a new server session with all of the above. Errors: GnuTLS's code (< 0).
  int configure(gnutls_session_t session) const;

 private:
  TlsServerContext() = default;
  gnutls_certificate_credentials_t credentials_ = nullptr;
  gnutls_priority_t priorities_ = nullptr;
  gnutls_datum_t ticket_key_{nullptr, 0};
  bool mutual_ = false;
};

/// GnuTLS's errors as error codes (the value is GnuTLS's code negated).
const boost::system::error_category& gnutls_category() noexcept;

/// The server side of one TLS connection, an Asio stream (Beast's AsyncReadStream and
/// AsyncWriteStream), with a deadline like beast::tcp_stream's.
///
/// Why GnuTLS and not OpenSSL here: a request and its answer are one small record each way, and
/// OpenSSL 3.0 spends ~0.93 µs per such pair (its record layer looks up cipher parameters through
/// the provider interface for every record; the AES-GCM itself is a fraction), GnuTLS 3.7 ~0.44 µs
/// (docs/benchmarks.md) — the difference is most of what TLS added to the server's CPU per request.
/// Why not Asio's ssl::stream (OpenSSL): besides that, its engine copies every record through a
/// BIO pair and clears OpenSSL's error queue around every call.
/// GnuTLS reads from a buffer this stream fills with one socket read (so Asio's reactor still
/// decides when to read, and no read is tried on a socket known to be empty), and writes with
/// sendmsg(2) straight from its record buffers.
///
/// Errors as Asio's ssl::stream reports them: the peer's close_notify is asio::error::eof, an end
/// without it ssl::error::stream_truncated, a TLS failure a code of gnutls_category(); after the
/// deadline, beast::error::timeout (for the operation waiting then and every later one).
///
/// Thread-safety: none; one strand (here: the session's single-threaded io_context). Not movable
/// (GnuTLS's transport pointer is `this`). At most one read and one write operation at a time.
class TlsStream {
 public:
  using executor_type = boost::asio::any_io_executor;
  using clock = std::chrono::steady_clock;

  /// A server connection with `ctx`'s certificate and verification settings over `socket`.
  TlsStream(boost::asio::ip::tcp::socket socket, const TlsServerContext& ctx);
  ~TlsStream();
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  executor_type get_executor() noexcept { return socket_.get_executor(); }
  boost::asio::ip::tcp::socket& socket() noexcept { return socket_; }

  /// The operations from now on must end within `d` (beast::tcp_stream::expires_after): past it
  /// the socket's waits are cancelled and the operations complete with beast::error::timeout.
  void expires_after(clock::duration d) { deadline_.expires_after(d); }

  template <class Buffers, class Handler>
  void async_read_some(const Buffers& buffers, Handler&& handler) {
    const auto b = first(buffers);
    start(
        [b](gnutls_session_t s, std::size_t& n) {
          const ssize_t r = gnutls_record_recv(s, b.data(), b.size());
          if (r == 0) return kPeerClosed;
          n = r > 0 ? static_cast<std::size_t>(r) : 0;
          return r > 0 ? 0 : static_cast<int>(r);
        },
        b.size() == 0, std::forward<Handler>(handler), /*read=*/true);
  }
  template <class Buffers, class Handler>
  void async_write_some(const Buffers& buffers, Handler&& handler) {
    const auto b = first(buffers);
    start(
        [b](gnutls_session_t s, std::size_t& n) {
          // After GNUTLS_E_AGAIN GnuTLS wants the same call again: the same buffer comes back,
          // since an operation retries its own step (and Asio's writers wait for its end).
          const ssize_t r = gnutls_record_send(s, b.data(), b.size());
          n = r > 0 ? static_cast<std::size_t>(r) : 0;
          return r >= 0 ? 0 : static_cast<int>(r);
        },
        b.size() == 0, std::forward<Handler>(handler));
  }
  /// The server's handshake; handler(error_code).
  template <class Handler>
  void async_handshake(Handler&& handler) {
    start([this](gnutls_session_t s, std::size_t&) {
            const int r = gnutls_handshake(s);
            handshaken_ = r == 0;
            return r;
          },
          false, [h = std::forward<Handler>(handler)](boost::beast::error_code ec, std::size_t) mutable { h(ec); });
  }
  /// Sends close_notify, without waiting for the peer's (RFC 8446 §6.1 allows it); handler(error_code).
  template <class Handler>
  void async_send_close_notify(Handler&& handler) {
    start([](gnutls_session_t s, std::size_t&) { return gnutls_bye(s, GNUTLS_SHUT_WR); }, false,
          [h = std::forward<Handler>(handler)](boost::beast::error_code ec, std::size_t) mutable { h(ec); });
  }

 private:
  friend struct TlsTransport;
  template <class Step, class Handler>
  class Op;

  // A step's result besides GnuTLS's codes (0: done): the peer's close_notify.
  static constexpr int kPeerClosed = 1;

  template <class Buffers>
  static auto first(const Buffers& buffers) {
    for (auto it = boost::asio::buffer_sequence_begin(buffers); it != boost::asio::buffer_sequence_end(buffers); ++it) {
      if (it->size() > 0) return *it;
    }
    return *boost::asio::buffer_sequence_begin(buffers);
  }

  template <class Step, class Handler>
  void start(Step step, bool empty, Handler&& handler, bool read = false);

  /// Whether a read now could only ask for more bytes: none read and not yet given to GnuTLS,
  /// none held by it (decrypted or not), the handshake done. Such a gnutls_record_recv would
  /// allocate its 16 kB record buffer, find nothing and free it.
  [[nodiscard]] bool nothing_to_read() const noexcept {
    return input_empty() && !eof_ && handshaken_ && gnutls_record_check_pending(session_) == 0;
  }

  /// What comes after a step that returned `r`: done, a socket read, room to send, the step
  /// again (a warning alert), or failure (`ec` set).
  enum class Next { kDone, kRead, kWrite, kAgain, kFail };
  Next classify(int r, boost::beast::error_code& ec);

  // The bytes read from the socket that GnuTLS has not taken yet (TlsTransport reads from here).
  static constexpr std::size_t kInput = 16 * 1024 + 512;  // a whole record of the largest size
  [[nodiscard]] bool input_empty() const noexcept { return in_begin_ == in_end_; }
  boost::asio::mutable_buffer input_room() noexcept {
    in_begin_ = in_end_ = 0;
    return {in_.get(), kInput};
  }

  boost::asio::ip::tcp::socket socket_;
  gnutls_session_t session_ = nullptr;
  std::unique_ptr<unsigned char[]> in_;
  std::size_t in_begin_ = 0;
  std::size_t in_end_ = 0;
  bool eof_ = false;       // the socket read ended: TlsTransport reports the end to GnuTLS
  bool handshaken_ = false;  // the handshake completed
  int send_errno_ = 0;     // the last sendmsg(2) failure other than EAGAIN
  StreamDeadline deadline_;
};

// One operation: runs `step` (a GnuTLS call) until it succeeds or fails, reading the socket into
// the input buffer when GnuTLS wants more, waiting for room when sendmsg(2) would block. It is its
// own completion handler for those socket operations (no composed-operation layer: that was most
// of what TLS added to the program's own time per request). Done within the initiating call, it
// completes through a post, never inside that call; done later, it calls the handler at once.
template <class Step, class Handler>
class TlsStream::Op {
 public:
  Op(TlsStream& s, Step step, Handler handler) : s_(&s), step_(std::move(step)), handler_(std::move(handler)) {}

  // From the initiating call.
  void start(bool empty, bool read) {
    if (s_->deadline_.expired()) return done(true, boost::beast::error::timeout);
    if (empty) return done(true, {});
    if (read && s_->nothing_to_read()) return read_socket();  // between two requests: the usual case
    run(true);
  }

  // A socket read (`reading_`) or a wait for room completed.
  void operator()(boost::beast::error_code ec, std::size_t got = 0) {
    if (reading_) {
      if (ec == boost::asio::error::eof) {
        s_->eof_ = true;
        ec = {};
      }
      s_->in_end_ = got;
    }
    if (s_->deadline_.expired()) return done(false, boost::beast::error::timeout);
    if (ec) return done(false, ec);
    run(false);
  }

 private:
  void run(bool initiating) {
    for (;;) {
      boost::beast::error_code ec;
      const int r = step_(s_->session_, n_);
      switch (s_->classify(r, ec)) {
        case Next::kDone:
        case Next::kFail:
          return done(initiating, ec);
        case Next::kAgain:
          continue;
        case Next::kRead:
          if (!s_->input_empty()) continue;  // wants more, but took a record of another kind first
          return read_socket();
        case Next::kWrite:
          reading_ = false;
          return s_->socket_.async_wait(boost::asio::socket_base::wait_write, std::move(*this));
      }
    }
  }
  void read_socket() {
    reading_ = true;
    TlsStream& s = *s_;
    s.socket_.async_read_some(s.input_room(), std::move(*this));
  }
  void done(bool initiating, boost::beast::error_code ec) {
    const std::size_t n = ec ? 0 : n_;
    if (!initiating) return std::move(handler_)(ec, n);
    boost::asio::post(s_->socket_.get_executor(),
                      [h = std::move(handler_), ec, n]() mutable { std::move(h)(ec, n); });
  }

  TlsStream* s_;
  Step step_;
  Handler handler_;
  bool reading_ = false;
  std::size_t n_ = 0;
};

template <class Step, class Handler>
void TlsStream::start(Step step, bool empty, Handler&& handler, bool read) {
  Op<Step, std::decay_t<Handler>>(*this, std::move(step), std::forward<Handler>(handler)).start(empty, read);
}

}  // namespace floodgate::server::detail
