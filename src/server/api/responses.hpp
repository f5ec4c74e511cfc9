// Building the HTTP API's responses: status, content type, JSON bodies and the rate-limit headers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <boost/beast/http.hpp>

#include "absl/status/status.h"
#include "floodgate/decision.hpp"
#include "floodgate/policy.hpp"

namespace floodgate::server {

namespace http = boost::beast::http;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

/// Sets status, Content-Type and body (and Content-Length).
void respond(Response& res, http::status status, std::string body,
             std::string_view content_type = "application/json");
/// A response without a body: Content-Length: 0, except for a status that never has a body (1xx,
/// 204), which carries no Content-Length (RFC 9110 §8.6: a server must not send one) and no
/// Transfer-Encoding. (Beast's prepare_payload sets Content-Length: 0 on a 204.)
void respond_empty(Response& res, http::status status);
/// A JSON error body: {"error": "<message>"}.
void respond_error(Response& res, http::status status, std::string_view message);
/// The same with an error's message.
void respond_error(Response& res, http::status status, const absl::Status& error);

/// For the route functions: the error answered, so false (no decision is needed).
inline bool fail(Response& res, http::status status, std::string_view message) {
  respond_error(res, status, message);
  return false;
}
inline bool fail(Response& res, http::status status, const absl::Status& error) {
  respond_error(res, status, error);
  return false;
}

/// Between Beast's and abseil's string views and the standard's.
inline std::string_view sv(boost::beast::string_view s) { return {s.data(), s.size()}; }
inline absl::string_view av(std::string_view s) { return {s.data(), s.size()}; }

/// `t` (seconds since the epoch) as an HTTP-date, IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT".
std::string format_http_date(std::int64_t t);
/// The Date field's value for an answer sent now (RFC 9110 §6.6.1: an origin server with a clock
/// sends one in every 2xx, 3xx and 4xx answer): formatted once a second per thread, from the
/// coarse realtime clock (at most a tick behind).
std::string_view http_date_now();

/// A settle's outcome as the HTTP API names it: "settled", "unknown", "already_settled".
[[nodiscard]] std::string_view settle_outcome_name(SettleOutcome outcome) noexcept;

/// The JSON body of a decision (docs/http-api.md): allowed, limit, remaining, reset_after,
/// retry_after, delay, policy, degraded, shadow_denied, `limits` (every limit of the policy with
/// its own remaining and reset); a settle's `reservation` (what happened to its id); an `error`
/// when a fail-closed policy's storage failed.
[[nodiscard]] std::string decision_json(const Policy& policy, const Decision& d, bool shadow_denied);

/// RateLimit-Policy, RateLimit, X-RateLimit-* and Retry-After (not for a shadow denial, which
/// lets the request through).
void set_rate_limit_headers(Response& res, const Policy& policy, const Decision& d, bool shadow);
/// The same headers as lines of an HTTP header block ("Name: value\r\n" each), appended to
/// `lines`: for the HTTP server, which writes them straight into its answer (a field of `res`
/// costs an allocation and a tree insertion; these five are on every decision's answer).
void append_rate_limit_headers(std::string& lines, const Policy& policy, const Decision& d, bool shadow);

}  // namespace floodgate::server
