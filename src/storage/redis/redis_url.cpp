// The Redis storage's URL: redis://, rediss://, redis+unix://, redis-cluster:// and
// redis+sentinel:// with their options, into RedisOptions (parse_redis_url in protocol.hpp).
#include <charconv>

#include <fmt/format.h>

#include "storage/redis/protocol.hpp"

namespace floodgate::redis {

namespace {

bool to_int(std::string_view s, long long& out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

absl::Status bad(const StorageUrl& url, std::string_view problem) { return storage_url_error(url, problem); }

absl::StatusOr<Endpoint> parse_host_port(const StorageUrl& url, std::string_view item,
                                         int default_port) {
  Endpoint e;
  std::string_view host = item;
  long long port = default_port;
  if (!item.empty() && item.front() == '[') {  // [::1]:6379
    const std::size_t close = item.find(']');
    if (close == std::string_view::npos) return bad(url, "unclosed '[' in a host");
    host = item.substr(1, close - 1);
    std::string_view rest = item.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':' || !to_int(rest.substr(1), port)) return bad(url, "bad port");
    }
  } else if (const std::size_t colon = item.rfind(':'); colon != std::string_view::npos) {
    host = item.substr(0, colon);
    if (!to_int(item.substr(colon + 1), port)) {
      return bad(url, fmt::format("port \"{}\" is not a number", item.substr(colon + 1)));
    }
  }
  if (host.empty()) return bad(url, "expected host:port");
  if (port < 1 || port > 65535) return bad(url, fmt::format("port {} is out of range", port));
  e.host = std::string(host);
  e.port = static_cast<int>(port);
  return e;
}

}  // namespace

