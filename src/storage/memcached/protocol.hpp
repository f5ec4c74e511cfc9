// The memcached storage's logic without sockets, unit-tested without a server: URL options, the
// key of a (policy, user key), the value that holds a key's states, and its expiry.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "floodgate/algorithms.hpp"
#include "floodgate/policy.hpp"
#include "storage/url.hpp"

namespace floodgate::memcached {

/// One memcached server.
struct Server {
  std::string host;
  int port = 11211;
  [[nodiscard]] std::string name() const;  ///< "host:port" ("[v6]:port")
};

/// Options of a memcached storage, from its URL (`?name=value&…`). Every default is safe and
/// non-zero.
struct MemcachedOptions {
  std::vector<Server> servers;  ///< keys spread over them by consistent hashing (ketama)
  /// `connect_timeout_ms`: how long one connection attempt may take.
  std::chrono::milliseconds connect_timeout{200};
  /// `timeout_ms`: how long one operation may wait for the server; then it fails
  /// (DeadlineExceeded) and the connection is dropped.
  std::chrono::milliseconds timeout{50};
  /// `pool`: client handles (each with a connection to every server), fixed; a caller waits up
  /// to `timeout` for a free one.
  std::size_t pool = 8;
  /// `prefix`: the start of every key floodgate writes: printable ASCII without spaces, at most
  /// kMaxPrefix bytes.
  std::string prefix = "floodgate:";
  /// `cas_retries`: compare-and-swap attempts per decision before it fails (Aborted: the caller's
  /// fail mode) because other clients kept changing the key.
  int cas_retries = 64;
  /// `ttl_slack_ms`: added to every value's expiry (rounded up to whole seconds, as memcached
  /// counts): absorbs memcached's one-second clock and clients whose clocks differ a little.
  std::chrono::milliseconds ttl_slack{2000};
  /// `item_size_max`: the server's item size limit (memcached -I, default 1 MiB). A policy whose
  /// largest value (the moving window's log) would not fit is refused (InvalidArgument).
  std::size_t item_size_max = 1024 * 1024;
  /// `breaker_failures`, `breaker_cooldown_ms`, `backoff_min_ms`, `backoff_max_ms`: per server,
  /// as for Redis (docs/redis.md).
  int breaker_failures = 5;
  std::chrono::milliseconds breaker_cooldown{500};
  std::chrono::milliseconds backoff_min{10};
  std::chrono::milliseconds backoff_max{1000};
};

inline constexpr std::size_t kMaxPrefix = 120;

/// Parses memcached://host[:port][,host[:port]…][?options]; nullopt for another scheme.
/// Errors: InvalidArgument naming the URL and the problem.
std::optional<absl::StatusOr<MemcachedOptions>> parse_memcached_url(const StorageUrl& url);

/// The memcached key of the state of `key` under `policy`:
///     prefix + 64 hex digits of SHA-256(be64(|state id|) · state id · key)
/// The input to the hash is an injective encoding of (Policy::state_id, user key), so two pairs
/// share a value only if SHA-256 collides. At most kMaxPrefix + 64 bytes, all printable.
std::string storage_key(std::string_view prefix, const Policy& policy, std::string_view key);
/// The key of reservation `id` of (policy, key): prefix + "r" + SHA-256 of the length-prefixed
/// state id, key and id, in hex (memcached keys are at most 250 bytes).
std::string reservation_key(std::string_view prefix, const Policy& policy, std::string_view key, std::string_view id);

/// The `flags` memcached stores with every value floodgate writes ("FG" and the format version).
inline constexpr std::uint32_t kValueFlags = 0x46470002;

/// The value of a key: its states, one per limit of the policy, and the algorithm they belong to.
/// Layout (little-endian): 'F' 'G' <algorithm> <limit count>, then per limit
///   fixed windows: start, count (int64 each); sliding window: start, current, previous;
///   buckets: tat (int128 as low, high 64 bits), the amount it is scaled by (int64);
///   moving window: total (int64), n (uint32), then n × (at, count) (int64 each).
/// A value that is not exactly this (another writer, a policy changed in place) does not decode.
template <class S>
void encode(const S* states, std::size_t count, std::string& out);
template <class S>
bool decode(std::string_view value, S* states, std::size_t count);

/// The largest value a policy can need (the moving window's log at its bound: one entry per unit
/// of the amount).
std::size_t max_value_size(const Policy& policy);

/// InvalidArgument when the policy's largest value would not fit in an item of `item_size_max`
/// bytes (with room for the key and memcached's item header).
absl::Status check_policy(const Policy& policy, std::size_t item_size_max);

/// memcached's expiration for a value that must live `ttl` from `wall_now` (seconds since the
/// epoch by the machine's wall clock): relative seconds up to 30 days; beyond, an absolute Unix
/// time (memcached reads larger numbers so), capped at 2^31 − 1. Always ≥ 1 (0 = never expires).
std::uint32_t expiration(std::chrono::seconds ttl, std::int64_t wall_now);

/// How long a value written at `now` (decision time) must live: until its states all equal
/// "absent" (`absent_from`), plus the slack, in whole seconds rounded up, and one more second for
/// memcached's clock, which ticks once a second.
std::chrono::seconds time_to_live(Micros absent_from, Micros now, std::chrono::milliseconds slack);

inline constexpr std::int64_t kRelativeLimit = 60 * 60 * 24 * 30;  // memcached's 30 days

}  // namespace floodgate::memcached
