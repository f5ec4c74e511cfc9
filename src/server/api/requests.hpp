// Parsing the HTTP API's requests: pure functions from text to values, with the message a client
// gets in its 400 (tested in-process by service_test).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "floodgate/replay.hpp"
#include "floodgate/sim/concurrency.hpp"
#include "floodgate/sim/simulate.hpp"

namespace floodgate::server {

/// The longest user key any endpoint accepts, in bytes.
inline constexpr std::size_t kMaxKeyBytes = 1024;

/// The path of a request target, without its query ("/v1/auth?policy=a" → "/v1/auth").
[[nodiscard]] std::string_view path_of(std::string_view target);

/// Percent- and '+'-decoding of a query component; a '%' not followed by two hex digits is kept.
[[nodiscard]] std::string url_decode(std::string_view s);

/// The decoded value of query parameter `name` in a target ("/v1/auth?policy=api&key=a%20b"),
/// nullopt if absent.
[[nodiscard]] std::optional<std::string> query_param(std::string_view target, std::string_view name);

/// The body of POST /v1/hit and /v1/test.
struct DecisionBody {
  std::string key;
  std::int64_t cost = 1;
  std::optional<std::string> policy;  ///< a configured policy, or else:
  std::string limit;                  ///< an inline limit ("10/minute")
  std::string strategy = "gcra";      ///< its strategy
  std::int64_t burst = 0;             ///< its burst (0: the amount)
  /// A reservation (POST /v1/hit only): its id, and its time to live in ms.
  std::optional<std::string> reservation;
  std::int64_t ttl_ms = 0;  ///< 0: the default
};
/// Errors: InvalidArgument with the client's message (not JSON, missing or empty key, a key over
/// kMaxKeyBytes, cost outside [0, 2^53], neither policy nor limit, wrong types, a reservation id
/// that is empty or longer than 256 bytes, ttl_ms outside [1, 86,400,000] or without a
/// reservation).
absl::StatusOr<DecisionBody> parse_decision_body(std::string_view body);

/// The body of POST /v1/settle: the policy (or inline limit) and key as for /v1/hit, the
/// "reservation" id and the "actual" usage (a whole number from 0 to 2^53), both required; `cost`
/// holds the actual usage.
/// Errors: InvalidArgument naming the field; nothing is charged.
absl::StatusOr<DecisionBody> parse_settle_body(std::string_view body);

/// The body of POST /v1/release and /v1/renew: /v1/hit's policy (or inline limit) and key, and
/// the lease's "reservation" id (required); no "cost", "actual" or "ttl_ms" (a lease has its
/// own). `cost` is 0.
/// Errors: InvalidArgument naming the field.
absl::StatusOr<DecisionBody> parse_lease_body(std::string_view body);

/// `?policy=NAME&key=KEY` of GET /v1/stats and DELETE /v1/keys.
struct KeyQuery {
  std::string policy;
  std::string key;
};
/// Errors: InvalidArgument (a missing or empty parameter, a key over kMaxKeyBytes).
absl::StatusOr<KeyQuery> parse_key_query(std::string_view target);

/// A key taken from a header or query parameter: non-empty and at most kMaxKeyBytes. `what` names
/// where it came from in the error.
absl::Status check_key(std::string_view key, std::string_view what);

/// The longest lease time to live POST /v1/simulate's concurrency lane takes ("lease_ttl_ms"): a
/// day, as /v1/hit's "ttl_ms".
inline constexpr std::int64_t kMaxSimLeaseTtlMs = 86'400'000;
/// Its lease time to live when none is given: 60 s, as the limit notation "N concurrent".
inline constexpr std::int64_t kDefaultSimLeaseTtlMs = 60'000;

/// The concurrency lane of POST /v1/simulate: "concurrency": {"limit": N, "lease_ttl_ms": T,
/// "duration_ms": D}, and a "duration_ms" per request of the trace (D when absent).
struct SimulateConcurrency {
  ConcurrencyOptions options;   ///< limit, lease_ttl and default_duration in µs (−1: no D)
  std::vector<Micros> durations;  ///< one per request, µs; −1 where the request gave none
};

/// The body of POST /v1/simulate: the algorithm lanes ("limit", "burst", "strategies", "origin")
/// and/or the concurrency lane ("concurrency"), over one "trace".
struct SimulateBody {
  SimulateOptions options;
  bool rate_lanes = true;  ///< "limit" was given: the algorithm lanes run
  std::optional<SimulateConcurrency> concurrency;
  std::vector<TraceEvent> trace;
  std::size_t from = 0;  ///< decisions before this index are computed but not returned
};
/// "limit" is required unless "concurrency" is given ("burst" and "strategies" then need it too).
/// Errors: InvalidArgument naming the field (and the trace index of a bad request): among others
/// N outside [1, 2^53], "lease_ttl_ms" outside [1, 86,400,000], a duration outside
/// [0, 82,800,000] ms (23 hours), a request without a duration when there is no
/// "concurrency.duration_ms", an unknown field of "concurrency".
absl::StatusOr<SimulateBody> parse_simulate_body(std::string_view body);

}  // namespace floodgate::server
