// TLS over a TCP socket with GnuTLS, as an Asio stream (the HTTPS server's connections).
#include "server/net/tls_stream.hpp"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <new>

#include <boost/asio/ssl/error.hpp>
#include <fmt/format.h>

namespace floodgate::server::detail {

namespace asio = boost::asio;
namespace beast = boost::beast;

namespace {

class GnutlsCategory final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "gnutls"; }
  std::string message(int ev) const override { return gnutls_strerror(-ev); }
};

absl::Status refused(std::string_view what, int code) {
  return absl::InvalidArgumentError(fmt::format("{}: {}", what, gnutls_strerror(code)));
}

gnutls_datum_t datum(const std::string& text) {
  return {reinterpret_cast<unsigned char*>(const_cast<char*>(text.data())), static_cast<unsigned>(text.size())};
}

// A client certificate, when one is required: it must verify against the client CA (GnuTLS asks
// for one and refuses a handshake without it itself).
int verify_client(gnutls_session_t session) {
  unsigned status = 0;
  if (gnutls_certificate_verify_peers2(session, &status) < 0 || status != 0) return GNUTLS_E_CERTIFICATE_ERROR;
  return 0;
}

}  // namespace

const boost::system::error_category& gnutls_category() noexcept {
  static const GnutlsCategory category;
  return category;
}

// TLS 1.2 and 1.3 with AEAD ciphers only, in the server's order, AES-128-GCM first (the clients'
// usual first choice, AES-256-GCM, does 14 AES rounds where it does 10); ChaCha20 still for a
// client without AES instructions. GnuTLS refuses a TLS 1.2 client's renegotiation by default
// (gnutls_record_recv reports it, and the connection ends: TlsStream::classify).
absl::StatusOr<std::shared_ptr<const TlsServerContext>> TlsServerContext::create(const std::string& cert_chain,
                                                                                const std::string& key,
                                                                                const std::string& client_ca) {
  std::shared_ptr<TlsServerContext> c(new TlsServerContext());
  if (const int r = gnutls_certificate_allocate_credentials(&c->credentials_); r < 0) throw std::bad_alloc();
  const gnutls_datum_t cert = datum(cert_chain);
  const gnutls_datum_t k = datum(key);
  if (const int r = gnutls_certificate_set_x509_key_mem2(c->credentials_, &cert, &k, GNUTLS_X509_FMT_PEM, nullptr, 0);
      r < 0) {
    return refused("the certificate and key", r);
  }
  if (!client_ca.empty()) {
    const gnutls_datum_t ca = datum(client_ca);
    const int r = gnutls_certificate_set_x509_trust_mem(c->credentials_, &ca, GNUTLS_X509_FMT_PEM);
    if (r <= 0) return refused("the client CA", r == 0 ? GNUTLS_E_NO_CERTIFICATE_FOUND : r);
    gnutls_certificate_set_verify_function(c->credentials_, verify_client);
    c->mutual_ = true;
  }
  const char* priorities =
      "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305:"
      "%SERVER_PRECEDENCE";
  if (const int r = gnutls_priority_init(&c->priorities_, priorities, nullptr); r < 0) return refused("priorities", r);
  if (const int r = gnutls_session_ticket_key_generate(&c->ticket_key_); r < 0) return refused("ticket key", r);
  return std::shared_ptr<const TlsServerContext>(std::move(c));
}

TlsServerContext::~TlsServerContext() {
  if (ticket_key_.data != nullptr) {
    gnutls_memset(ticket_key_.data, 0, ticket_key_.size);
    gnutls_free(ticket_key_.data);
  }
  if (priorities_ != nullptr) gnutls_priority_deinit(priorities_);
  if (credentials_ != nullptr) gnutls_certificate_free_credentials(credentials_);
}

int TlsServerContext::configure(gnutls_session_t session) const {
  int r = gnutls_priority_set(session, priorities_);
  if (r >= 0) r = gnutls_credentials_set(session, GNUTLS_CRD_CERTIFICATE, credentials_);
  if (r >= 0) r = gnutls_session_ticket_enable_server(session, &ticket_key_);
  if (r >= 0 && mutual_) gnutls_certificate_server_set_request(session, GNUTLS_CERT_REQUIRE);
  return r;
}

