#include "storage/redis/tls.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace floodgate::redis::detail {

namespace {

std::string ssl_reason() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "connection closed";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

void set_error(redisContext* c, int type, const std::string& what) {
  c->err = type;
  std::snprintf(c->errstr, sizeof c->errstr, "%s", what.c_str());
}

}  // namespace

absl::StatusOr<std::shared_ptr<SSL_CTX>> make_tls_context(const TlsOptions& tls) {
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  if (!ctx) return absl::InternalError("TLS: cannot create a context: " + ssl_reason());
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx.get(), tls.insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, nullptr);
  const int loaded = tls.ca_file.empty() ? SSL_CTX_set_default_verify_paths(ctx.get())
                                         : SSL_CTX_load_verify_locations(ctx.get(), tls.ca_file.c_str(), nullptr);
  if (loaded != 1) {
    return absl::InvalidArgumentError(fmt::format("TLS: tls_ca_file {}: {}", tls.ca_file, ssl_reason()));
  }
  if (!tls.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx.get(), tls.cert_file.c_str()) != 1) {
      return absl::InvalidArgumentError(fmt::format("TLS: tls_cert_file {}: {}", tls.cert_file, ssl_reason()));
    }
    const std::string& key = tls.key_file.empty() ? tls.cert_file : tls.key_file;
    if (SSL_CTX_use_PrivateKey_file(ctx.get(), key.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx.get()) != 1) {
      return absl::InvalidArgumentError(fmt::format("TLS: tls_key_file {}: {}", key, ssl_reason()));
    }
  }
  return ctx;
}

absl::StatusOr<SSL*> tls_handshake(redisContext* c, SSL_CTX* ctx, const std::string& server_name,
                                   bool verify_name) {
  SSL* ssl = SSL_new(ctx);
  if (ssl == nullptr) return absl::UnavailableError("TLS: " + ssl_reason());
  SSL_set_fd(ssl, c->fd);
  const bool ip = server_name.find_first_not_of("0123456789.") == std::string::npos ||
                  server_name.find(':') != std::string::npos;
  if (!ip) SSL_set_tlsext_host_name(ssl, server_name.c_str());  // SNI takes names, not addresses
  if (verify_name && SSL_get_verify_mode(ssl) != SSL_VERIFY_NONE) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    const int set = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, server_name.c_str())
                       : X509_VERIFY_PARAM_set1_host(param, server_name.c_str(), 0);
    if (set != 1) {
      SSL_free(ssl);
      return absl::UnavailableError(fmt::format("TLS: bad server name \"{}\"", server_name));
    }
  }
  ERR_clear_error();
  if (SSL_connect(ssl) != 1) {
    std::string why = ssl_reason();
    const long verify = SSL_get_verify_result(ssl);
    if (verify != X509_V_OK) why += fmt::format(" ({})", X509_verify_cert_error_string(verify));
    SSL_free(ssl);
    return absl::UnavailableError("TLS handshake failed: " + why);
  }
  return ssl;
}

int flush_commands(redisContext* c, SSL* ssl, std::string& out) {
  if (ssl == nullptr) {
    // The flight's commands go to hiredis's buffer in one piece; hiredis writes them.
    if (!out.empty()) {
      if (redisAppendFormattedCommand(c, out.data(), out.size()) != REDIS_OK) return REDIS_ERR;
      out.clear();
    }
    int done = 0;
    int rc = REDIS_OK;
    while (rc == REDIS_OK && done == 0) rc = redisBufferWrite(c, &done);
    return rc;
  }
  std::size_t at = 0;
  while (at < out.size()) {
    ERR_clear_error();
    const int n = SSL_write(ssl, out.data() + at, static_cast<int>(out.size() - at));
    if (n <= 0) {
      const int saved = errno;
      set_error(c, REDIS_ERR_IO, "TLS write: " + ssl_reason());
      errno = saved;
      return REDIS_ERR;
    }
    at += static_cast<std::size_t>(n);
  }
  out.clear();
  return REDIS_OK;
}

int get_reply(redisContext* c, SSL* ssl, void** reply) {
  if (ssl == nullptr) return redisGetReply(c, reply);
  *reply = nullptr;
  while (true) {
    if (redisGetReplyFromReader(c, reply) != REDIS_OK) return REDIS_ERR;
    if (*reply != nullptr) return REDIS_OK;
    char buf[16 * 1024];
    ERR_clear_error();
    errno = 0;
    const int n = SSL_read(ssl, buf, sizeof buf);
    if (n <= 0) {
      const int saved = errno;
      const int code = SSL_get_error(ssl, n);
      const bool again = code == SSL_ERROR_WANT_READ || code == SSL_ERROR_WANT_WRITE;  // SO_RCVTIMEO
      set_error(c, code == SSL_ERROR_ZERO_RETURN ? REDIS_ERR_EOF : REDIS_ERR_IO,
                code == SSL_ERROR_ZERO_RETURN ? "Server closed the connection"
                : again                       ? "TLS read: Resource temporarily unavailable"
                                              : "TLS read: " + ssl_reason());
      errno = saved;
      return REDIS_ERR;
    }
    if (redisReaderFeed(c->reader, buf, static_cast<std::size_t>(n)) != REDIS_OK) {
      set_error(c, c->reader->err, c->reader->errstr);
      return REDIS_ERR;
    }
  }
}

}  // namespace floodgate::redis::detail
