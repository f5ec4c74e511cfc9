// `floodgate serve --envoyproxy-env`: envoyproxy/ratelimit's environment → floodgate's options.
#include <gtest/gtest.h>

#include "server/config/envoyproxy_env.hpp"
#include "storage/url.hpp"

namespace floodgate::server {
namespace {

TEST(ErlEnv, NothingSetIsEnvoyproxysDefaults) {
  Config c;
  auto warnings = apply_erl_env({}, c);
  ASSERT_TRUE(warnings.ok()) << warnings.status();
  EXPECT_TRUE(warnings->empty());
  EXPECT_EQ(c.listen_host, "0.0.0.0");
  EXPECT_EQ(c.listen_port, 8080);
  EXPECT_EQ(c.rls.listen_host, "0.0.0.0");
  EXPECT_EQ(c.rls.listen_port, 8081);
  EXPECT_EQ(c.rls.config_dir, "/srv/runtime_data/current/config");
  EXPECT_EQ(c.storage, "redis+unix:///var/run/nutcracker/ratelimit.sock?timeout_ms=10000&pool=10&key_layout=envoyproxy");
  EXPECT_EQ(c.log_level, "warn");
  EXPECT_FALSE(c.rls.response_headers || c.rls.merge_domains || c.rls.shadow_mode || c.rls.quota_mode ||
               c.rls.dynamic_metadata);
}

TEST(ErlEnv, EveryHonouredVariable) {
  Config c;
  auto warnings = apply_erl_env({{"HOST", "127.0.0.2"}, {"PORT", "9000"}, {"GRPC_HOST", "127.0.0.3"},
                                 {"GRPC_PORT", "9001"}, {"RUNTIME_ROOT", "/data"},
                                 {"RUNTIME_SUBDIRECTORY", "ratelimit"}, {"RUNTIME_APPDIRECTORY", "rules"},
                                 {"REDIS_SOCKET_TYPE", "tcp"}, {"REDIS_URL", "redis.local:6380"},
                                 {"REDIS_AUTH", "s3cret"}, {"REDIS_POOL_SIZE", "4"}, {"REDIS_TIMEOUT", "1.5s"},
                                 {"LOG_LEVEL", "DEBUG"}, {"LIMIT_RESPONSE_HEADERS_ENABLED", "true"},
                                 {"MERGE_DOMAIN_CONFIG", "1"}, {"RESPONSE_DYNAMIC_METADATA", "T"},
                                 {"SHADOW_MODE", "true"}, {"QUOTA_MODE", "True"}, {"NEAR_LIMIT_RATIO", "0.8"},
                                 {"USE_PROMETHEUS", "true"}, {"PROMETHEUS_ADDR", ":9000"}, {"LOG_FORMAT", "JSON"}},
                                c);
  ASSERT_TRUE(warnings.ok()) << warnings.status();
  EXPECT_TRUE(warnings->empty()) << (*warnings)[0];
  EXPECT_EQ(c.listen_host, "127.0.0.2");
  EXPECT_EQ(c.listen_port, 9000);
  EXPECT_EQ(c.rls.listen_host, "127.0.0.3");
  EXPECT_EQ(c.rls.listen_port, 9001);
  EXPECT_EQ(c.rls.config_dir, "/data/ratelimit/rules");
  EXPECT_EQ(c.storage, "redis://:s3cret@redis.local:6380?timeout_ms=1500&pool=4&key_layout=envoyproxy");
  EXPECT_TRUE(check_storage_url(c.storage).ok()) << check_storage_url(c.storage).status();
  EXPECT_EQ(c.log_level, "debug");
  EXPECT_EQ(c.log_format, "json");
  EXPECT_TRUE(c.rls.response_headers && c.rls.merge_domains && c.rls.shadow_mode && c.rls.quota_mode &&
              c.rls.dynamic_metadata);
  EXPECT_FALSE(c.metrics.enabled);  // PROMETHEUS_ADDR is PORT: its /metrics serves
}

// Envoy Gateway's USE_PROMETHEUS=true, PROMETHEUS_ADDR=:19001: a metrics listener of its own.
TEST(ErlEnv, PrometheusAddrIsAListenerOfItsOwn) {
  Config c;
  auto w = apply_erl_env({{"USE_PROMETHEUS", "true"}, {"PROMETHEUS_ADDR", ":19001"}, {"PROMETHEUS_PATH", "/stats"}}, c);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE(w->empty()) << (*w)[0];
  EXPECT_TRUE(c.metrics.enabled);
  EXPECT_EQ(c.metrics.listen_host, "0.0.0.0");
  EXPECT_EQ(c.metrics.listen_port, 19001);
  EXPECT_EQ(c.metrics.path, "/stats");
  Config d;
  auto wd = apply_erl_env({{"PROMETHEUS_ADDR", ":19001"}}, d);
  ASSERT_TRUE(wd.ok());
  EXPECT_FALSE(d.metrics.enabled);
  ASSERT_EQ(wd->size(), 1u);
  EXPECT_EQ((*wd)[0], "PROMETHEUS_ADDR is not used: USE_PROMETHEUS is not true");
  auto m = parse_config("metrics: {listen: 127.0.0.1:19001, path: /m}\n", "f.yaml");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->metrics.enabled);
  EXPECT_EQ(m->metrics.listen_port, 19001);
  EXPECT_EQ(m->metrics.path, "/m");
}

TEST(ErlEnv, RedisCluster) {
  Config c;
  ASSERT_TRUE(apply_erl_env({{"REDIS_TYPE", "CLUSTER"}, {"REDIS_SOCKET_TYPE", "tcp"},
                             {"REDIS_URL", "10.0.0.1:7000,10.0.0.2:7000"}, {"REDIS_TIMEOUT", "250ms"}},
                            c)
                  .ok());
  EXPECT_EQ(c.storage, "redis-cluster://10.0.0.1:7000,10.0.0.2:7000?timeout_ms=250&pool=10&key_layout=envoyproxy");
  EXPECT_TRUE(check_storage_url(c.storage).ok()) << check_storage_url(c.storage).status();
}

TEST(ErlEnv, EveryUnhonouredVariableIsNamed) {
  Config c;
  auto warnings = apply_erl_env({{"EXPIRATION_JITTER_MAX_SECONDS", "5"}, {"NEAR_LIMIT_RATIO", "0.9"}, {"DEBUG_PORT", "6070"},
                                 {"REDIS_PERSECOND", "true"}, {"LIMIT_RESET_HEADER", "X-Reset"},
                                 {"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "false"},
                                 {"PROMETHEUS_ADDR", ":9090"}, {"FORCE_START_WITHOUT_INITIAL_CONFIG", "true"},
                                 {"UNRELATED", "x"}},
                                c);
  ASSERT_TRUE(warnings.ok()) << warnings.status();
  std::string all;
  for (const auto& w : *warnings) all += w + "\n";
  EXPECT_EQ(warnings->size(), 8u) << all;
  for (const char* name : {"EXPIRATION_JITTER_MAX_SECONDS is not honoured", "NEAR_LIMIT_RATIO=0.9", "DEBUG_PORT",
                           "REDIS_PERSECOND", "LIMIT_RESET_HEADER", "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=false",
                           "PROMETHEUS_ADDR is not used", "FORCE_START_WITHOUT_INITIAL_CONFIG"}) {
    EXPECT_NE(all.find(name), std::string::npos) << name << " in\n" << all;
  }
}

TEST(ErlEnv, ValuesEnvoyproxyRefusesAreErrorsNamingTheVariable) {
  const auto error = [](Environment env) {
    Config c;
    auto r = apply_erl_env(env, c);
    return r.ok() ? std::string("ok") : std::string(r.status().message());
  };
  EXPECT_EQ(error({{"PORT", "http"}}), "PORT=http: not a port number");
  EXPECT_EQ(error({{"LOG_FORMAT", "xml"}}), "LOG_FORMAT=xml: text or json");
  EXPECT_EQ(error({{"GRPC_PORT", "70000"}}), "GRPC_PORT=70000: not a port number");
  EXPECT_EQ(error({{"REDIS_TIMEOUT", "10"}}), "REDIS_TIMEOUT=10: a duration needs a unit (ns, us, ms, s, m, h)");
  EXPECT_EQ(error({{"REDIS_TYPE", "ring"}}), "REDIS_TYPE=ring: expected single, cluster or sentinel");
  EXPECT_EQ(error({{"SHADOW_MODE", "yes"}}), "SHADOW_MODE=yes: not a boolean");
  EXPECT_EQ(error({{"BACKEND_TYPE", "memcache"}}), "BACKEND_TYPE=memcache: --envoyproxy-env supports the redis backend only");
  EXPECT_EQ(error({{"REDIS_TYPE", "sentinel"}, {"REDIS_URL", "mymaster"}}),
            "REDIS_URL=mymaster: REDIS_TYPE=sentinel expects the master's name, then host:port of each sentinel, "
            "comma-separated");
  EXPECT_EQ(error({{"REDIS_TYPE", "sentinel"}, {"REDIS_URL", ",10.0.0.1:26379"}}).substr(0, 27),
            "REDIS_URL=,10.0.0.1:26379: ");
  EXPECT_EQ(error({{"REDIS_TLS", "yes"}}), "REDIS_TLS=yes: not a boolean");
  EXPECT_EQ(error({{"REDIS_TLS", "true"}}), "REDIS_TLS=true: TLS needs REDIS_SOCKET_TYPE=tcp");
}

// envoyproxy's README: "mastername,host:port,host:port"; REDIS_AUTH authenticates to the data
// nodes, REDIS_SENTINEL_AUTH to the sentinels.
TEST(ErlEnv, RedisSentinel) {
  Config c;
  auto w = apply_erl_env({{"REDIS_TYPE", "sentinel"}, {"REDIS_SOCKET_TYPE", "tcp"},
                          {"REDIS_URL", "mymaster,10.0.0.1:26379,10.0.0.2:26379"}, {"REDIS_AUTH", "app:s3cret"},
                          {"REDIS_SENTINEL_AUTH", "sent"}, {"REDIS_TIMEOUT", "100ms"}},
                         c);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE(w->empty()) << (*w)[0];
  EXPECT_EQ(c.storage, "redis+sentinel://mymaster@10.0.0.1:26379,10.0.0.2:26379?timeout_ms=100&pool=10&key_layout=envoyproxy"
                       "&user=app&password=s3cret&sentinel_password=sent");
  EXPECT_TRUE(check_storage_url(c.storage).ok()) << check_storage_url(c.storage).status();
  EXPECT_EQ(redact_storage_url(c.storage),
            "redis+sentinel://mymaster@10.0.0.1:26379,10.0.0.2:26379?timeout_ms=100&pool=10&key_layout=envoyproxy"
            "&user=app&password=***&sentinel_password=***");
}

TEST(ErlEnv, RedisTls) {
  const Environment tls{{"REDIS_TLS", "true"}, {"REDIS_TLS_CACERT", "/etc/ca.pem"},
                        {"REDIS_TLS_CLIENT_CERT", "/etc/c.pem"}, {"REDIS_TLS_CLIENT_KEY", "/etc/k.pem"},
                        {"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "true"}, {"REDIS_SOCKET_TYPE", "tcp"},
                        {"REDIS_URL", "redis.local:6380"}, {"REDIS_AUTH", "s3cret"}};
  const std::string options = "?timeout_ms=10000&pool=10&key_layout=envoyproxy&tls_ca_file=/etc/ca.pem&tls_cert_file=/etc/c.pem"
                              "&tls_key_file=/etc/k.pem&tls_verify_hostname=false";
  Config c;
  auto w = apply_erl_env(tls, c);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE(w->empty()) << (*w)[0];
  EXPECT_EQ(c.storage, "rediss://:s3cret@redis.local:6380" + options);
  EXPECT_TRUE(check_storage_url(c.storage).ok()) << check_storage_url(c.storage).status();
  Environment cluster = tls;
  cluster["REDIS_TYPE"] = "cluster";
  ASSERT_TRUE(apply_erl_env(cluster, c).ok());
  EXPECT_EQ(c.storage, "rediss-cluster://:s3cret@redis.local:6380" + options);
  Environment sentinel = tls;
  sentinel["REDIS_TYPE"] = "sentinel";
  sentinel["REDIS_URL"] = "m,10.0.0.1:26379";
  ASSERT_TRUE(apply_erl_env(sentinel, c).ok());
  EXPECT_EQ(c.storage, "rediss+sentinel://m@10.0.0.1:26379" + options + "&password=s3cret");
  EXPECT_TRUE(check_storage_url(c.storage).ok()) << check_storage_url(c.storage).status();
  // Without REDIS_TLS=true the files are not read (as envoyproxy).
  Environment plain = tls;
  plain.erase("REDIS_TLS");
  ASSERT_TRUE(apply_erl_env(plain, c).ok());
  EXPECT_EQ(c.storage, "redis://:s3cret@redis.local:6380?timeout_ms=10000&pool=10&key_layout=envoyproxy");
}

// envoyproxy's GRPC_SERVER_USE_TLS: TLS on the gRPC listener only; a client CA requires client
// certificates (RequireAndVerifyClientCert there, client_ca_file here).
TEST(ErlEnv, GrpcServerTls) {
  const Environment tls{{"GRPC_SERVER_USE_TLS", "true"}, {"GRPC_SERVER_TLS_CERT", "/etc/s.pem"},
                        {"GRPC_SERVER_TLS_KEY", "/etc/s.key"}, {"GRPC_CLIENT_TLS_CACERT", "/etc/ca.pem"}};
  Config c;
  auto w = apply_erl_env(tls, c);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE(w->empty()) << (*w)[0];
  EXPECT_EQ(c.tls.cert_file, "/etc/s.pem");
  EXPECT_EQ(c.tls.key_file, "/etc/s.key");
  EXPECT_EQ(c.tls.client_ca_file, "/etc/ca.pem");
  EXPECT_TRUE(c.tls.enabled() && c.tls.mutual());
  EXPECT_FALSE(c.tls.http);  // PORT (health checks, /metrics, /json) stays plain text
  Environment one_way = tls;
  one_way.erase("GRPC_CLIENT_TLS_CACERT");
  Config d;
  ASSERT_TRUE(apply_erl_env(one_way, d).ok());
  EXPECT_TRUE(d.tls.enabled() && !d.tls.mutual());
  // Envoy Gateway's name of the client CA.
  Environment gateway = one_way;
  gateway.emplace("GRPC_SERVER_TLS_CA_CERT", "/certs/ca.crt");
  Config g;
  ASSERT_TRUE(apply_erl_env(gateway, g).ok());
  EXPECT_EQ(g.tls.client_ca_file, "/certs/ca.crt");
  EXPECT_TRUE(g.tls.mutual());
  // The files without the switch: no TLS, as envoyproxy, and each one named.
  Environment off = tls;
  off.erase("GRPC_SERVER_USE_TLS");
  Config e;
  auto we = apply_erl_env(off, e);
  ASSERT_TRUE(we.ok()) << we.status();
  EXPECT_FALSE(e.tls.enabled());
  EXPECT_TRUE(e.tls.http);
  ASSERT_EQ(we->size(), 3u);
  EXPECT_EQ((*we)[0], "GRPC_SERVER_TLS_CERT is not used: GRPC_SERVER_USE_TLS is not true");
  // The switch without its files, or not a boolean: refused, naming the variable.
  Config f;
  EXPECT_EQ(apply_erl_env({{"GRPC_SERVER_USE_TLS", "true"}, {"GRPC_SERVER_TLS_CERT", "/etc/s.pem"}}, f).status().message(),
            "GRPC_SERVER_USE_TLS=true: needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY");
  EXPECT_EQ(apply_erl_env({{"GRPC_SERVER_USE_TLS", "on"}}, f).status().message(), "GRPC_SERVER_USE_TLS=on: not a boolean");
  // The SAN check is not done: named.
  Environment san = tls;
  san["GRPC_CLIENT_TLS_SAN"] = "client.local";
  auto ws = apply_erl_env(san, f);
  ASSERT_TRUE(ws.ok() && ws->size() == 1u);
  EXPECT_NE((*ws)[0].find("GRPC_CLIENT_TLS_SAN is not honoured"), std::string::npos) << (*ws)[0];
}

// Rolling migration: envoyproxy's key layout, CACHE_KEY_PREFIX as its prefix.
TEST(ErlEnv, CacheKeyPrefixIsTheEnvoyproxyLayoutsPrefix) {
  Config c;
  auto w = apply_erl_env({{"CACHE_KEY_PREFIX", "erl_"}, {"REDIS_SOCKET_TYPE", "tcp"}, {"REDIS_URL", "r:6379"}}, c);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE(w->empty()) << (*w)[0];
  EXPECT_EQ(c.storage, "redis://r:6379?timeout_ms=10000&pool=10&key_layout=envoyproxy&envoyproxy_prefix=erl_");
  EXPECT_TRUE(check_storage_url(c.storage).ok()) << check_storage_url(c.storage).status();
  EXPECT_EQ(apply_erl_env({{"CACHE_KEY_PREFIX", "a&b"}}, c).status().message(),
            "CACHE_KEY_PREFIX=a&b: '&' and '=' cannot be passed in the storage URL");
}

TEST(ErlEnv, TlsHttpInTheConfigurationFile) {
  auto c = parse_config("tls:\n  cert_file: /etc/s.pem\n  key_file: /etc/s.key\n  http: false\n", "f.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->tls.http);
  auto d = parse_config("tls:\n  cert_file: /etc/s.pem\n  key_file: /etc/s.key\n", "f.yaml");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->tls.http);
}

TEST(ErlEnv, TheSameSwitchesInTheConfigurationFile) {
  auto c = parse_config("rls:\n  merge_domains: true\n  dynamic_metadata: true\n  shadow_mode: true\n  quota_mode: true\n",
                        "f.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->rls.merge_domains && c->rls.dynamic_metadata && c->rls.shadow_mode && c->rls.quota_mode);
}

// Envoy Gateway's rate-limit Deployment: CONFIG_TYPE=GRPC_XDS_SOTW and its variables → rls.xds.
TEST(ErlEnv, XdsVariablesAreTheXdsSection) {
  Config c;
  auto w = apply_erl_env({{"CONFIG_TYPE", "GRPC_XDS_SOTW"}, {"CONFIG_GRPC_XDS_NODE_ID", "envoy-ratelimit"},
                          {"CONFIG_GRPC_XDS_SERVER_URL", "envoy-gateway.envoy-gateway-system.svc:18001"},
                          {"CONFIG_GRPC_XDS_NODE_METADATA", "zone=a,cluster=b"},
                          {"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "Authorization:Bearer x,x-tenant:t1"},
                          {"CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"},
                          {"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "/certs/ca.crt"},
                          {"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "/certs/tls.crt"},
                          {"CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "/certs/tls.key"},
                          {"CONFIG_GRPC_XDS_SERVER_TLS_SAN", "envoy-gateway"},
                          {"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", "500ms"},
                          {"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "1s"}, {"XDS_CLIENT_BACKOFF_MAX_INTERVAL", "30s"},
                          {"XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "0.25"}, {"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "8388608"},
                          {"FORCE_START_WITHOUT_INITIAL_CONFIG", "true"},
                          {"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "true"}},
                         c);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE(w->empty()) << (*w)[0];
  const XdsSettings& x = c.rls.xds;
  EXPECT_TRUE(c.rls.config_dir.empty());
  EXPECT_EQ(x.server, "envoy-gateway.envoy-gateway-system.svc:18001");
  EXPECT_EQ(x.node_id, "envoy-ratelimit");
  EXPECT_EQ(x.node_metadata, (std::vector<std::pair<std::string, std::string>>{{"zone", "a"}, {"cluster", "b"}}));
  EXPECT_EQ(x.headers, (std::vector<std::pair<std::string, std::string>>{{"authorization", "Bearer x"}, {"x-tenant", "t1"}}));
  EXPECT_TRUE(x.tls);
  EXPECT_EQ(x.ca_file, "/certs/ca.crt");
  EXPECT_EQ(x.cert_file, "/certs/tls.crt");
  EXPECT_EQ(x.key_file, "/certs/tls.key");
  EXPECT_EQ(x.server_name, "envoy-gateway");
  EXPECT_EQ(x.connect_retry.count(), 500);
  EXPECT_EQ(x.backoff_initial.count(), 1000);
  EXPECT_EQ(x.backoff_max.count(), 30000);
  EXPECT_DOUBLE_EQ(x.backoff_jitter, 0.25);
  EXPECT_EQ(x.max_message_bytes, 8388608u);
  EXPECT_TRUE(x.start_without_rules);
  EXPECT_TRUE(c.rls.healthcheck_needs_rules);

  Config d;  // envoyproxy's defaults
  ASSERT_TRUE(apply_erl_env({{"CONFIG_TYPE", "GRPC_XDS_SOTW"}, {"XDS_CLIENT_BACKOFF_JITTER", "false"}}, d).ok());
  EXPECT_EQ(d.rls.xds.server, "localhost:18000");
  EXPECT_EQ(d.rls.xds.node_id, "default");
  EXPECT_FALSE(d.rls.xds.tls);
  EXPECT_EQ(d.rls.xds.connect_retry.count(), 3000);
  EXPECT_EQ(d.rls.xds.backoff_initial.count(), 10000);
  EXPECT_EQ(d.rls.xds.backoff_max.count(), 60000);
  EXPECT_EQ(d.rls.xds.backoff_jitter, 0);
  EXPECT_FALSE(d.rls.xds.start_without_rules);
}

TEST(ErlEnv, XdsValuesEnvoyproxyRefusesAndVariablesNotUsed) {
  const auto error = [](Environment env) {
    Config c;
    auto r = apply_erl_env(env, c);
    return r.ok() ? std::string("ok") : std::string(r.status().message());
  };
  EXPECT_EQ(error({{"CONFIG_TYPE", "GRPC_XDS_DELTA"}}), "CONFIG_TYPE=GRPC_XDS_DELTA: expected FILE or GRPC_XDS_SOTW");
  EXPECT_EQ(error({{"CONFIG_TYPE", "GRPC_XDS_SOTW"}, {"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "10"}}),
            "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL=10: a duration needs a unit (ns, us, ms, s, m, h)");
  EXPECT_EQ(error({{"CONFIG_TYPE", "GRPC_XDS_SOTW"}, {"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "novalue"}}),
            "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS=novalue: expected name:value pairs, comma-separated");
  Config c;  // CONFIG_TYPE=FILE: the xDS variables are named as not used, the directory stays
  auto w = apply_erl_env({{"CONFIG_GRPC_XDS_NODE_ID", "n"}, {"XDS_CLIENT_BACKOFF_JITTER", "false"}}, c);
  ASSERT_TRUE(w.ok());
  ASSERT_EQ(w->size(), 2u);
  EXPECT_EQ((*w)[0], "CONFIG_GRPC_XDS_NODE_ID is not used: CONFIG_TYPE is not GRPC_XDS_SOTW");
  EXPECT_FALSE(c.rls.xds.enabled());
  EXPECT_EQ(c.rls.config_dir, "/srv/runtime_data/current/config");
}

TEST(ErlEnv, TheXdsSectionOfTheConfigurationFile) {
  auto c = parse_config(
      "rls:\n  xds:\n    server: cp:18001\n    node_id: n1\n    node_metadata: {a: b}\n    headers: {X-Token: t}\n"
      "    tls: {ca_file: ca.pem, cert_file: c.pem, key_file: k.pem, server_name: cp}\n    connect_retry_ms: 250\n"
      "    backoff: {initial_ms: 100, max_ms: 2000, multiplier: 3, jitter: 0.1}\n    max_message_bytes: 1048576\n"
      "    start_without_rules: true\n",
      "/etc/fg/f.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  const XdsSettings& x = c->rls.xds;
  EXPECT_EQ(x.server, "cp:18001");
  EXPECT_EQ(x.headers, (std::vector<std::pair<std::string, std::string>>{{"x-token", "t"}}));
  EXPECT_EQ(x.ca_file, "/etc/fg/ca.pem");
  EXPECT_EQ(x.backoff_multiplier, 3);
  EXPECT_EQ(x.max_message_bytes, 1048576u);
  EXPECT_TRUE(x.tls && x.start_without_rules);
  EXPECT_EQ(parse_config("rls:\n  config: d\n  xds: {server: cp:1}\n", "f.yaml").status().message(),
            "f.yaml:3:8: rls.config and rls.xds are two sources of rules: give one");
  EXPECT_EQ(parse_config("rls:\n  xds: {node_id: n}\n", "f.yaml").status().message(),
            "f.yaml:2:8: rls.xds needs a server (HOST:PORT of the control plane)");
  EXPECT_EQ(parse_config("rls:\n  xds: {server: s, backoff: {jitter: 2}}\n", "f.yaml").status().message(),
            "f.yaml:2:38: rls.xds.backoff.jitter must be a number from 0 to 1");
}

}  // namespace
}  // namespace floodgate::server
