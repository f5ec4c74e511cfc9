// The HTTP server's TLS connection: OpenSSL driven directly on the non-blocking socket.
// Internal to the HTTP server (http_session.hpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>

#include <boost/asio.hpp>
#include <boost/beast/core/error.hpp>
#include <openssl/err.h>
#include <openssl/ssl.h>

namespace floodgate::server::detail {

/// The server side of one TLS connection, an Asio stream (Beast's AsyncReadStream and
/// AsyncWriteStream), with a deadline like beast::tcp_stream's.
///
/// Why not Asio's ssl::stream: its engine runs every record through a BIO pair (a copy each way),
/// clears OpenSSL's error queue around every call, and reads the socket through a second stream
/// layer; per request that was +1.9 µs of server CPU over plain HTTP (docs/benchmarks.md). Here
/// OpenSSL reads from a buffer this stream fills with one socket read (so Asio's reactor still
/// decides when to read, and no read is tried on a socket known to be empty), and writes with
/// send(2) straight from its record buffer.
///
/// Errors as Asio's ssl::stream reports them: the peer's close_notify is asio::error::eof, an end
/// without it ssl::error::stream_truncated, a TLS failure a code of asio::error::get_ssl_category;
/// after the deadline, beast::error::timeout (for the operation waiting then and every later one).
///
/// Thread-safety: none; one strand (here: the session's single-threaded io_context). Not movable
/// (OpenSSL's BIO points at it). At most one read and one write operation at a time.
class TlsStream {
 public:
  using executor_type = boost::asio::any_io_executor;
  using clock = std::chrono::steady_clock;

  /// A server connection with `ctx`'s certificate and verification settings over `socket`.
  TlsStream(boost::asio::ip::tcp::socket socket, SSL_CTX* ctx);
  ~TlsStream();
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  executor_type get_executor() noexcept { return socket_.get_executor(); }
  boost::asio::ip::tcp::socket& socket() noexcept { return socket_; }
  SSL* native_handle() noexcept { return ssl_; }

  /// The operations from now on must end within `d` (beast::tcp_stream::expires_after): past it
  /// the socket's waits are cancelled and the operations complete with beast::error::timeout.
  void expires_after(clock::duration d);

  template <class Buffers, class Handler>
  void async_read_some(const Buffers& buffers, Handler&& handler) {
    const auto b = first(buffers);
    start([b](SSL* ssl, std::size_t& n) { return SSL_read_ex(ssl, b.data(), b.size(), &n); }, b.size() == 0,
          std::forward<Handler>(handler));
  }
  template <class Buffers, class Handler>
  void async_write_some(const Buffers& buffers, Handler&& handler) {
    const auto b = first(buffers);
    start([b](SSL* ssl, std::size_t& n) { return SSL_write_ex(ssl, b.data(), b.size(), &n); }, b.size() == 0,
          std::forward<Handler>(handler));
  }
  /// The server's handshake; handler(error_code).
  template <class Handler>
  void async_handshake(Handler&& handler) {
    start([](SSL* ssl, std::size_t&) { return SSL_do_handshake(ssl); }, false,
          [h = std::forward<Handler>(handler)](boost::beast::error_code ec, std::size_t) mutable { h(ec); });
  }
  /// Sends close_notify; handler(error_code). Waits for the peer's only if OpenSSL has not been
  /// told it arrived (SSL_set_shutdown(SSL_RECEIVED_SHUTDOWN)).
  template <class Handler>
  void async_shutdown(Handler&& handler) {
    start([](SSL* ssl, std::size_t&) { const int r = SSL_shutdown(ssl); return r == 0 ? 1 : r; }, false,
          [h = std::forward<Handler>(handler)](boost::beast::error_code ec, std::size_t) mutable { h(ec); });
  }

 private:
  friend struct TlsBio;
  template <class Step>
  class Op;

  template <class Buffers>
  static auto first(const Buffers& buffers) {
    for (auto it = boost::asio::buffer_sequence_begin(buffers); it != boost::asio::buffer_sequence_end(buffers); ++it) {
      if (it->size() > 0) return *it;
    }
    return *boost::asio::buffer_sequence_begin(buffers);
  }

