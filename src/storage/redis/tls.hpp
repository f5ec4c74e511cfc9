// TLS to Redis (rediss://): Debian 12's hiredis 0.14 has no TLS, so a TLS connection is a hiredis
// context whose socket carries an OpenSSL session. hiredis still parses the replies
// (redisReaderFeed/redisGetReplyFromReader); only the bytes go through SSL_write/SSL_read. A plain
// connection (ssl == nullptr) uses hiredis's own I/O. Commands are formatted by append_resp
// (protocol.hpp) for both.
#pragma once

#include <hiredis/hiredis.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "storage/redis/protocol.hpp"

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

namespace floodgate::redis::detail {

/// The client side of TLS for one storage, from its URL's tls_* options: peer verification on
/// (the CA file, else the system store) unless `tls_insecure=true`; a client certificate and key
/// when given. Errors: InvalidArgument naming the unreadable or invalid file.
absl::StatusOr<std::shared_ptr<SSL_CTX>> make_tls_context(const TlsOptions& tls);

/// Runs the TLS handshake on `c`'s connected socket: SNI and (with `verify_name`) the host-name
/// check against `server_name` (the URL's tls_server_name, else the host). Errors: Unavailable with OpenSSL's
/// reason ("certificate verify failed", …).
absl::StatusOr<SSL*> tls_handshake(redisContext* c, SSL_CTX* ctx, const std::string& server_name,
                                   bool verify_name);

/// Writes the commands appended to `out` (append_resp): plain, through hiredis's buffer and its
/// writes; TLS, with SSL_write.
/// REDIS_OK or REDIS_ERR (c->err/errstr set; errno kept).
int flush_commands(redisContext* c, SSL* ssl, std::string& out);
/// The next reply, reading as needed. REDIS_OK or REDIS_ERR, as redisGetReply.
int get_reply(redisContext* c, SSL* ssl, void** reply);

}  // namespace floodgate::redis::detail
