// envoyproxy/ratelimit's environment variables applied to a Config (serve --envoyproxy-env).
#include "server/config/envoyproxy_env.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "absl/strings/str_split.h"

extern char** environ;  // NOLINT: POSIX

namespace floodgate::server {

namespace {

using Status = absl::Status;

std::string get(const Environment& env, std::string_view name, std::string_view fallback) {
  const auto it = env.find(name);
  return it == env.end() ? std::string(fallback) : it->second;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

Status bad(std::string_view name, const std::string& value, std::string_view why) {
  return absl::InvalidArgumentError(fmt::format("{}={}: {}", name, value, why));
}

// strconv.ParseBool's spellings.
absl::StatusOr<bool> flag(const Environment& env, std::string_view name, bool fallback) {
  const auto it = env.find(name);
  if (it == env.end()) return fallback;
  const std::string v = it->second;
  if (v == "1" || v == "t" || v == "T" || v == "true" || v == "TRUE" || v == "True") return true;
  if (v == "0" || v == "f" || v == "F" || v == "false" || v == "FALSE" || v == "False") return false;
  return bad(name, v, "not a boolean");
}

absl::StatusOr<std::uint16_t> port(const Environment& env, std::string_view name, std::uint16_t fallback) {
  const auto it = env.find(name);
  if (it == env.end()) return fallback;
  unsigned v = 0;
  const auto [end, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  if (ec != std::errc() || end != it->second.data() + it->second.size() || v > 65535) {
    return bad(name, it->second, "not a port number");
  }
  return static_cast<std::uint16_t>(v);
}

// A Go duration ("10s", "250ms", "1m30s", "1.5s") in whole milliseconds, at least 1.
absl::StatusOr<std::int64_t> duration_ms(std::string_view name, const std::string& text) {
  static constexpr std::pair<std::string_view, double> kUnits[] = {
      {"ns", 1e-6}, {"us", 1e-3}, {"µs", 1e-3}, {"ms", 1}, {"s", 1e3}, {"m", 60e3}, {"h", 3600e3}};
  std::string_view rest = text;
  double total = 0;
  if (rest.empty()) return bad(name, text, "not a duration (such as 10s or 250ms)");
  while (!rest.empty()) {
    std::size_t n = 0;
    while (n < rest.size() && (std::isdigit(static_cast<unsigned char>(rest[n])) || rest[n] == '.')) ++n;
    double number = 0;
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + n, number);
    if (n == 0 || ec != std::errc() || end != rest.data() + n) return bad(name, text, "not a duration (such as 10s or 250ms)");
    rest.remove_prefix(n);
    double scale = 0;
    for (const auto& [unit, ms] : kUnits) {  // "ms" before "m", "us" before "s"
      if (rest.starts_with(unit) && (scale == 0)) {
        scale = ms;
        rest.remove_prefix(unit.size());
      }
    }
    if (scale == 0) return bad(name, text, "a duration needs a unit (ns, us, ms, s, m, h)");
    total += number * scale;
  }
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(total)));
}

// REDIS_TLS_* → the rediss options (envoyproxy reads them only when REDIS_TLS is true).
absl::StatusOr<std::string> tls_options(const Environment& env) {
  std::string out;
  for (const auto& [var, option] : {std::pair<const char*, const char*>{"REDIS_TLS_CACERT", "tls_ca_file"},
                                    {"REDIS_TLS_CLIENT_CERT", "tls_cert_file"},
                                    {"REDIS_TLS_CLIENT_KEY", "tls_key_file"}}) {
    const std::string file = get(env, var, "");
    if (!file.empty()) out += fmt::format("&{}={}", option, file);
  }
  // envoyproxy then still verifies the chain, not the name: so does tls_verify_hostname=false.
  auto skip = flag(env, "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", false);
  if (!skip.ok()) return skip.status();
  if (*skip) out += "&tls_verify_hostname=false";
  return out;
}

// REDIS_URL of REDIS_TYPE=sentinel, "master,host:port,host:port…" → redis+sentinel://master@hosts
// with REDIS_AUTH for the data nodes and REDIS_SENTINEL_AUTH for the sentinels as options.
absl::StatusOr<std::string> sentinel_url(const Environment& env, const std::string& url, const std::string& options,
                                         bool tls) {
  const std::size_t comma = url.find(',');
  if (comma == 0 || comma == std::string::npos || comma + 1 == url.size()) {
    return bad("REDIS_URL", url, "REDIS_TYPE=sentinel expects the master's name, then host:port of each sentinel, "
                                 "comma-separated");
  }
  std::string auth_options;
  for (const auto& [var, prefix] : {std::pair<const char*, const char*>{"REDIS_AUTH", ""},
                                    {"REDIS_SENTINEL_AUTH", "sentinel_"}}) {
    const std::string auth = get(env, var, "");
    if (auth.empty()) continue;
    const std::size_t colon = auth.find(':');
    if (colon != std::string::npos) auth_options += fmt::format("&{}user={}", prefix, auth.substr(0, colon));
    auth_options += fmt::format("&{}password={}", prefix, colon == std::string::npos ? auth : auth.substr(colon + 1));
  }
  return fmt::format("{}://{}@{}{}{}", tls ? "rediss+sentinel" : "redis+sentinel", url.substr(0, comma),
                     url.substr(comma + 1), options, auth_options);
}

// REDIS_* → a storage URL.
absl::StatusOr<std::string> redis_url(const Environment& env) {
  const std::string type = lower(get(env, "REDIS_TYPE", "single"));
  const std::string socket = lower(get(env, "REDIS_SOCKET_TYPE", "unix"));
  const std::string url = get(env, "REDIS_URL", "/var/run/nutcracker/ratelimit.sock");
  std::string auth = get(env, "REDIS_AUTH", "");
  if (!auth.empty() && auth.find(':') == std::string::npos) auth = ":" + auth;  // a password alone
  const std::string at = auth.empty() ? "" : auth + "@";
  auto ms = duration_ms("REDIS_TIMEOUT", get(env, "REDIS_TIMEOUT", "10s"));
  if (!ms.ok()) return ms.status();
  const std::string pool = get(env, "REDIS_POOL_SIZE", "10");
  if (pool.empty() || !std::all_of(pool.begin(), pool.end(), [](unsigned char c) { return std::isdigit(c); })) {
    return bad("REDIS_POOL_SIZE", pool, "not a number");
  }
  auto tls = flag(env, "REDIS_TLS", false);
  if (!tls.ok()) return tls.status();
  // envoyproxy's key layout, so that its pods and these count together during a rollout
  // (docs/envoy.md, "Rolling migration"); CACHE_KEY_PREFIX is its prefix.
  const std::string prefix = get(env, "CACHE_KEY_PREFIX", "");
  if (prefix.find_first_of("&=") != std::string::npos) {
    return bad("CACHE_KEY_PREFIX", prefix, "'&' and '=' cannot be passed in the storage URL");
  }
  std::string options = fmt::format("?timeout_ms={}&pool={}&key_layout=envoyproxy", *ms, pool);
  if (!prefix.empty()) options += "&envoyproxy_prefix=" + prefix;
  if (*tls) {
    auto t = tls_options(env);
    if (!t.ok()) return t.status();
    options += *t;
  }
  const std::string s = *tls ? "s" : "";
  if (socket != "tcp" && socket != "unix") return bad("REDIS_SOCKET_TYPE", socket, "expected tcp or unix");
  if (type == "single") {
    if (socket == "unix" && *tls) return bad("REDIS_TLS", "true", "TLS needs REDIS_SOCKET_TYPE=tcp");
    if (socket == "unix") return fmt::format("redis+unix://{}{}", url, options);
    return fmt::format("redis{}://{}{}{}", s, at, url, options);
  }
  if (type == "cluster") return fmt::format("redis{}-cluster://{}{}{}", s, at, url, options);
  if (type == "sentinel") return sentinel_url(env, url, options, *tls);
  return bad("REDIS_TYPE", type, "expected single, cluster or sentinel");
}

// GRPC_SERVER_USE_TLS and its files → the service's certificate, on the gRPC listener only (as
// envoyproxy: PORT stays plain text). A client CA requires client certificates, as there.
Status grpc_tls(const Environment& env, Config& c) {
  auto on = flag(env, "GRPC_SERVER_USE_TLS", false);
  if (!on.ok()) return on.status();
  if (!*on) return absl::OkStatus();
  const std::string cert = get(env, "GRPC_SERVER_TLS_CERT", "");
  const std::string key = get(env, "GRPC_SERVER_TLS_KEY", "");
  if (cert.empty() || key.empty()) {
    return bad("GRPC_SERVER_USE_TLS", "true", "needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY");
  }
  c.tls.cert_file = cert;
  c.tls.key_file = key;
  // Envoy Gateway's Deployment names the client CA GRPC_SERVER_TLS_CA_CERT (envoyproxy reads only
  // GRPC_CLIENT_TLS_CACERT, so there it has no effect): either requires client certificates.
  c.tls.client_ca_file = get(env, "GRPC_CLIENT_TLS_CACERT", get(env, "GRPC_SERVER_TLS_CA_CERT", ""));
  c.tls.http = false;
  return absl::OkStatus();
}

// A float ("0.5"), as strconv.ParseFloat reads it.
absl::StatusOr<double> number(const Environment& env, std::string_view name, double fallback) {
  const auto it = env.find(name);
  if (it == env.end()) return fallback;
  double v = 0;
  const auto [end, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  if (ec != std::errc() || end != it->second.data() + it->second.size() || !std::isfinite(v)) {
    return bad(name, it->second, "not a number");
  }
  return v;
}

absl::StatusOr<std::chrono::milliseconds> millis(const Environment& env, std::string_view name, std::string_view fallback) {
  auto ms = duration_ms(name, get(env, name, fallback));
  if (!ms.ok()) return ms.status();
  return std::chrono::milliseconds(*ms);
}

// CONFIG_GRPC_XDS_NODE_METADATA, "key=value,key=value": envoyproxy skips an entry without '=',
// so it is not an error here either.
void xds_node_metadata(const std::string& metadata, XdsSettings& x, std::vector<std::string>& warnings) {
  for (const absl::string_view part : absl::StrSplit(metadata, ',')) {
    const std::string_view entry(part.data(), part.size());
    if (entry.empty()) continue;
    const std::size_t eq = entry.find('=');
    if (eq == std::string_view::npos) {
      warnings.push_back(fmt::format("CONFIG_GRPC_XDS_NODE_METADATA: \"{}\" has no '=' and is skipped", entry));
      continue;
    }
    x.node_metadata.emplace_back(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
}

// CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS, envconfig's map "name:value,name:value"; a pair
// without ':' is refused, as there.
Status xds_headers(const std::string& headers, XdsSettings& x) {
  for (const absl::string_view part : absl::StrSplit(headers, ',')) {
    const std::string_view entry(part.data(), part.size());
    if (entry.empty()) continue;
    const std::size_t colon = entry.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      return bad("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", std::string(entry), "expected name:value pairs, comma-separated");
    }
    x.headers.emplace_back(lower(std::string(entry.substr(0, colon))), std::string(entry.substr(colon + 1)));
  }
  return absl::OkStatus();
}

// CONFIG_GRPC_XDS_SERVER_USE_TLS and its files; without TLS, the files are warned as unused.
Status xds_tls(const Environment& env, XdsSettings& x, std::vector<std::string>& warnings) {
  auto tls = flag(env, "CONFIG_GRPC_XDS_SERVER_USE_TLS", false);
  if (!tls.ok()) return tls.status();
  x.tls = *tls;
  if (x.tls) {
    x.cert_file = get(env, "CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "");
    x.key_file = get(env, "CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "");
    x.ca_file = get(env, "CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "");
    x.server_name = get(env, "CONFIG_GRPC_XDS_SERVER_TLS_SAN", "");
    if (x.cert_file.empty() != x.key_file.empty()) {
      return bad("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", x.cert_file, "goes with CONFIG_GRPC_XDS_CLIENT_TLS_KEY (both or neither)");
    }
  } else {
    for (const char* n : {"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "CONFIG_GRPC_XDS_CLIENT_TLS_KEY",
                          "CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "CONFIG_GRPC_XDS_SERVER_TLS_SAN"}) {
      if (env.contains(n)) warnings.push_back(fmt::format("{} is not used: CONFIG_GRPC_XDS_SERVER_USE_TLS is not true", n));
    }
  }
  return absl::OkStatus();
}

// The xDS client's reconnection: the retry interval and the backoff.
Status xds_backoff(const Environment& env, XdsSettings& x) {
  auto retry = millis(env, "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", "3s");
  auto initial = millis(env, "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "10s");
  auto max = millis(env, "XDS_CLIENT_BACKOFF_MAX_INTERVAL", "60s");
  auto random = number(env, "XDS_CLIENT_BACKOFF_RANDOM_FACTOR", 0.5);
  auto jitter = flag(env, "XDS_CLIENT_BACKOFF_JITTER", true);
  for (const Status& s : {retry.status(), initial.status(), max.status(), random.status(), jitter.status()}) {
    if (!s.ok()) return s;
  }
  if (*random < 0 || *random > 1) {
    return bad("XDS_CLIENT_BACKOFF_RANDOM_FACTOR", get(env, "XDS_CLIENT_BACKOFF_RANDOM_FACTOR", ""), "a number from 0 to 1");
  }
  x.connect_retry = *retry;
  x.backoff_initial = *initial;
  x.backoff_max = std::max(*max, *initial);
  x.backoff_jitter = *jitter ? *random : 0;
  return absl::OkStatus();
}

// CONFIG_TYPE=GRPC_XDS_SOTW and the CONFIG_GRPC_XDS_* / XDS_CLIENT_* variables → rls.xds, with
// envoyproxy's defaults. `warnings` gets what is read but cannot be used.
Status xds_env(const Environment& env, Config& c, std::vector<std::string>& warnings) {
  const std::string type = get(env, "CONFIG_TYPE", "FILE");
  if (type == "FILE") return absl::OkStatus();
  if (type != "GRPC_XDS_SOTW") return bad("CONFIG_TYPE", type, "expected FILE or GRPC_XDS_SOTW");
  XdsSettings& x = c.rls.xds;
  c.rls.config_dir.clear();
  x.server = get(env, "CONFIG_GRPC_XDS_SERVER_URL", "localhost:18000");
  if (x.server.empty()) return bad("CONFIG_GRPC_XDS_SERVER_URL", x.server, "empty");
  x.node_id = get(env, "CONFIG_GRPC_XDS_NODE_ID", "default");
  xds_node_metadata(get(env, "CONFIG_GRPC_XDS_NODE_METADATA", ""), x, warnings);
  if (auto st = xds_headers(get(env, "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", ""), x); !st.ok()) return st;
  if (auto st = xds_tls(env, x, warnings); !st.ok()) return st;
  if (auto st = xds_backoff(env, x); !st.ok()) return st;
  const std::string size = get(env, "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "");
  if (!size.empty()) {
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(size.data(), size.data() + size.size(), v);
    if (ec != std::errc() || end != size.data() + size.size() || v < 0 || v > limits::kMaxXdsMessageBytes) {
      return bad("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", size, fmt::format("a number of bytes up to {}", limits::kMaxXdsMessageBytes));
    }
    if (v > 0) x.max_message_bytes = static_cast<std::size_t>(v);  // 0: gRPC's default, as envoyproxy
  }
  auto force = flag(env, "FORCE_START_WITHOUT_INITIAL_CONFIG", false);
  if (!force.ok()) return force.status();
  x.start_without_rules = *force;
  return absl::OkStatus();
}

// USE_PROMETHEUS: a listener of its own at PROMETHEUS_ADDR (":9090": every address) and PATH.
Status prometheus_env(const Environment& env, Config& c, std::vector<std::string>& warnings) {
  auto prometheus = flag(env, "USE_PROMETHEUS", false);
  if (!prometheus.ok()) return prometheus.status();
  if (*prometheus) {
    std::string addr = get(env, "PROMETHEUS_ADDR", ":9090");
    if (addr.starts_with(':')) addr = "0.0.0.0" + addr;
    if (auto s = parse_listen(addr, c.metrics.listen_host, c.metrics.listen_port); !s.ok()) {
      return bad("PROMETHEUS_ADDR", get(env, "PROMETHEUS_ADDR", ":9090"), std::string(s.message()));
    }
    c.metrics.path = get(env, "PROMETHEUS_PATH", "/metrics");
    if (!c.metrics.path.starts_with('/')) return bad("PROMETHEUS_PATH", c.metrics.path, "a path starts with /");
    // PORT's own port: /metrics of the main listener serves it (a PATH other than /metrics is warned).
    c.metrics.enabled = c.metrics.listen_port != c.listen_port;
    if (!c.metrics.enabled && c.metrics.path != "/metrics") {
      warnings.push_back(fmt::format("PROMETHEUS_PATH={} is not honoured on PORT: the path there is /metrics", c.metrics.path));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> apply_erl_env(const Environment& env, Config& c) {
  std::vector<std::string> warnings;
  auto http_port = port(env, "PORT", 8080);
  auto grpc_port = port(env, "GRPC_PORT", 8081);
  if (!http_port.ok()) return http_port.status();
  if (!grpc_port.ok()) return grpc_port.status();
  c.listen_host = get(env, "HOST", "0.0.0.0");
  c.listen_port = *http_port;
  c.rls.listen_host = get(env, "GRPC_HOST", "0.0.0.0");
  c.rls.listen_port = *grpc_port;
  // The runtime layout: RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY holds the rule files.
  std::string dir = get(env, "RUNTIME_ROOT", "/srv/runtime_data/current");
  for (const char* part : {"RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY"}) {
    const std::string p = get(env, part, part == std::string_view("RUNTIME_APPDIRECTORY") ? "config" : "");
    if (!p.empty()) dir += "/" + p;
  }
  c.rls.config_dir = dir;
  if (auto s = xds_env(env, c, warnings); !s.ok()) return s;
  if (auto s = prometheus_env(env, c, warnings); !s.ok()) return s;
  auto healthy = flag(env, "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", false);
  if (!healthy.ok()) return healthy.status();
  c.rls.healthcheck_needs_rules = *healthy;
  const std::string backend = lower(get(env, "BACKEND_TYPE", "redis"));
  if (backend != "redis") return bad("BACKEND_TYPE", backend, "--envoyproxy-env supports the redis backend only");
  auto storage = redis_url(env);
  if (!storage.ok()) return storage.status();
  c.storage = *storage;
  if (auto s = grpc_tls(env, c); !s.ok()) return s;
  c.log_level = lower(get(env, "LOG_LEVEL", "warn"));
  if (c.log_level == "warning") c.log_level = "warn";
  if (c.log_level == "fatal" || c.log_level == "panic") c.log_level = "critical";
  c.log_format = lower(get(env, "LOG_FORMAT", "text"));
  if (c.log_format != "text" && c.log_format != "json") return bad("LOG_FORMAT", c.log_format, "text or json");
  struct Flag {
    const char* name;
    bool* into;
  };
  for (const Flag& f : {Flag{"LIMIT_RESPONSE_HEADERS_ENABLED", &c.rls.response_headers},
                        Flag{"MERGE_DOMAIN_CONFIG", &c.rls.merge_domains},
                        Flag{"RESPONSE_DYNAMIC_METADATA", &c.rls.dynamic_metadata},
                        Flag{"SHADOW_MODE", &c.rls.shadow_mode}, Flag{"QUOTA_MODE", &c.rls.quota_mode}}) {
    auto v = flag(env, f.name, false);
    if (!v.ok()) return v.status();
    *f.into = *v;
  }
  erl_env_warnings(env, c, warnings);
  return warnings;
}

Environment process_environment() {
  Environment env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view kv(*e);
    const auto eq = kv.find('=');
    if (eq != std::string_view::npos) env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  return env;
}

}  // namespace floodgate::server