std::string Endpoint::name() const {
  if (!unix_path.empty()) return unix_path;
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

namespace {

absl::Status parse_host_list(const StorageUrl& url, int default_port, std::vector<Endpoint>& out) {
  for (std::string_view rest = url.hosts;;) {
    const std::size_t comma = rest.find(',');
    auto e = parse_host_port(url, rest.substr(0, comma), default_port);
    if (!e.ok()) return e.status();
    out.push_back(*e);
    if (comma == std::string_view::npos) return absl::OkStatus();
    rest = rest.substr(comma + 1);
  }
}

absl::Status parse_db(const StorageUrl& url, RedisOptions& o) {
  if (url.path.empty() || url.path == "/") return absl::OkStatus();
  long long db = 0;
  if (!to_int(std::string_view(url.path).substr(1), db) || db < 0 || db > 1000000) {
    return bad(url, fmt::format("database \"{}\" is not a number", url.path.substr(1)));
  }
  o.db = static_cast<int>(db);
  return absl::OkStatus();
}

// The servers of a URL, by scheme: false for a scheme that is not Redis's.
absl::StatusOr<bool> parse_servers(const StorageUrl& url, RedisOptions& o) {
  if (url.scheme == "redis" || url.scheme == "rediss") {
    if (url.hosts.find(',') != std::string::npos) return bad(url, "one host expected (use redis-cluster:// for several)");
    auto e = parse_host_port(url, url.hosts, 6379);
    if (!e.ok()) return e.status();
    o.seeds.push_back(*e);
    if (auto s = parse_db(url, o); !s.ok()) return s;
  } else if (url.scheme == "redis+unix") {
    if (!url.hosts.empty() || url.path.empty()) return bad(url, "expected redis+unix:///path/to/socket");
    Endpoint e;
    e.unix_path = url.path;
    o.seeds.push_back(e);
  } else if (url.scheme == "redis-cluster" || url.scheme == "rediss-cluster") {
    o.cluster = true;
    if (auto s = parse_host_list(url, 6379, o.seeds); !s.ok()) return s;
    if (!url.path.empty() && url.path != "/") return bad(url, "a cluster has no databases (drop the path)");
  } else if (url.scheme == "redis+sentinel" || url.scheme == "rediss+sentinel") {
    if (url.user.empty() || !url.password.empty()) {
      return bad(url, "expected redis+sentinel://master-name@host:port[,host:port…] (the data nodes' "
                      "credentials go in the options user and password)");
    }
    o.sentinel_master = url.user;
    if (auto s = parse_host_list(url, 26379, o.seeds); !s.ok()) return s;
    if (auto s = parse_db(url, o); !s.ok()) return s;
  } else {
    return false;
  }
  return true;
}

using std::chrono::milliseconds;

constexpr NumericOption<RedisOptions> kNumericOptions[] = {
    {"connect_timeout_ms", 1, 600000, [](RedisOptions& o, long long n) { o.connect_timeout = milliseconds(n); }},
    {"timeout_ms", 1, 600000, [](RedisOptions& o, long long n) { o.timeout = milliseconds(n); }},
    {"pool", 1, 1024, [](RedisOptions& o, long long n) { o.pool = static_cast<std::size_t>(n); }},
    {"breaker_failures", 1, 1000000, [](RedisOptions& o, long long n) { o.breaker_failures = static_cast<int>(n); }},
    {"breaker_cooldown_ms", 1, 3600000, [](RedisOptions& o, long long n) { o.breaker_cooldown = milliseconds(n); }},
    {"client_ttl_slack_ms", 0, 86400000, [](RedisOptions& o, long long n) { o.client_ttl_slack = milliseconds(n); }},
    {"backoff_min_ms", 1, 3600000, [](RedisOptions& o, long long n) { o.backoff_min = milliseconds(n); }},
    {"backoff_max_ms", 1, 3600000, [](RedisOptions& o, long long n) { o.backoff_max = milliseconds(n); }},
    {"sentinel_check_ms", 10, 3600000, [](RedisOptions& o, long long n) { o.sentinel_check = milliseconds(n); }},
    {"sentinel_timeout_ms", 1, 600000, [](RedisOptions& o, long long n) { o.sentinel_timeout = milliseconds(n); }},
};

// The options that only a Sentinel URL takes: the data nodes' credentials (the user info holds
// the master's name) and the sentinels' own.
std::string* sentinel_text_option(const std::string& name, RedisOptions& o) {
  if (name == "user") return &o.user;
  if (name == "password") return &o.password;
  if (name == "sentinel_user") return &o.sentinel_user;
  if (name == "sentinel_password") return &o.sentinel_password;
  return nullptr;
}

absl::Status parse_tls_option(const StorageUrl& url, const std::string& name, const std::string& value,
                              TlsOptions& t) {
  if (!t.enabled) return bad(url, fmt::format("option {} needs TLS: use rediss://, rediss-cluster:// or rediss+sentinel://", name));
  if (name == "tls_insecure" || name == "tls_verify_hostname") {
    if (value != "true" && value != "false") return bad(url, fmt::format("option {} must be true or false", name));
    (name == "tls_insecure" ? t.insecure : t.verify_hostname) = value == "true";
    return absl::OkStatus();
  }
  std::string* field = name == "tls_ca_file"       ? &t.ca_file
                       : name == "tls_cert_file"   ? &t.cert_file
                       : name == "tls_key_file"    ? &t.key_file
                       : name == "tls_server_name" ? &t.server_name
                                                   : nullptr;
  if (field == nullptr) {
    return bad(url, fmt::format("unknown option \"{}\" (TLS takes tls_ca_file, tls_cert_file, tls_key_file, "
                                "tls_server_name, tls_insecure, tls_verify_hostname)", name));
  }
  if (value.empty()) return bad(url, fmt::format("option {} is empty", name));
  *field = value;
  return absl::OkStatus();
}

absl::Status parse_option(const StorageUrl& url, const std::string& name, const std::string& value,
                          RedisOptions& o) {
  if (auto numeric = parse_numeric_option(url, kNumericOptions, name, value, o)) {
    if (name.starts_with("sentinel_") && o.sentinel_master.empty()) {
      return bad(url, fmt::format("option {} needs redis+sentinel:// or rediss+sentinel://", name));
    }
    return *numeric;
  }
  if (std::string* field = sentinel_text_option(name, o)) {
    if (o.sentinel_master.empty()) {
      return bad(url, fmt::format("option {} is for redis+sentinel:// (elsewhere: user:password@host)", name));
    }
    *field = value;
  } else if (name == "prefix") {
    if (value.find_first_of("{}") != std::string::npos) {
      return bad(url, "option prefix may not contain '{' or '}' (they would change the hash tag)");
    }
    o.prefix = value;
  } else if (name == "key_layout") {
    if (value != "envoyproxy" && value != "floodgate") {
      return bad(url, fmt::format("option key_layout={} must be floodgate or envoyproxy", value));
    }
    o.envoyproxy_keys = value == "envoyproxy";
  } else if (name == "envoyproxy_prefix") {
    o.envoyproxy_prefix = value;
  } else if (name.rfind("tls_", 0) == 0) {
    return parse_tls_option(url, name, value, o.tls);
  } else if (name == "scripts") {
    if (value != "functions" && value != "eval") return bad(url, fmt::format("option scripts={} must be functions or eval", value));
    o.functions = value == "functions";
  } else if (name == "clock") {
    if (value != "client" && value != "redis") return bad(url, fmt::format("option clock={} must be redis or client", value));
    o.client_clock = value == "client";
  } else {
    return bad(url, fmt::format("unknown option \"{}\" (redis takes connect_timeout_ms, timeout_ms, pool, prefix, "
                                "key_layout, envoyproxy_prefix, clock, scripts, client_ttl_slack_ms, breaker_failures, breaker_cooldown_ms, "
                                "backoff_min_ms, backoff_max_ms; rediss:// also tls_ca_file, tls_cert_file, "
                                "tls_key_file, tls_server_name, tls_insecure, tls_verify_hostname; redis+sentinel:// also user, "
                                "password, sentinel_user, sentinel_password, sentinel_check_ms, sentinel_timeout_ms)",
                                name));
  }
  return absl::OkStatus();
}

}  // namespace

std::optional<absl::StatusOr<RedisOptions>> parse_redis_url(const StorageUrl& url) {
  RedisOptions o;
  auto known = parse_servers(url, o);
  if (!known.ok()) return known.status();
  if (!*known) return std::nullopt;
  o.tls.enabled = url.scheme == "rediss" || url.scheme == "rediss-cluster" || url.scheme == "rediss+sentinel";
  if (o.sentinel_master.empty()) {
    o.user = url.user;
    o.password = url.password;
    if (!o.user.empty() && o.password.empty()) {
      o.password = o.user;  // redis://password@host, as redis-cli takes it
      o.user.clear();
    }
  }
  for (const auto& [name, value] : url.query) {
    if (auto s = parse_option(url, name, value, o); !s.ok()) return s;
  }
  if (o.backoff_max < o.backoff_min) o.backoff_max = o.backoff_min;
  if (!o.envoyproxy_prefix.empty() && !o.envoyproxy_keys) {
    return bad(url, "option envoyproxy_prefix needs key_layout=envoyproxy");
  }
  return o;
}

}  // namespace floodgate::redis