  template <class Step, class Handler>
  void start(Step step, bool empty, Handler&& handler);

  /// What comes after a step that returned `r`: done, a socket read, room to send, or failure
  /// (`ec` set; OpenSSL's error queue emptied).
  enum class Next { kDone, kRead, kWrite, kFail };
  Next classify(int r, boost::beast::error_code& ec);
  void arm();

  // The bytes read from the socket that OpenSSL has not taken yet (TlsBio reads from here).
  static constexpr std::size_t kInput = 16 * 1024 + 512;  // a whole record of the largest size
  [[nodiscard]] bool input_empty() const noexcept { return in_begin_ == in_end_; }
  boost::asio::mutable_buffer input_room() noexcept {
    in_begin_ = in_end_ = 0;
    return {in_.get(), kInput};
  }

  boost::asio::ip::tcp::socket socket_;
  SSL* ssl_ = nullptr;
  std::unique_ptr<unsigned char[]> in_;
  std::size_t in_begin_ = 0;
  std::size_t in_end_ = 0;
  bool eof_ = false;       // the socket read ended: TlsBio reports the end to OpenSSL
  int send_errno_ = 0;     // the last send(2) failure other than EAGAIN
  boost::asio::steady_timer timer_;
  clock::time_point deadline_ = clock::time_point::max();
  clock::time_point armed_ = clock::time_point::max();  // when the timer fires; max: not waiting
  bool timed_out_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // false once destroyed (the timer's handler)
};

// One operation: runs `step` (an SSL call) until it succeeds or fails, reading the socket into
// the input buffer when OpenSSL wants more, waiting for room when send(2) would block. A step
// done without waiting completes through a post, never inside the initiating call.
template <class Step>
class TlsStream::Op {
 public:
  Op(TlsStream& s, Step step, bool empty) : s_(s), step_(std::move(step)), empty_(empty) {}

  template <class Self>
  void operator()(Self& self, boost::beast::error_code ec = {}, std::size_t got = 0) {
    switch (state_) {
      case State::kDone:
        return self.complete(ec_, n_);
      case State::kReading:
        if (ec == boost::asio::error::eof) {
          s_.eof_ = true;
          ec = {};
        }
        s_.in_end_ = got;
        break;
      case State::kStart:
      case State::kWaiting:
        break;
    }
    if (ec || s_.timed_out_) return finish(self, s_.timed_out_ ? boost::beast::error::timeout : ec);
    if (empty_) return finish(self, {});
    for (;;) {
      if (ERR_peek_error() != 0) ERR_clear_error();  // SSL_get_error reads the thread's queue
      const int r = step_(s_.ssl_, n_);
      switch (s_.classify(r, ec)) {
        case Next::kDone:
          return finish(self, {});
        case Next::kFail:
          return finish(self, ec);
        case Next::kRead:
          if (!s_.input_empty()) continue;  // wants more, but took a record of another kind first
          state_ = State::kReading;
          return s_.socket_.async_read_some(s_.input_room(), std::move(self));
        case Next::kWrite:
          state_ = State::kWaiting;
          return s_.socket_.async_wait(boost::asio::socket_base::wait_write, std::move(self));
      }
    }
  }

 private:
  enum class State { kStart, kReading, kWaiting, kDone };

  template <class Self>
  void finish(Self& self, boost::beast::error_code ec) {
    if (ec) n_ = 0;
    if (state_ != State::kStart) return self.complete(ec, n_);
    state_ = State::kDone;
    ec_ = ec;
    boost::asio::post(s_.socket_.get_executor(), std::move(self));
  }

  TlsStream& s_;
  Step step_;
  bool empty_;
  State state_ = State::kStart;
  std::size_t n_ = 0;
  boost::beast::error_code ec_;
};

template <class Step, class Handler>
void TlsStream::start(Step step, bool empty, Handler&& handler) {
  boost::asio::async_compose<Handler, void(boost::beast::error_code, std::size_t)>(
      Op<Step>(*this, std::move(step), empty), handler, socket_);
}

}  // namespace floodgate::server::detail