// GnuTLS's side of the stream: reads take the bytes the stream read from the socket (none left:
// EAGAIN, and the stream reads the socket), writes go to the socket with sendmsg(2) (would block:
// EAGAIN, and the stream waits until it can write). MSG_NOSIGNAL: a peer gone is an error, not
// SIGPIPE.
struct TlsTransport {
  static ssize_t pull(gnutls_transport_ptr_t p, void* out, std::size_t len) {
    auto& s = *static_cast<TlsStream*>(p);
    if (s.input_empty()) {
      if (s.eof_) return 0;
      gnutls_transport_set_errno(s.session_, EAGAIN);
      return -1;
    }
    const std::size_t n = std::min(len, s.in_end_ - s.in_begin_);
    std::memcpy(out, s.in_.get() + s.in_begin_, n);
    s.in_begin_ += n;
    return static_cast<ssize_t>(n);
  }

  static ssize_t push(gnutls_transport_ptr_t p, const giovec_t* iov, int count) {
    auto& s = *static_cast<TlsStream*>(p);
    msghdr m{};
    m.msg_iov = const_cast<iovec*>(reinterpret_cast<const iovec*>(iov));
    m.msg_iovlen = static_cast<std::size_t>(count);
    const ssize_t n = ::sendmsg(s.socket_.native_handle(), &m, MSG_NOSIGNAL);
    if (n >= 0) return n;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      gnutls_transport_set_errno(s.session_, EAGAIN);
    } else {
      s.send_errno_ = errno;
      gnutls_transport_set_errno(s.session_, errno);
    }
    return -1;
  }

  // Whether a read would find bytes (GnuTLS asks during TLS 1.3 handshakes); never waits.
  static int pull_timeout(gnutls_transport_ptr_t p, unsigned) {
    const auto& s = *static_cast<TlsStream*>(p);
    return s.input_empty() && !s.eof_ ? 0 : 1;
  }
};

static_assert(sizeof(giovec_t) == sizeof(iovec) && offsetof(giovec_t, iov_len) == offsetof(iovec, iov_len));

TlsStream::TlsStream(asio::ip::tcp::socket socket, const TlsServerContext& ctx)
    : socket_(std::move(socket)), in_(new unsigned char[kInput]), deadline_(socket_) {
  if (gnutls_init(&session_, GNUTLS_SERVER | GNUTLS_NONBLOCK | GNUTLS_NO_SIGNAL) < 0) throw std::bad_alloc();
  if (ctx.configure(session_) < 0) {
    gnutls_deinit(session_);
    throw std::bad_alloc();
  }
  gnutls_transport_set_ptr(session_, this);
  gnutls_transport_set_pull_function(session_, TlsTransport::pull);
  gnutls_transport_set_vec_push_function(session_, TlsTransport::push);
  gnutls_transport_set_pull_timeout_function(session_, TlsTransport::pull_timeout);
  gnutls_handshake_set_timeout(session_, 0);  // the stream's own deadline bounds the handshake
  boost::system::error_code ignored;
  socket_.non_blocking(true, ignored);  // sendmsg(2) in TlsTransport::push must not block
}

TlsStream::~TlsStream() { gnutls_deinit(session_); }

TlsStream::Next TlsStream::classify(int r, beast::error_code& ec) {
  switch (r) {
    case 0:
      return Next::kDone;
    case kPeerClosed:
      ec = asio::error::eof;  // their close_notify
      return Next::kFail;
    case GNUTLS_E_AGAIN:
    case GNUTLS_E_INTERRUPTED:
      return gnutls_record_get_direction(session_) == 0 ? Next::kRead : Next::kWrite;
    case GNUTLS_E_WARNING_ALERT_RECEIVED:
      return Next::kAgain;
    case GNUTLS_E_PREMATURE_TERMINATION:
      ec = asio::ssl::error::stream_truncated;  // the socket ended without close_notify
      return Next::kFail;
    case GNUTLS_E_PUSH_ERROR:
      if (send_errno_ != 0) {
        ec = beast::error_code(send_errno_, asio::error::get_system_category());
        return Next::kFail;
      }
      break;
    default:
      break;
  }
  ec = beast::error_code(-r, gnutls_category());
  return Next::kFail;
}

}  // namespace floodgate::server::detail
