// Messages of the libraries the service links (protobuf, gRPC) through our logger, rate-limited.
#pragma once

#include <cstdint>
#include <string_view>

namespace floodgate::server {

/// Routes protobuf's and gRPC's log messages to spdlog, at most `per_second` lines a second (the
/// rest are counted, and a line says how many were suppressed): a client that sends malformed
/// requests cannot flood the log. Idempotent; call once at start-up.
void route_library_logs(std::uint32_t per_second = 10);

/// The rate limit alone (route_library_logs sets it and installs the handlers).
void set_library_log_rate(std::uint32_t per_second) noexcept;

/// Library lines suppressed so far by the rate limit (floodgate_library_log_suppressed_total).
[[nodiscard]] std::uint64_t library_log_suppressed() noexcept;

/// gRPC's TLS handshakes that failed (floodgate_grpc_tls_handshake_failures_total). gRPC 1.51
/// has no callback for them; its one report of each is an error line of its log ("Handshake failed
/// with fatal error …", from its ssl_transport_security.cc), which the gRPC log handler counts
/// here before the rate limit.
void count_grpc_tls_handshake_failure() noexcept;
[[nodiscard]] std::uint64_t grpc_tls_handshake_failures() noexcept;

/// One library line through the rate limit (what the handlers call; exposed for tests).
/// Returns whether it was written.
bool library_log(int spdlog_level, std::string_view source, std::string_view message);

}  // namespace floodgate::server
