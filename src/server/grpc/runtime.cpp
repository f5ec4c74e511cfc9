// The gRPC library held for the serve command's life, its threads waited for at the end.
#include "server/grpc/runtime.hpp"

#include <grpc/grpc.h>
#include <openssl/crypto.h>
#include <openssl/ssl.h>

namespace floodgate::server {

GrpcRuntime::GrpcRuntime() {
  // Before any TLS use: OpenSSL registers no exit handler that would free its locks under a
  // thread still in a handshake.
  OPENSSL_init_ssl(OPENSSL_INIT_NO_ATEXIT | OPENSSL_INIT_LOAD_SSL_STRINGS | OPENSSL_INIT_LOAD_CRYPTO_STRINGS,
                   nullptr);
  grpc_init();
}

// The last reference (every channel, server and stream is gone by now): gRPC cleans up at once
// and returns when its background threads have exited.
GrpcRuntime::~GrpcRuntime() { grpc_shutdown_blocking(); }

}  // namespace floodgate::server
