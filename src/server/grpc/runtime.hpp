// The gRPC library's lifetime in `floodgate serve`: held from the start, released after every
// channel and server is gone, and then gRPC's own threads are waited for, so that none of them
// still runs while the process exits.
#pragma once

namespace floodgate::server {

/// One per process, the first object of the serve command (destroyed last). Without it an xDS
/// connection attempt still under way in gRPC's threads met OpenSSL torn down by exit's handlers:
/// a crash (or, under the sanitizers, a hang) after a clean SIGTERM. It also keeps OpenSSL's state
/// until the process ends (OPENSSL_INIT_NO_ATEXIT) for threads no library lets us join.
class GrpcRuntime {
 public:
  GrpcRuntime();
  ~GrpcRuntime();
  GrpcRuntime(const GrpcRuntime&) = delete;
  GrpcRuntime& operator=(const GrpcRuntime&) = delete;
};

}  // namespace floodgate::server
