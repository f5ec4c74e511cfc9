// The service's configuration: YAML, validated once, immutable afterwards.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "floodgate/policy.hpp"
#include "server/config/limits.hpp"
#include "server/config/policy.hpp"
#include "server/config/overlays.hpp"

namespace floodgate::server {

/// Limits of the HTTP server. All durations and sizes are non-zero.
struct HttpLimits {
  std::size_t max_header_bytes = 8 * 1024;     ///< larger → 431
  std::size_t max_body_bytes = 16 * 1024;      ///< larger → 413
  /// The body limit of POST /v1/simulate alone (a trace of up to 10,000 requests), read only
  /// when the request line names that path. Larger → 413.
  std::size_t max_simulate_body_bytes = 1024 * 1024;
  std::chrono::milliseconds idle_timeout{60'000};     ///< keep-alive wait for the next request
  std::chrono::milliseconds request_timeout{10'000};  ///< from its first byte to the whole request
  std::chrono::milliseconds write_timeout{10'000};
  std::size_t max_connections = 10'000;
  std::size_t max_pipelined = 16;              ///< requests buffered ahead on one connection
  std::chrono::milliseconds drain_timeout{4'000};  ///< SIGTERM: in-flight requests get this long
};

/// Where the rate-limit rules come from when they are pushed over xDS (docs/envoy.md, "Rules over
/// xDS"): one state-of-the-world ADS stream to `server` subscribing to
/// type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig. Each response is the whole set
/// of domains, checked like a rules directory and published at once, then ACKed; a bad set is
/// NACKed and the rules in force keep serving. All durations are non-zero.
struct XdsSettings {
  std::string server;               ///< the control plane's gRPC target (host:port); empty: no xDS
  std::string node_id = "default";  ///< Node.id: the control plane keys its snapshots by it
  /// Node.metadata, string values (envoyproxy's CONFIG_GRPC_XDS_NODE_METADATA), in order.
  std::vector<std::pair<std::string, std::string>> node_metadata;
  /// Metadata (HTTP/2 headers) sent with the stream, e.g. an authorization token. Lower-case names.
  std::vector<std::pair<std::string, std::string>> headers;
  bool tls = false;          ///< TLS to the control plane (the system's CAs unless `ca_file`)
  std::string ca_file;       ///< PEM: CAs that sign the control plane's certificate
  std::string cert_file;     ///< PEM: the client certificate (mTLS), with `key_file`
  std::string key_file;
  std::string server_name;   ///< the name checked in the control plane's certificate (else the host)
  /// While the control plane cannot be reached, a connection is tried this often.
  std::chrono::milliseconds connect_retry{3'000};
  /// Before a stream is opened again after it ended or failed: backoff_initial, multiplied by
  /// backoff_multiplier after each stream that brought no response, up to backoff_max; each delay is
  /// drawn uniformly within ±backoff_jitter of it (0: exact).
  std::chrono::milliseconds backoff_initial{10'000};
  std::chrono::milliseconds backoff_max{60'000};
  double backoff_multiplier = 2;
  double backoff_jitter = 0.5;
  /// The largest response accepted (gRPC's RESOURCE_EXHAUSTED beyond it).
  std::size_t max_message_bytes = 4 * 1024 * 1024;
  /// false (envoyproxy's default): `floodgate serve` opens its listeners only once the first set of
  /// rules is in force. true (FORCE_START_WITHOUT_INITIAL_CONFIG): it serves at once, not ready
  /// (/readyz 503, gRPC health NOT_SERVING) until then; ShouldRateLimit answers OK meanwhile.
  bool start_without_rules = false;

  [[nodiscard]] bool enabled() const noexcept { return !server.empty(); }
};

/// Envoy's rate-limit service over gRPC (docs/envoy.md): where it listens, where its rules come
/// from, and how RlsService answers (it takes this struct as it is). Served only when `config_dir`
/// or `xds` is set (not both). A request beyond any `max_*` bound is answered INVALID_ARGUMENT, and so is an empty
/// domain, an empty descriptor list, a descriptor without entries or an entry without key.
struct RlsSettings {
  std::string config_dir;  ///< a directory of envoyproxy/ratelimit YAML files; empty: no gRPC
  XdsSettings xds;         ///< rules pushed by a control plane instead
  /// `rls.overlays`: algorithm, burst and fail for rules pushed over xDS (server/config/overlays.hpp).
  std::vector<RlsOverlay> overlays;
  /// envoyproxy's HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED: /healthcheck answers 500 until a set
  /// of rules is in force.
  bool healthcheck_needs_rules = false;
  std::string listen_host = "127.0.0.1";
  std::uint16_t listen_port = 8081;
  bool merge_domains = false;     ///< files of one domain merge (envoyproxy's MERGE_DOMAIN_CONFIG)
  /// Add RateLimit-Policy, RateLimit, X-RateLimit-* (and Retry-After when over limit) to
  /// `response_headers_to_add`, from the most constraining descriptor (off by default, as in
  /// envoyproxy/ratelimit).
  bool response_headers = false;
  /// Fill the response's dynamic_metadata as envoyproxy/ratelimit does with
  /// RESPONSE_DYNAMIC_METADATA (rls_dynamic_metadata in rls/call.hpp). Off by default.
  bool dynamic_metadata = false;
  /// envoyproxy's SHADOW_MODE: the overall code is always OK (statuses and counters as decided).
  bool shadow_mode = false;
  /// envoyproxy's QUOTA_MODE: every matched rule in quota mode (RlsRule::quota_mode).
  bool quota_mode = false;
  std::size_t max_message_bytes = 64 * 1024;  ///< serialized request size
  std::size_t max_descriptors = 64;           ///< descriptors per request
  std::size_t max_entries = 16;               ///< entries per descriptor
  std::size_t max_string_bytes = 1024;        ///< domain, entry key, entry value
  /// Decide on `batch_threads` storage threads that coalesce concurrent single-descriptor
  /// requests into one storage batch (one Redis round trip), instead of on the calling thread.
  /// Not read from the file: `floodgate serve` sets it like the HTTP service's `batching`.
  bool batching = false;
  unsigned batch_threads = 2;
};

/// A listener of its own for Prometheus (envoyproxy's USE_PROMETHEUS, PROMETHEUS_ADDR,
/// PROMETHEUS_PATH): GET `path` answers the same text as /metrics on the main listener, in plain
/// HTTP. Off unless `enabled`.
struct MetricsSettings {
  bool enabled = false;
  std::string listen_host = "0.0.0.0";
  std::uint16_t listen_port = 9090;
  std::string path = "/metrics";
};

/// Who may use the admin endpoints (docs/http-api.md, "Admin endpoints").
struct AdminSettings {
  /// A file whose first line is the bearer token (relative to the configuration file). The
  /// environment variable FLOODGATE_ADMIN_TOKEN wins over it. Read at start and on every reload.
  std::string token_file;
  /// The token in force, filled by resolve_admin_token (server/api/admin_auth.hpp); empty: none, and
  /// the admin endpoints are refused to everyone.
  std::string token;
};

/// The service's own certificate (docs/configuration.md, "TLS"). One set of files serves both
/// listeners: HTTP becomes HTTPS and the gRPC service speaks TLS. The files are read (and checked
/// by load_tls, server/net/tls.hpp) at start, by --check-config and on every reload; relative paths
/// are relative to the configuration file.
struct TlsSettings {
  std::string cert_file;       ///< PEM: the certificate, then its intermediates; empty: plain text
  std::string key_file;        ///< PEM: the private key of the certificate
  std::string client_ca_file;  ///< PEM: CAs of client certificates; set: mTLS (a certificate required)
  /// `tls.http` (default true): the HTTP listener speaks TLS too. false: TLS on the gRPC service
  /// only, the HTTP listener (health checks, /metrics, /json) stays plain text, as
  /// envoyproxy/ratelimit's GRPC_SERVER_USE_TLS does (--envoyproxy-env sets it so).
  bool http = true;

  [[nodiscard]] bool enabled() const noexcept { return !cert_file.empty() || !key_file.empty(); }
  [[nodiscard]] bool mutual() const noexcept { return !client_ca_file.empty(); }
};

/// The whole configuration. `floodgate serve` with no file: 127.0.0.1:8080, memory store, no
/// policies, inline limits allowed.
struct Config {
  std::string source = "<defaults>";  ///< the file it came from, for messages
  std::string listen_host = "127.0.0.1";
  std::uint16_t listen_port = 8080;
  unsigned threads = 0;               ///< 0 = one per core; else 1 to limits::kMaxThreads
  std::string storage = "memory";
  /// When the storage's server cannot be reached at start: "background" (start anyway, decide by
  /// each policy's fail mode, connect with backoff; /readyz is 503 meanwhile if a policy fails
  /// closed) or "fail-fast" (exit with an error).
  std::string storage_start = "background";
  /// Coalesce concurrent decisions into one storage round trip: "auto" (for networked storages),
  /// "on" or "off".
  std::string batching = "auto";
  std::string log_level = "info";
  /// "text" (a line of text per message) or "json" (a JSON object per line: time in UTC, level,
  /// msg), for log shippers.
  std::string log_format = "text";
  bool allow_inline = true;           ///< /v1/hit with {"limit": …} and no configured policy
  std::size_t max_inline_policies = 1024;
  int auth_denied_status = 429;       ///< nginx auth_request passes only 401/403 through
  /// The status of a fail-closed policy's answer while its storage fails (the tenant is not over
  /// any limit): 503 with Retry-After; 429 answers it as a denial.
  int outage_status = 503;
  HttpLimits http;
  RlsSettings rls;
  MetricsSettings metrics;
  AdminSettings admin;
  TlsSettings tls;
  std::vector<ServicePolicy> policies;
  /// What the file says in a deprecated spelling that is still accepted (file:line:column first):
  /// `floodgate serve` logs them at start, at every reload and with --check-config.
  std::vector<std::string> warnings;

  [[nodiscard]] const ServicePolicy* find(std::string_view name) const;
};

/// Parses and validates a YAML configuration against the schema: types, ranges (see `limits`),
/// unknown and duplicate keys, one document per file, reserved policy names, header names.
/// Errors (InvalidArgument) name the file, line, column, field and reason:
/// `floodgate.yaml:12:12: policy "api": invalid limit "10/fortnight": …`. load_config reads a
/// regular file of at most yaml::kMaxFileBytes (a directory or a device is an error).
absl::StatusOr<Config> load_config(const std::string& path);
absl::StatusOr<Config> parse_config(const std::string& yaml, const std::string& source);

/// What `floodgate serve` checks before it starts, beyond the file's own schema, so that
/// `--check-config`, start and reload accept the same configurations: the thread count (against
/// kMaxThreads and the process's RLIMIT_NPROC), the log level, the storage URL's syntax and
/// options (parsed, not connected) and every policy and override against that storage's
/// exactness limits (e.g. the longest period Redis keeps exactly). Errors: InvalidArgument
/// naming the field.
absl::Status check_startup(const Config& config);

/// "host:port" → host, port. The host is an IP address literal ("[::1]" for IPv6), as the
/// servers bind it. Errors name the text.
absl::Status parse_listen(std::string_view text, std::string& host, std::uint16_t& port);

}  // namespace floodgate::server
