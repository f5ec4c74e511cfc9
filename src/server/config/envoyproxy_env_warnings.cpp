// The envoyproxy/ratelimit variables that floodgate does not honour: each one set is named in a
// startup warning (apply_erl_env), never silently ignored.
#include <fmt/format.h>

#include "server/config/envoyproxy_env.hpp"

namespace floodgate::server {

namespace {

struct Unhonoured {
  std::string_view name;  // a variable, or a prefix ending in '*'
  std::string_view instead;
};

constexpr Unhonoured kUnhonoured[] = {
    {"DEBUG_HOST", "there is no debug listener; /metrics and /healthcheck are on PORT"},
    {"DEBUG_PORT", "there is no debug listener; /metrics and /healthcheck are on PORT"},
    {"GRPC_UDS", "the gRPC service listens on GRPC_HOST:GRPC_PORT only"},
    {"GRPC_MAX_CONNECTION_AGE", "connections are not aged out"},
    {"GRPC_MAX_CONNECTION_AGE_GRACE", "connections are not aged out"},
    {"GRPC_CLIENT_TLS_SAN", "any client certificate signed by GRPC_CLIENT_TLS_CACERT is accepted"},
    {"USE_DOG_STATSD*", "metrics are Prometheus text on PORT/metrics only"},
    {"STATSD_*", "metrics are Prometheus text on PORT/metrics only"},
    {"EXTRA_TAGS", "metrics carry domain and rule labels only"},
    {"STATS_FLUSH_INTERVAL", "metrics are read when scraped"},
    {"DISABLE_STATS", "metrics are always kept"},
    {"PROMETHEUS_MAPPER_YAML", "metric names are floodgate's (docs/envoy.md)"},
    {"PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", "metric names are floodgate's (docs/envoy.md)"},
    {"RUNTIME_IGNOREDOTFILES", "every *.yaml/*.yml file of the directory is read, subdirectories not"},
    {"RUNTIME_WATCH_ROOT", "the rules directory itself is watched"},
    {"EXPIRATION_JITTER_MAX_SECONDS", "keys expire one unit after their last hit, without jitter"},
    {"LIMIT_LIMIT_HEADER", "the headers are RateLimit, RateLimit-Policy and X-RateLimit-*"},
    {"LIMIT_REMAINING_HEADER", "the headers are RateLimit, RateLimit-Policy and X-RateLimit-*"},
    {"LIMIT_RESET_HEADER", "the headers are RateLimit, RateLimit-Policy and X-RateLimit-*"},
    {"REDIS_PIPELINE_*", "floodgate coalesces concurrent requests by itself"},
    {"REDIS_CLUSTER_PIPELINE_PARALLELISM", "floodgate coalesces concurrent requests by itself"},
    {"REDIS_PERSECOND*", "one Redis holds every unit (so per-second rules do not share envoyproxy's per-second keys)"},
    {"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", "broken connections are replaced when used"},
    {"REDIS_POOL_ON_EMPTY_BEHAVIOR", "a caller waits for a pooled connection up to REDIS_TIMEOUT"},
    {"REDIS_STARTUP_*", "Redis is connected lazily, with backoff"},
    {"MEMCACHE_*", "--envoyproxy-env supports the redis backend only"},
    {"TRACING_*", "no tracing"},
};

bool named(std::string_view pattern, std::string_view name) {
  if (pattern.ends_with('*')) return name.starts_with(pattern.substr(0, pattern.size() - 1));
  return pattern == name;
}

// Set to a value that differs from what floodgate does anyway.
void conditional(const Environment& env, const Config& c, std::vector<std::string>& out) {
  const auto value = [&](std::string_view n) -> const std::string* {
    const auto it = env.find(n);
    return it == env.end() ? nullptr : &it->second;
  };
  if (const auto* v = value("NEAR_LIMIT_RATIO"); v != nullptr && *v != "0.8") {
    out.push_back(fmt::format("NEAR_LIMIT_RATIO={} is not honoured: near_limit counts at 0.8", *v));
  }
  if (const auto* v = value("LOCAL_CACHE_SIZE_IN_BYTES"); v != nullptr && *v != "0") {
    out.push_back(fmt::format("LOCAL_CACHE_SIZE_IN_BYTES={} is not honoured: the blocked-key cache is floodgate's own", *v));
  }
  if (const auto* v = value("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT"); v != nullptr && (*v == "false" || *v == "0")) {
    out.push_back("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=false is not honoured: floodgate never charges a refused request");
  }
  if (!c.tls.enabled()) {  // envoyproxy ignores them too; named so that nobody thinks TLS is on
    for (const char* n : {"GRPC_SERVER_TLS_CERT", "GRPC_SERVER_TLS_KEY", "GRPC_CLIENT_TLS_CACERT", "GRPC_SERVER_TLS_CA_CERT"}) {
      if (value(n) != nullptr) out.push_back(fmt::format("{} is not used: GRPC_SERVER_USE_TLS is not true", n));
    }
  }
  if (const auto* v = value("USE_STATSD"); v != nullptr && (*v == "true" || *v == "1")) {
    out.push_back("USE_STATSD=true is not honoured: metrics are Prometheus text on PORT/metrics only");
  }
  if (const auto* v = value("USE_PROMETHEUS"); v != nullptr && (*v == "false" || *v == "0")) {
    out.push_back("USE_PROMETHEUS=false is not honoured: /metrics is always served on PORT");
  }
  if (const auto* v = value("USE_PROMETHEUS"); v == nullptr || (*v != "true" && *v != "1" && *v != "t" && *v != "T" &&
                                                                  *v != "TRUE" && *v != "True")) {
    // envoyproxy does not read them either then
    for (const char* n : {"PROMETHEUS_ADDR", "PROMETHEUS_PATH"}) {
      if (value(n) != nullptr) out.push_back(fmt::format("{} is not used: USE_PROMETHEUS is not true", n));
    }
  }
  if (!c.rls.xds.enabled()) {  // CONFIG_TYPE=FILE: envoyproxy does not read these either
    for (const auto& [name, v] : env) {
      if (named("CONFIG_GRPC_XDS_*", name) || named("XDS_CLIENT_*", name)) {
        out.push_back(fmt::format("{} is not used: CONFIG_TYPE is not GRPC_XDS_SOTW", name));
      }
    }
    if (value("FORCE_START_WITHOUT_INITIAL_CONFIG") != nullptr) {
      out.push_back("FORCE_START_WITHOUT_INITIAL_CONFIG is not honoured with CONFIG_TYPE=FILE: the rules directory "
                    "must exist at start");
    }
  }
}

}  // namespace

void erl_env_warnings(const Environment& env, const Config& c, std::vector<std::string>& out) {
  for (const auto& [name, value] : env) {
    for (const Unhonoured& u : kUnhonoured) {
      if (named(u.name, name)) {
        out.push_back(fmt::format("{} is not honoured: {}", name, u.instead));
        break;
      }
    }
  }
  conditional(env, c, out);
}

}  // namespace floodgate::server
