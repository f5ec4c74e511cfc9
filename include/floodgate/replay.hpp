// floodgate/replay.hpp — run a JSONL trace through a policy on a manual clock.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "floodgate/policy.hpp"
#include "floodgate/storage.hpp"

namespace floodgate {

/// Reads one request per line from `in`:
///
///     {"t": <seconds since epoch, number ≥ 0, non-decreasing>, "key": "<string>", "cost": <int ≥ 0>}
///
/// (`cost` defaults to 1; other fields are ignored; blank lines are skipped) and writes one decision
/// per request to `out`, in order, flushed line by line. A line may reserve and settle
/// (docs/algorithms.md, "Reservations"):
///
///     {"t": 10, "key": "u", "cost": 100, "reservation": "r1", "ttl_ms": 60000}   a reservation
///     {"t": 12, "key": "u", "reservation": "r1", "actual": 130}                  its settle
///
/// (a settle may also say `"settle": true`); a settle's decision is the state after it. Under a
/// concurrency policy a reservation is a lease and its settle releases it; the release of a lease
/// that is not outstanding prints `{"allowed": false, "not_outstanding": true}`.
///
///     {"allowed": true, "remaining": 2, "retry_after": 0.0, "reset_after": 4.0}
///
/// with `"delay"` appended when the policy shapes. `retry_after` is `null` when the request can
/// never be allowed. Times are rounded to the microsecond.
///
/// Errors: InvalidArgument "line N: <problem>" for the first malformed line; every line before it
/// has been answered. A storage error stops the run likewise.
absl::Status replay(const Policy& policy, Storage& storage, std::istream& in, std::ostream& out);

/// The storage URL a replay runs on: the trace's times are the clock, so a Redis URL
/// (redis://, redis+unix://, redis-cluster://) gets `clock=client` when it names no clock.
/// Errors: InvalidArgument for a malformed URL, or one that asks for `clock=redis` (the server's
/// clock would ignore the trace's times).
absl::StatusOr<std::string> replay_storage_url(std::string_view url);

}  // namespace floodgate
