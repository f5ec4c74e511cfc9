#include "server/tls_stream.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <new>

#include <boost/asio/ssl/error.hpp>
#include <openssl/bio.h>
#include <openssl/err.h>

namespace floodgate::server::detail {

namespace asio = boost::asio;
namespace beast = boost::beast;

// OpenSSL's side of the stream: reads take the bytes the stream read from the socket (none left:
// "retry", and the stream reads the socket), writes go to the socket with send(2) (would block:
// "retry", and the stream waits until it can write). MSG_NOSIGNAL: a peer gone is an error, not
// SIGPIPE.
struct TlsBio {
  static int read(BIO* bio, char* out, int len) {
    auto& s = *static_cast<TlsStream*>(BIO_get_data(bio));
    BIO_clear_retry_flags(bio);
    if (s.input_empty()) {
      if (s.eof_) return 0;
      BIO_set_retry_read(bio);
      return -1;
    }
    const std::size_t n = std::min(static_cast<std::size_t>(len), s.in_end_ - s.in_begin_);
    std::memcpy(out, s.in_.get() + s.in_begin_, n);
    s.in_begin_ += n;
    return static_cast<int>(n);
  }

  static int write(BIO* bio, const char* data, int len) {
    auto& s = *static_cast<TlsStream*>(BIO_get_data(bio));
    BIO_clear_retry_flags(bio);
    const ssize_t n = ::send(s.socket_.native_handle(), data, static_cast<std::size_t>(len), MSG_NOSIGNAL);
    if (n >= 0) return static_cast<int>(n);
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      BIO_set_retry_write(bio);
    } else {
      s.send_errno_ = errno;
    }
    return -1;
  }

  static long ctrl(BIO*, int cmd, long, void*) { return cmd == BIO_CTRL_FLUSH ? 1 : 0; }

  static int create(BIO* bio) {
    BIO_set_init(bio, 1);
    return 1;
  }

  static const BIO_METHOD* method() {
    static const BIO_METHOD* const m = [] {
      BIO_METHOD* made = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "floodgate socket");
      BIO_meth_set_read(made, read);
      BIO_meth_set_write(made, write);
      BIO_meth_set_ctrl(made, ctrl);
      BIO_meth_set_create(made, create);
      return made;
    }();
    return m;
  }
};

TlsStream::TlsStream(asio::ip::tcp::socket socket, SSL_CTX* ctx)
    : socket_(std::move(socket)), ssl_(SSL_new(ctx)), in_(new unsigned char[kInput]), timer_(socket_.get_executor()) {
  if (ssl_ == nullptr) throw std::bad_alloc();
  BIO* bio = BIO_new(TlsBio::method());
  if (bio == nullptr) {
    SSL_free(ssl_);
    throw std::bad_alloc();
  }
  BIO_set_data(bio, this);
  SSL_set_bio(ssl_, bio, bio);
  SSL_set_accept_state(ssl_);
  // A write may be cut short (async_write_some) and retried from a moved buffer; OpenSSL keeps
  // its record buffers between records (its default, which Asio's engine turns off).
  SSL_set_mode(ssl_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  boost::system::error_code ignored;
  socket_.non_blocking(true, ignored);  // send(2) in TlsBio::write must not block
}

TlsStream::~TlsStream() {
  *alive_ = false;
  SSL_free(ssl_);  // frees the BIO too
}

TlsStream::Next TlsStream::classify(int r, beast::error_code& ec) {
  if (r > 0) return Next::kDone;
  const int e = SSL_get_error(ssl_, r);
  switch (e) {
    case SSL_ERROR_WANT_READ:
      return Next::kRead;
    case SSL_ERROR_WANT_WRITE:
      return Next::kWrite;
    case SSL_ERROR_ZERO_RETURN:
      ec = asio::error::eof;  // their close_notify
      return Next::kFail;
    default:
      break;
  }
  const unsigned long err = ERR_get_error();
  ERR_clear_error();
  if (e == SSL_ERROR_SYSCALL && err == 0) {
    ec = send_errno_ != 0 ? beast::error_code(send_errno_, asio::error::get_system_category())
                          : beast::error_code(asio::ssl::error::stream_truncated);
  } else if (ERR_GET_REASON(err) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
    ec = asio::ssl::error::stream_truncated;  // the socket ended without close_notify
  } else {
    ec = beast::error_code(static_cast<int>(err), asio::error::get_ssl_category());
  }
  return Next::kFail;
}

void TlsStream::expires_after(clock::duration d) {
  deadline_ = clock::now() + d;
  // The timer, once waiting, fires at the earliest deadline it was set for and then looks at the
  // current one; it is set again only when a deadline comes earlier than that.
  if (!timed_out_ && deadline_ < armed_) arm();
}

void TlsStream::arm() {
  armed_ = deadline_;
  timer_.expires_at(deadline_);  // a wait already pending completes with operation_aborted
  timer_.async_wait([this, alive = alive_](beast::error_code ec) {
    if (ec || !*alive) return;  // replaced by a nearer deadline, or the stream is gone
    armed_ = clock::time_point::max();
    if (clock::now() < deadline_) return arm();
    timed_out_ = true;
    beast::error_code ignored;
    socket_.cancel(ignored);  // the operation waiting completes, with beast::error::timeout
  });
}

}  // namespace floodgate::server::detail
