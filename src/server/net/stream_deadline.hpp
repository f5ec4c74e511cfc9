// A connection's deadline, shared by the HTTP server's two streams (PlainStream, TlsStream).
// Internal to the HTTP server.
#pragma once

#include <time.h>

#include <chrono>
#include <memory>

#include <boost/asio.hpp>
#include <boost/beast/core/error.hpp>

namespace floodgate::server::detail {

/// beast::tcp_stream's `expires_after`, without its cost per operation: tcp_stream sets its timer
/// again for every read and write (a timer-queue update, often a timerfd_settime(2)); this one
/// waits on the earliest deadline it was given and, when that passes, looks at the current one,
/// so it is set again only when a deadline comes nearer than the one it waits for. Past the
/// deadline the socket's operations are cancelled, and the stream reports beast::error::timeout
/// for the operation waiting then and every later one (`expired`).
///
/// Thread-safety: none; the stream's strand.
class StreamDeadline {
 public:
  using clock = std::chrono::steady_clock;

  explicit StreamDeadline(boost::asio::ip::tcp::socket& socket) : socket_(socket), timer_(socket.get_executor()) {}
  ~StreamDeadline() { *alive_ = false; }
  StreamDeadline(const StreamDeadline&) = delete;
  StreamDeadline& operator=(const StreamDeadline&) = delete;

  /// `d` from now. A deadline of a second or more (the defaults are 10 and 60 s) reads the coarse
  /// clock (CLOCK_MONOTONIC_COARSE: the steady clock as of its last tick, at most a tick, a few ms,
  /// behind it, for an eighth of the cost to read; the request path sets a deadline three times);
  /// a shorter one, which a tick would shorten noticeably, the steady clock.
  void expires_after(clock::duration d) {
    deadline_ = (d >= std::chrono::seconds(1) ? coarse_now() : clock::now()) + d;
    if (!expired_ && deadline_ < armed_) arm();
  }
  /// Whether the deadline passed (the socket's operations were cancelled then).
  [[nodiscard]] bool expired() const noexcept { return expired_; }

  static clock::time_point coarse_now() noexcept {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);  // steady_clock's clock (libstdc++), coarse
    return clock::time_point(std::chrono::duration_cast<clock::duration>(std::chrono::seconds(ts.tv_sec) +
                                                                          std::chrono::nanoseconds(ts.tv_nsec)));
  }

 private:
  void arm() {
    armed_ = deadline_;
    timer_.expires_at(deadline_);  // a wait already pending completes with operation_aborted
    timer_.async_wait([this, alive = alive_](boost::beast::error_code ec) {
      if (ec || !*alive) return;  // replaced by a nearer deadline, or the stream is gone
      armed_ = clock::time_point::max();
      if (clock::now() < deadline_) return arm();
      expired_ = true;
      boost::beast::error_code ignored;
      socket_.cancel(ignored);
    });
  }

  boost::asio::ip::tcp::socket& socket_;
  boost::asio::steady_timer timer_;
  clock::time_point deadline_ = clock::time_point::max();
  clock::time_point armed_ = clock::time_point::max();  // when the timer fires; max: not waiting
  bool expired_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // false once destroyed (the timer's handler)
};

/// A plain TCP connection with a StreamDeadline: an Asio stream (Beast's AsyncReadStream and
/// AsyncWriteStream) like beast::tcp_stream, whose errors it reports (beast::error::timeout past
/// the deadline).
class PlainStream {
 public:
  using executor_type = boost::asio::any_io_executor;

  explicit PlainStream(boost::asio::ip::tcp::socket socket) : socket_(std::move(socket)), deadline_(socket_) {}

  executor_type get_executor() noexcept { return socket_.get_executor(); }
  boost::asio::ip::tcp::socket& socket() noexcept { return socket_; }
  void expires_after(StreamDeadline::clock::duration d) { deadline_.expires_after(d); }

  template <class Buffers, class Handler>
  void async_read_some(const Buffers& buffers, Handler&& handler) {
    if (deadline_.expired()) return late(std::forward<Handler>(handler));
    socket_.async_read_some(buffers, Checked<std::decay_t<Handler>>{&deadline_, std::forward<Handler>(handler)});
  }
  /// Writes what the socket takes now without waiting; 0 past the deadline or on any error (the
  /// asynchronous write that follows reports it).
  std::size_t try_write_some(boost::asio::const_buffer buffer) noexcept {
    if (deadline_.expired()) return 0;
    boost::beast::error_code ec;
    if (!socket_.non_blocking()) socket_.non_blocking(true, ec);
    const std::size_t n = ec ? 0 : socket_.write_some(buffer, ec);
    return ec ? 0 : n;
  }
  template <class Buffers, class Handler>
  void async_write_some(const Buffers& buffers, Handler&& handler) {
    if (deadline_.expired()) return late(std::forward<Handler>(handler));
    socket_.async_write_some(buffers, Checked<std::decay_t<Handler>>{&deadline_, std::forward<Handler>(handler)});
  }

 private:
  // The handler, told beast::error::timeout when the deadline cancelled its operation. It runs on
  // the socket's executor (one thread per connection here) and its memory comes from Asio's
  // per-thread recycling allocator, as the handler's own would.
  template <class Handler>
  struct Checked {
    const StreamDeadline* deadline;
    Handler handler;
    void operator()(boost::beast::error_code ec, std::size_t n) {
      if (ec && deadline->expired()) ec = boost::beast::error::timeout;
      std::move(handler)(ec, n);
    }
  };
  template <class Handler>
  void late(Handler&& handler) {
    boost::asio::post(socket_.get_executor(), [h = std::forward<Handler>(handler)]() mutable {
      std::move(h)(boost::beast::error_code(boost::beast::error::timeout), std::size_t{0});
    });
  }

  boost::asio::ip::tcp::socket socket_;
  StreamDeadline deadline_;
};

}  // namespace floodgate::server::detail
