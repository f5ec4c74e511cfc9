// Who may use the admin endpoints (DELETE /v1/keys, POST /v1/simulate, GET /v1/live): a bearer
// token, compared in constant time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace floodgate::server {

struct Config;

/// The outcome of checking a request's `Authorization` field against the configured token.
enum class AdminAuth : std::uint8_t {
  kGranted,        ///< `Bearer <token>` with the configured token
  kMissing,        ///< no Authorization field, or another scheme
  kWrong,          ///< a bearer token that is not the configured one
  kNotConfigured,  ///< no token is configured: the admin endpoints are refused to everyone
};

/// The environment variable that holds the admin token (it wins over `admin.token_file`).
inline constexpr const char* kAdminTokenEnv = "FLOODGATE_ADMIN_TOKEN";
/// The shortest token accepted, in bytes (a guessable token is refused at start).
inline constexpr std::size_t kMinAdminTokenBytes = 16;
inline constexpr std::size_t kMaxAdminTokenBytes = 4096;

/// Checks `authorization` (the whole field value, empty when absent) against `token` (empty when
/// none is configured). The scheme "Bearer" is matched without regard to case (RFC 9110 §11.1).
/// Constant time: the SHA-256 digests of both tokens are compared with CRYPTO_memcmp, so neither
/// the content nor the length of the configured token shows in the time taken.
/// Thread-safety: pure.
AdminAuth check_admin(std::string_view authorization, std::string_view token) noexcept;

/// A token the service accepts: kMinAdminTokenBytes to kMaxAdminTokenBytes of RFC 6750's
/// b64token characters (letters, digits, "-._~+/", trailing "="). Errors: InvalidArgument.
absl::Status check_admin_token(std::string_view token);

/// Sets `config.admin.token` from FLOODGATE_ADMIN_TOKEN when set and not empty, else from the
/// file `config.admin.token_file` (its first line; surrounding white space dropped), else leaves
/// it empty. Errors: InvalidArgument naming the source (unreadable file, invalid token).
absl::Status resolve_admin_token(Config& config);

}  // namespace floodgate::server
