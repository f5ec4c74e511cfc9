// `floodgate serve --envoyproxy-env`: envoyproxy/ratelimit's environment variables read as that
// service reads them, mapped onto floodgate's configuration.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/config/config.hpp"

namespace floodgate::server {

/// The environment as name → value (only the variables that are set).
using Environment = std::map<std::string, std::string, std::less<>>;

/// Applies envoyproxy/ratelimit's variables of `env` to `config`, with that service's defaults
/// for the ones it does not set: HOST/PORT (0.0.0.0:8080) → the HTTP listener (where
/// /healthcheck and /metrics answer); GRPC_HOST/GRPC_PORT (0.0.0.0:8081) → the gRPC service;
/// RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY → the rules directory (root/sub/app,
/// watched for changes like any rules directory); REDIS_URL/REDIS_TYPE (single, cluster)/
/// REDIS_SOCKET_TYPE (tcp, unix)/REDIS_AUTH/REDIS_POOL_SIZE/REDIS_TIMEOUT (a Go duration) → the
/// storage URL (BACKEND_TYPE must be redis), with envoyproxy's key layout for the fixed-window
/// rules (key_layout=envoyproxy, CACHE_KEY_PREFIX as envoyproxy_prefix: its pods and floodgate's
/// share the counts during a rollout); GRPC_SERVER_USE_TLS with GRPC_SERVER_TLS_CERT/_KEY and
/// GRPC_CLIENT_TLS_CACERT → the service's certificate on the gRPC listener only; LOG_LEVEL; LIMIT_RESPONSE_HEADERS_ENABLED;
/// MERGE_DOMAIN_CONFIG; RESPONSE_DYNAMIC_METADATA; SHADOW_MODE; QUOTA_MODE.
///
/// Returns one warning per variable that is set but that floodgate does not honour (or honours
/// only in part), naming it and saying what floodgate does instead; InvalidArgument (naming the
/// variable) for a value that envoyproxy/ratelimit would refuse too (a port that is not a number,
/// an unknown REDIS_TYPE, a bad duration). Pure: reads nothing but its arguments.
absl::StatusOr<std::vector<std::string>> apply_erl_env(const Environment& env, Config& config);

/// Appends to `out` a warning for each variable of `env` that floodgate does not honour (part of
/// apply_erl_env; config/envoyproxy_env_warnings.cpp).
void erl_env_warnings(const Environment& env, const Config& config, std::vector<std::string>& out);

/// The process environment, for apply_erl_env.
Environment process_environment();

}  // namespace floodgate::server
