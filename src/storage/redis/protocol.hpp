// The Redis storage's protocol logic, free of sockets so that it is unit-tested without a server:
// URL options, key names, cluster slots (CRC16 with hash tags), MOVED/ASK, the CLUSTER SLOTS
// reply, the script arguments of a policy and the script's reply.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "floodgate/decision.hpp"
#include "floodgate/policy.hpp"
#include "storage/url.hpp"

struct redisReply;
struct ssl_ctx_st;

namespace floodgate::redis {

/// Where a Redis server listens: host and port, or a unix socket path.
struct Endpoint {
  std::string host;
  int port = 0;
  std::string unix_path;  ///< non-empty: a unix socket (host and port unused)

  /// "host:port" or the socket path; cluster nodes are named so.
  [[nodiscard]] std::string name() const;
  friend bool operator==(const Endpoint&, const Endpoint&) = default;
};

/// TLS to the servers: rediss:// and rediss-cluster:// (docs/redis.md, "TLS").
struct TlsOptions {
  bool enabled = false;
  std::string ca_file;      ///< `tls_ca_file`: PEM CA bundle; empty: the system store
  std::string cert_file;    ///< `tls_cert_file`: client certificate (PEM), for servers that ask
  std::string key_file;     ///< `tls_key_file`: its key (PEM); empty: in the certificate file
  std::string server_name;  ///< `tls_server_name`: SNI and the name checked; empty: the host
  bool insecure = false;    ///< `tls_insecure=true`: no verification of the server (tests only)
  /// `tls_verify_hostname=false`: the chain is verified, the name is not (a certificate whose name
  /// does not match, as GCP Memorystore's; envoyproxy's REDIS_TLS_SKIP_HOSTNAME_VERIFICATION).
  bool verify_hostname = true;
};

/// Options of a Redis storage, from its URL (`?name=value&…`). Every default is safe and non-zero.
struct RedisOptions {
  bool cluster = false;          ///< redis-cluster://: slot map, MOVED/ASK
  TlsOptions tls;                ///< rediss://, rediss-cluster://
  /// The TLS context built from `tls` (the RedisStorage constructor fills it); null without TLS,
  /// or when it could not be built: then `tls_context_error` says why (a CA file unreadable, …).
  std::shared_ptr<ssl_ctx_st> tls_context;
  std::string tls_context_error;
  std::vector<Endpoint> seeds;   ///< the one server, the cluster nodes to start from, or the sentinels
  /// redis+sentinel:// and rediss+sentinel:// (docs/redis.md, "Sentinel"): the name of the master
  /// the sentinels watch; `seeds` are then the sentinels. Empty: no Sentinel.
  std::string sentinel_master;
  std::string sentinel_user;      ///< `sentinel_user`: AUTH user on the sentinels, may be empty
  std::string sentinel_password;  ///< `sentinel_password`: AUTH on the sentinels; empty = none
  /// `sentinel_check_ms`: how often the sentinels are asked for the master besides after an error
  /// (the switch of a failover that broke no connection is seen within this time: until then a
  /// deposed master that is still writable takes the decisions, and Redis's asynchronous
  /// replication loses them). One SENTINEL command per period; ROLE only when the master changes.
  std::chrono::milliseconds sentinel_check{100};
  /// `sentinel_timeout_ms`: how long one command to a sentinel, and the ROLE check of the master
  /// they name, may take. Apart from `timeout_ms`, which bounds a decision: the sentinels are asked
  /// by the storage's own thread, never on a decision's path, and an answer that a loaded machine
  /// delays past a decision's timeout still says where the master is.
  std::chrono::milliseconds sentinel_timeout{500};
  std::string user;              ///< AUTH user (Redis 6 ACL), may be empty
  std::string password;          ///< AUTH password; empty = no AUTH
  int db = 0;                    ///< SELECT db (single server only; a cluster has only db 0)
  /// `connect_timeout_ms`: how long one connection attempt may take.
  std::chrono::milliseconds connect_timeout{200};
  /// `timeout_ms`: how long one command (or one pipelined batch's reply) may take; then the call
  /// fails (DeadlineExceeded) and the connection is dropped.
  std::chrono::milliseconds timeout{50};
  /// `pool`: connections per server, fixed: a caller waits (up to `timeout`) for a free one.
  std::size_t pool = 8;
  /// `prefix`: the start of every key floodgate writes. May not contain '{' or '}'.
  std::string prefix = "floodgate:";
  /// `key_layout=envoyproxy` (default `floodgate`): the gRPC service's fixed-window rules count in
  /// envoyproxy/ratelimit's keys (storage/envoyproxy_layout.hpp), so that its pods and floodgate's
  /// share one count during a rollout. Those keys are named by the caller's `now` (the service's
  /// clock, as envoyproxy names them by its pod's clock), not by the server's TIME.
  bool envoyproxy_keys = false;
  /// `envoyproxy_prefix`: envoyproxy's CACHE_KEY_PREFIX, before those keys (default empty, as
  /// there). Only with key_layout=envoyproxy.
  std::string envoyproxy_prefix;
  /// `clock=client`: use the caller's `now` (needed by `floodgate replay`); default `redis`: the
  /// server's TIME, read inside the script, so clients with skewed clocks share one timeline.
  bool client_clock = false;
  /// `scripts=functions` (default): the scripts run as one Redis 7 function library, loaded on
  /// each server when it first answers "Function not found", called with FCALL; where FCALL or
  /// FUNCTION LOAD is refused (Redis 6, an ACL), EVALSHA from then on. `scripts=eval`: EVALSHA
  /// always (docs/redis.md, "Scripts").
  bool functions = true;
  /// `client_ttl_slack_ms` (clock=client only): added to every key's TTL. Redis expires keys on
  /// its own clock; a caller whose clock runs slower (replay of a trace, a test) would otherwise
  /// find a state gone before it is "absent" in the caller's time. With the redis clock TTLs are
  /// exact and this is not used.
  std::chrono::milliseconds client_ttl_slack{60000};
  /// `breaker_failures`: consecutive failures of a server that open its circuit breaker.
  int breaker_failures = 5;
  /// `breaker_cooldown_ms`: how long an open breaker fails calls at once before trying again.
  std::chrono::milliseconds breaker_cooldown{500};
  /// `backoff_min_ms` / `backoff_max_ms`: reconnect backoff bounds (doubling, with jitter).
  std::chrono::milliseconds backoff_min{10};
  std::chrono::milliseconds backoff_max{1000};
};

/// Parses redis://[user:password@]host[:port][/db], redis+unix:///path/to/socket,
/// redis-cluster://host:port[,host:port…] and redis+sentinel://master-name@host:port[,host:port…][/db]
/// (the sentinels; the data nodes' credentials are the options `user` and `password`), each with
/// the options above as the query; rediss, rediss-cluster and rediss+sentinel with TLS.
/// Returns nullopt for another scheme. Errors: InvalidArgument naming the URL and the problem
/// (the password is never quoted back).
std::optional<absl::StatusOr<RedisOptions>> parse_redis_url(const StorageUrl& url);

/// Appends one command to `out` in RESP, as an array of bulk strings ("*argc\r\n", then
/// "$len\r\n" + the bytes + "\r\n" per argument): the bytes hiredis's redisFormatCommandArgv
/// makes, written straight into the pooled connection's buffer (a flight's commands in one
/// string) instead of through hiredis's sds, whose printf-like sdscatfmt was 8 % of a pipelining
/// client's time.
void append_resp(std::string& out, int argc, const char* const* argv, const std::size_t* lens);

/// CRC16 (XMODEM), as Redis Cluster hashes keys.
std::uint16_t crc16(std::string_view data) noexcept;

/// The cluster slot of a key: CRC16 of its hash tag (the text between the first '{' and the next
/// '}', if not empty) or of the whole key, mod 16384.
int key_slot(std::string_view key) noexcept;

/// The slot a call on `key` is routed by: key_slot in cluster mode; 0 on a single server or
/// Sentinel's master, which have no slots (and no CRC16 to pay per call).
inline int call_slot(const RedisOptions& o, std::string_view key) noexcept {
  return o.cluster ? key_slot(key) : 0;
}

inline constexpr int kSlots = 16384;

/// A MOVED or ASK error reply: "MOVED 3999 127.0.0.1:6381".
struct Redirect {
  bool ask = false;  ///< ASK (one command to the target, after ASKING); else MOVED
  int slot = 0;
  Endpoint target;
};
/// Parses a MOVED or ASK error; nullopt for any other text.
std::optional<Redirect> parse_redirect(std::string_view error);

/// One range of the CLUSTER SLOTS reply with its master.
struct SlotRange {
  int first = 0;
  int last = 0;
  Endpoint master;
};
/// Parses a CLUSTER SLOTS reply. A master announced with an empty host is at `fallback_host`
/// (the node that answered). Errors: Internal for a malformed reply.
absl::StatusOr<std::vector<SlotRange>> parse_cluster_slots(const redisReply* reply,
                                                           std::string_view fallback_host);

/// The key of limit `index` of `policy` for the user's `key`:
///     prefix{key}:<16 hex digits of a stable hash of the policy's state id>:index
/// The user's key is the hash tag, so all limits of a key share a slot and different keys spread.
/// A key that would make an empty tag ("" or one starting with '}') or that starts with '\x01' is
/// prefixed with '\x01', so the mapping stays one-to-one.
std::string state_key(std::string_view prefix, std::string_view key, std::uint64_t policy_hash,
                      std::size_t index);

/// The hash of the shared quota of bucket `key` (Storage::share_quota), in its hash tag:
///     prefix{key}:q
/// (a state key goes on after the tag with a key id and an index, a reservation's with ":r:").
std::string quota_key(std::string_view prefix, std::string_view key);

/// The policy's state id (Policy::state_id) spelled short for key names, one-to-one: the identity
/// as the state id has it (`<kind letter><count>` then `:<length>:<part>` per part), `|` and one
/// letter for the strategy and anchor (f m s t l g for fixed window, moving window, sliding window
/// counter, token bucket, leaky bucket, GCRA; upper case when anchored at the first hit), then
/// `|period` per limit (an inline limit: `|amount/period/capacity`), the period as the count of
/// the largest of d, h, m, s that divides it and that letter, else in µs (`1h`, `90s`, `1500`),
/// then a calendar limit's `~…` as in the state id. "n1:3:api|fixed-window|clock|60000000" is
/// "n1:3:api|f|1m". Each piece reads back to one value of the state id's, so two state ids never
/// share a key id. A string that is not in the state id's grammar is "!" and the string as it is
/// (a key id of the grammar starts with a letter, so the two kinds never meet).
std::string key_id(std::string_view state_id);

/// The key of limit `index` of the state whose key id (key_id) is `id`, for the user's `key`,
/// one-to-one in (state id, key, index) by construction (no hash between them):
///     prefix{key}:<id>:<its length in bytes>:index
/// Read from the right, the index, the length and then the id are unambiguous, and the rest is
/// the key escaped as above. The hash tag depends on the key alone, as above. The state id
/// (Policy::state_id) leaves out the amounts: a policy whose limit is raised or lowered counts on
/// in the same keys.
std::string state_key(std::string_view prefix, std::string_view key, std::string_view id, std::size_t index);
/// The same for `policy` (its key id computed here).
std::string state_key(std::string_view prefix, std::string_view key, const Policy& policy,
                      std::size_t index);

/// The key of reservation `reservation` of (state with key id `id`, key) (Storage::reserve), in
/// the same hash tag:
///     prefix{key}:r:<length of the key id>:<the key id><reservation>
/// After the tag a state key goes on with its key id, whose first character is a letter followed
/// by a digit, or '!', never "r:"; the length makes the key id and the reservation unambiguous.
std::string reservation_key(std::string_view prefix, std::string_view key, std::string_view id,
                            std::string_view reservation);
/// The same for `policy` (its key id computed here).
std::string reservation_key(std::string_view prefix, std::string_view key, const Policy& policy,
                            std::string_view reservation);

/// The key of an envoyproxy-layout state (key_layout=envoyproxy): prefix + key + the start of the
/// window `now` is in, in unix seconds floored to the period's whole seconds, as
/// envoyproxy/ratelimit names it (storage/envoyproxy_layout.hpp).
std::string envoyproxy_key(std::string_view prefix, std::string_view key, Micros period, Micros now);

/// FNV-1a 64 of the policy's state id: the same in every process and build (std::hash is not).
std::uint64_t policy_hash(const Policy& policy) noexcept;

/// Which script runs a policy.
/// kFixedWindowCalendar: the clock-aligned fixed window of a policy with a calendar limit (its
/// limits carry period boundaries; fixed_window.lua's packed form stays for the others).
enum class ScriptId : std::uint8_t { kFixedWindow, kFixedWindowFirstHit, kMovingWindow,
                                     kSlidingWindow, kBucket, kFixedWindowCalendar };
inline constexpr std::size_t kScriptCount = 6;
ScriptId script_for(const Policy& policy) noexcept;

/// Checks that the scripts can run `policy` exactly with doubles: every period ≤ 2^51 µs (so
/// times plus two periods stay below 2^53), and for the buckets capacity·period/amount < 2^52 µs.
/// Errors: InvalidArgument naming the limit.
absl::Status check_policy(const Policy& policy);

/// The script's ARGV (after the keys) for one call: now ('' for the server clock), cost, hit,
/// shape, TTL slack in ms, then the limits' arguments (see the .lua files). `client_now`: the
/// caller's clock, around which a calendar limit's period boundaries are computed (the script
/// picks the period holding its own `now` among them: fixed_window_calendar.lua).
/// Precondition: check_policy(policy).
void script_args(const Policy& policy, std::int64_t cost, bool hit, std::optional<Micros> now,
                 std::int64_t ttl_slack_ms, std::vector<std::string>& out, Micros client_now);

/// The limits' arguments alone (the tail of script_args; the group script takes them per item).
void limit_args(const Policy& policy, std::int64_t cost, Micros client_now, std::vector<std::string>& out);

/// The starts of the periods before, holding, after and two after `t` of a calendar limit: what
/// fixed_window_calendar.lua picks its window among.
std::array<Micros, 4> calendar_starts(const Calendar& calendar, Micros t) noexcept;

/// The decision in a script's reply (common.lua's `answer`): a string of 7 integers separated by
/// single spaces, "allowed(1/0) limit period remaining reset_after retry_after(-1 = never) delay"
/// (and an 8th, the named limit's reset_after, after several limits were combined).
/// Errors: Internal.
absl::StatusOr<Decision> parse_decision(const redisReply* reply);
/// The same, and also the short reply of a call's one limit (common.lua's `allowed_answer`):
/// "remaining reset_after", an allowed decision with `limit` and `period` (the amount and period
/// the call sent for it) and no wait.
absl::StatusOr<Decision> parse_decision(const redisReply* reply, std::int64_t limit, Micros period);

/// The group script's reply: {committed, then one decision string per item}. Errors: Internal.
absl::Status parse_group(const redisReply* reply, std::size_t items, std::vector<Decision>& out,
                         bool& committed);

/// What the storage does after one reply to a call (replies.cpp).
struct NextStep {
  enum class Kind : std::uint8_t {
    kDone,            ///< the reply is the call's answer: parse it
    kResendWithEval,  ///< NOSCRIPT: send the script's text with EVAL on the next attempt
    kLoadLibrary,     ///< FCALL: "Function not found": FUNCTION LOAD, then FCALL again
    /// FCALL refused as a command (Redis before 7, or an ACL without it): EVALSHA from now on.
    kWithoutFunctions,
    kMoved,           ///< MOVED (cluster): the slot's owner changed; update the map, retry there
    kAsk,             ///< ASK (cluster): retry once at `redirect.target`, after ASKING
    kFail,            ///< any other error reply: the call fails with `error` (Internal)
    /// READONLY: the server is a replica now (a failover). The call fails with `error`
    /// (Unavailable: nothing ran, the fail mode decides) and the master is looked up again.
    kReadOnly,
  };
  Kind kind = Kind::kDone;
  Redirect redirect;
  absl::Status error;
};

/// The reply to SENTINEL get-master-addr-by-name: [host, port]. Errors: NotFound for a nil reply
/// (the sentinel does not know the master), Unavailable for an error reply, Internal otherwise.
absl::StatusOr<Endpoint> parse_master_addr(const redisReply* reply, std::string_view master);

/// The `config-epoch` field of the reply to SENTINEL MASTER (a flat array of field names and
/// values): the configuration epoch in which the sentinel learned the master's address; a higher
/// one is a later failover. Errors: Unavailable for an error reply, Internal when the field is
/// missing or not a non-negative integer.
absl::StatusOr<std::int64_t> parse_config_epoch(const redisReply* reply);

/// Whether a ROLE reply says "master".
bool role_is_master(const redisReply* reply) noexcept;

/// Classifies a reply: `error_reply` and its `text` (for an error), whether the call ran a
/// script, whether the storage is a cluster (MOVED/ASK are only followed there; elsewhere they
/// fail), the server's name for the error message, and whether the script was sent with FCALL.
NextStep next_step(bool error_reply, std::string_view text, bool script, bool cluster,
                   std::string_view server, bool fcall = false);

/// Whether an error reply to FCALL or FUNCTION LOAD says that the command itself is not there
/// or not permitted (Redis before 7, an ACL without it), rather than anything about the call.
bool functions_refused(std::string_view text) noexcept;

}  // namespace floodgate::redis
