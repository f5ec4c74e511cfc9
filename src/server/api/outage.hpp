// A fail-closed policy's answer while its storage fails: an outage, not the tenant's excess.
#pragma once

#include <string>

#include "floodgate/decision.hpp"
#include "server/api/responses.hpp"

namespace floodgate::server {

/// The response header that names an outage where the status cannot (Envoy's answer to
/// OVER_LIMIT is its rate-limit filter's status, 429 by default).
inline constexpr const char* kOutageHeader = "X-Floodgate-Outage";
inline constexpr const char* kOutageValue = "storage-unavailable";

/// Whether `d` refuses a request because the storage failed (the policy fails closed), not because
/// a limit is reached.
[[nodiscard]] inline bool is_outage(const Decision& d) noexcept { return d.degraded && !d.allowed; }

/// The status of an answer that does not let the request through: `outage_status` (the
/// configuration's, 503 by default) for an outage, else `denied_status` (429, or /v1/auth's
/// auth_denied_status).
[[nodiscard]] inline http::status refusal_status(const Decision& d, int denied_status, int outage_status) noexcept {
  return static_cast<http::status>(is_outage(d) ? outage_status : denied_status);
}

/// Marks an answer that refuses a request for an outage with kOutageHeader: on `res`, or as a
/// header line appended to `lines` when given (the server's pre-rendered header block).
inline void mark_outage(Response& res, std::string* lines) {
  if (lines == nullptr) {
    res.set(kOutageHeader, kOutageValue);
  } else {
    *lines += std::string(kOutageHeader) + ": " + kOutageValue + "\r\n";
  }
}

}  // namespace floodgate::server
