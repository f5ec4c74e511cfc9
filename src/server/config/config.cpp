// Reading and checking the service's YAML configuration file into a Config.
#include "server/config/config.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>

#include <boost/asio/ip/address.hpp>
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "server/config/policy.hpp"
#include "server/config/yaml_errors.hpp"
#include "server/config/overlays.hpp"

namespace floodgate::server {

const ServicePolicy* Config::find(std::string_view name) const {
  for (const ServicePolicy& p : policies) {
    if (p.policy->name() == name) return &p;
  }
  return nullptr;
}

absl::Status parse_listen(std::string_view text, std::string& host, std::uint16_t& port) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size()) {
    return absl::InvalidArgumentError(
        fmt::format("listen address \"{}\": expected HOST:PORT, e.g. 127.0.0.1:8080", text));
  }
  unsigned value = 0;
  const std::string_view digits = text.substr(colon + 1);
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size() || value > 65535) {
    return absl::InvalidArgumentError(
        fmt::format("listen address \"{}\": port must be a number from 0 to 65535", text));
  }
  std::string h(text.substr(0, colon));
  if (h.size() > 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  boost::system::error_code bad;
  (void)boost::asio::ip::make_address(h, bad);
  if (bad) {
    return absl::InvalidArgumentError(fmt::format(
        "listen address \"{}\": \"{}\" is not an IP address (e.g. 127.0.0.1, 0.0.0.0 or [::1])", text, h));
  }
  host = std::move(h);
  port = static_cast<std::uint16_t>(value);
  return absl::OkStatus();
}

namespace {

using yaml::check_keys;
using yaml::fail;
using yaml::integer;
using yaml::scalar;

std::chrono::milliseconds millis(const std::string& source, const YAML::Node& node, const std::string& what) {
  return std::chrono::milliseconds(integer(source, node, what, 1, limits::kMaxTimeoutMs, "milliseconds"));
}

std::size_t size(const std::string& source, const YAML::Node& node, const std::string& what,
                 std::int64_t max, std::string_view unit = "") {
  return static_cast<std::size_t>(integer(source, node, what, 1, max, unit));
}

void listen(const std::string& source, const YAML::Node& node, const std::string& what,
            std::string& host, std::uint16_t& port) {
  const auto text = scalar<std::string>(source, node, what);
  if (auto s = parse_listen(text, host, port); !s.ok()) fail(source, node, what + ": " + std::string(s.message()));
}

void parse_http(const std::string& source, const YAML::Node& http, HttpLimits& l) {
  check_keys(source, http,
             {"max_header_bytes", "max_body_bytes", "idle_timeout_ms", "request_timeout_ms", "write_timeout_ms",
              "max_connections", "max_pipelined", "drain_timeout_ms", "max_simulate_body_bytes"},
             "http");
  if (const auto& n = http["max_header_bytes"]) {
    l.max_header_bytes = size(source, n, "http.max_header_bytes", limits::kMaxHeaderBytes, "bytes");
  }
  if (const auto& n = http["max_body_bytes"]) {
    l.max_body_bytes = size(source, n, "http.max_body_bytes", limits::kMaxBodyBytes, "bytes");
  }
  if (const auto& n = http["max_simulate_body_bytes"]) {
    l.max_simulate_body_bytes = size(source, n, "http.max_simulate_body_bytes", limits::kMaxBodyBytes, "bytes");
  }
  if (const auto& n = http["idle_timeout_ms"]) l.idle_timeout = millis(source, n, "http.idle_timeout_ms");
  if (const auto& n = http["request_timeout_ms"]) l.request_timeout = millis(source, n, "http.request_timeout_ms");
  if (const auto& n = http["write_timeout_ms"]) l.write_timeout = millis(source, n, "http.write_timeout_ms");
  if (const auto& n = http["drain_timeout_ms"]) l.drain_timeout = millis(source, n, "http.drain_timeout_ms");
  if (const auto& n = http["max_connections"]) {
    l.max_connections = size(source, n, "http.max_connections", limits::kMaxConnections, "connections");
  }
  if (const auto& n = http["max_pipelined"]) {
    l.max_pipelined = size(source, n, "http.max_pipelined", limits::kMaxPipelined, "requests");
  }
}

// A map of single values (node_metadata, headers), in file order.
std::vector<std::pair<std::string, std::string>> string_map(const std::string& source, const YAML::Node& node,
                                                            const std::string& what) {
  if (!node.IsMap()) fail(source, node, what + " must be a map of names to values");
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& kv : node) {
    const auto name = scalar<std::string>(source, kv.first, what + " name");
    if (name.empty()) fail(source, kv.first, what + ": a name is empty");
    out.emplace_back(name, scalar<std::string>(source, kv.second, what + "." + name));
  }
  return out;
}

double fraction(const std::string& source, const YAML::Node& node, const std::string& what, double min, double max) {
  const auto v = scalar<double>(source, node, what);
  if (!(v >= min && v <= max)) fail(source, node, fmt::format("{} must be a number from {} to {}", what, min, max));
  return v;
}

std::string relative_file(const std::string& source, const YAML::Node& node, const std::string& what) {
  std::filesystem::path file = scalar<std::string>(source, node, what);
  if (file.empty()) fail(source, node, what + " is empty");
  if (file.is_relative()) file = std::filesystem::path(source).parent_path() / file;
  return file.string();
}

void parse_xds(const std::string& source, const YAML::Node& xds, XdsSettings& x) {
  check_keys(source, xds,
             {"server", "node_id", "node_metadata", "headers", "tls", "connect_retry_ms", "backoff", "max_message_bytes",
              "start_without_rules"},
             "rls.xds");
  if (!xds["server"]) fail(source, xds, "rls.xds needs a server (HOST:PORT of the control plane)");
  x.server = scalar<std::string>(source, xds["server"], "rls.xds.server");
  if (x.server.empty()) fail(source, xds["server"], "rls.xds.server is empty");
  if (const auto& n = xds["node_id"]) x.node_id = scalar<std::string>(source, n, "rls.xds.node_id");
  if (const auto& n = xds["node_metadata"]) x.node_metadata = string_map(source, n, "rls.xds.node_metadata");
  if (const auto& n = xds["headers"]) {
    x.headers = string_map(source, n, "rls.xds.headers");
    for (auto& [name, value] : x.headers) {
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    }
  }
  if (const YAML::Node& tls = xds["tls"]) {  // present (even `tls: {}`): TLS
    x.tls = true;
    if (!tls.IsNull()) {
      check_keys(source, tls, {"ca_file", "cert_file", "key_file", "server_name"}, "rls.xds.tls");
      for (auto [key, into] : {std::pair{"ca_file", &x.ca_file}, std::pair{"cert_file", &x.cert_file},
                               std::pair{"key_file", &x.key_file}}) {
        if (tls[key]) *into = relative_file(source, tls[key], std::string("rls.xds.tls.") + key);
      }
      if (tls["server_name"]) x.server_name = scalar<std::string>(source, tls["server_name"], "rls.xds.tls.server_name");
      if (x.cert_file.empty() != x.key_file.empty()) {
        fail(source, tls, "rls.xds.tls: cert_file and key_file go together (a client certificate and its key)");
      }
    }
  }
  if (const auto& n = xds["connect_retry_ms"]) x.connect_retry = millis(source, n, "rls.xds.connect_retry_ms");
  if (const YAML::Node& b = xds["backoff"]) {
    check_keys(source, b, {"initial_ms", "max_ms", "multiplier", "jitter"}, "rls.xds.backoff");
    if (b["initial_ms"]) x.backoff_initial = millis(source, b["initial_ms"], "rls.xds.backoff.initial_ms");
    if (b["max_ms"]) x.backoff_max = millis(source, b["max_ms"], "rls.xds.backoff.max_ms");
    if (b["multiplier"]) x.backoff_multiplier = fraction(source, b["multiplier"], "rls.xds.backoff.multiplier", 1, 10);
    if (b["jitter"]) x.backoff_jitter = fraction(source, b["jitter"], "rls.xds.backoff.jitter", 0, 1);
    if (x.backoff_max < x.backoff_initial) {
      fail(source, b, "rls.xds.backoff: max_ms must be at least initial_ms");
    }
  }
  if (const auto& n = xds["max_message_bytes"]) {
    x.max_message_bytes = size(source, n, "rls.xds.max_message_bytes", limits::kMaxXdsMessageBytes, "bytes");
  }
  if (const auto& n = xds["start_without_rules"]) {
    x.start_without_rules = scalar<bool>(source, n, "rls.xds.start_without_rules");
  }
}

void parse_rls(const std::string& source, const YAML::Node& rls, RlsSettings& r) {
  check_keys(source, rls,
             {"config", "xds", "listen", "response_headers", "merge_domains", "dynamic_metadata", "shadow_mode",
              "quota_mode", "max_message_bytes", "max_descriptors", "max_entries", "max_string_bytes",
              "healthcheck_needs_rules", "overlays"},
             "rls");
  if (rls["config"] && rls["xds"]) {
    fail(source, rls["xds"], "rls.config and rls.xds are two sources of rules: give one");
  }
  if (const YAML::Node& xds = rls["xds"]) parse_xds(source, xds, r.xds);
  if (const YAML::Node& o = rls["overlays"]) {
    if (rls["config"]) fail(source, o, "rls.overlays apply to rules over xDS; a rules file sets algorithm, burst and fail itself");
    r.overlays = parse_overlays(source, o);
  }
  if (const auto& n = rls["healthcheck_needs_rules"]) {
    r.healthcheck_needs_rules = scalar<bool>(source, n, "rls.healthcheck_needs_rules");
  }
  if (rls["config"]) {
    std::filesystem::path dir = scalar<std::string>(source, rls["config"], "rls.config");
    if (dir.empty()) fail(source, rls["config"], "rls.config is empty");
    // A relative directory is relative to the file that names it.
    if (dir.is_relative()) dir = std::filesystem::path(source).parent_path() / dir;
    r.config_dir = dir.string();
  }
  if (rls["listen"]) listen(source, rls["listen"], "rls.listen", r.listen_host, r.listen_port);
  if (rls["response_headers"]) r.response_headers = scalar<bool>(source, rls["response_headers"], "rls.response_headers");
  for (auto [key, into] : {std::pair{"merge_domains", &r.merge_domains}, std::pair{"dynamic_metadata", &r.dynamic_metadata},
                           std::pair{"shadow_mode", &r.shadow_mode}, std::pair{"quota_mode", &r.quota_mode}}) {
    if (rls[key]) *into = scalar<bool>(source, rls[key], std::string("rls.") + key);
  }
  if (const auto& n = rls["max_message_bytes"]) {
    r.max_message_bytes = size(source, n, "rls.max_message_bytes", limits::kMaxRlsMessageBytes, "bytes");
  }
  if (const auto& n = rls["max_descriptors"]) r.max_descriptors = size(source, n, "rls.max_descriptors", limits::kMaxRlsDescriptors);
  if (const auto& n = rls["max_entries"]) r.max_entries = size(source, n, "rls.max_entries", limits::kMaxRlsEntries);
  if (const auto& n = rls["max_string_bytes"]) {
    r.max_string_bytes = size(source, n, "rls.max_string_bytes", limits::kMaxRlsStringBytes, "bytes");
  }
}

void parse_metrics(const std::string& source, const YAML::Node& metrics, MetricsSettings& m) {
  check_keys(source, metrics, {"listen", "path"}, "metrics");
  if (!metrics["listen"]) fail(source, metrics, "metrics needs a listen address (HOST:PORT)");
  listen(source, metrics["listen"], "metrics.listen", m.listen_host, m.listen_port);
  m.enabled = true;
  if (const auto& n = metrics["path"]) {
    m.path = scalar<std::string>(source, n, "metrics.path");
    if (!m.path.starts_with('/')) fail(source, n, "metrics.path must start with /");
  }
}

void parse_admin(const std::string& source, const YAML::Node& admin, AdminSettings& a) {
  check_keys(source, admin, {"token_file"}, "admin");
  if (admin["token_file"]) {
    std::filesystem::path file = scalar<std::string>(source, admin["token_file"], "admin.token_file");
    if (file.empty()) fail(source, admin["token_file"], "admin.token_file is empty");
    if (file.is_relative()) file = std::filesystem::path(source).parent_path() / file;
    a.token_file = file.string();
  }
}

// Paths only: the files themselves are read and checked by load_tls (server/net/tls.hpp), after the
// command line has had its say.
void parse_tls(const std::string& source, const YAML::Node& tls, TlsSettings& t) {
  check_keys(source, tls, {"cert_file", "key_file", "client_ca_file", "http"}, "tls");
  if (tls["http"]) t.http = scalar<bool>(source, tls["http"], "tls.http");
  for (auto [key, into] : {std::pair{"cert_file", &t.cert_file}, std::pair{"key_file", &t.key_file},
                           std::pair{"client_ca_file", &t.client_ca_file}}) {
    if (!tls[key]) continue;
    const std::string what = std::string("tls.") + key;
    std::filesystem::path file = scalar<std::string>(source, tls[key], what);
    if (file.empty()) fail(source, tls[key], what + " is empty");
    if (file.is_relative()) file = std::filesystem::path(source).parent_path() / file;
    *into = file.string();
  }
}

void parse_policies(const std::string& source, const YAML::Node& policies, Config& c) {
  if (!policies.IsSequence()) fail(source, policies, "policies must be a list");
  for (const auto& p : policies) {
    ServicePolicy sp = parse_policy(source, p, &c.warnings);
    if (c.find(sp.policy->name()) != nullptr) {
      fail(source, p["name"], fmt::format("policy \"{}\" is defined twice", sp.policy->name()));
    }
    c.policies.push_back(std::move(sp));
  }
}

void parse_root(const std::string& source, const YAML::Node& root, Config& c) {
  if (!root.IsMap()) fail(source, root, "the configuration must be a map of settings");
  check_keys(source, root,
             {"listen", "threads", "storage", "batching", "log_level", "log_format", "inline_limits", "max_inline_policies",
              "auth_denied_status", "outage_status", "http", "rls", "rlqs" /* server/rlqs/settings.hpp */, "metrics",
              "admin", "tls", "policies"},
             "the configuration");
  if (root["listen"]) listen(source, root["listen"], "listen", c.listen_host, c.listen_port);
  if (const auto& n = root["threads"]) c.threads = static_cast<unsigned>(integer(source, n, "threads", 1, limits::kMaxThreads));
  if (const YAML::Node& st = root["storage"]) {
    if (st.IsMap()) check_keys(source, st, {"url", "start"}, "storage");
    c.storage = scalar<std::string>(source, st.IsMap() ? st["url"] : st, "storage");
    if (st.IsMap() && st["start"]) {
      c.storage_start = scalar<std::string>(source, st["start"], "storage.start");
      if (c.storage_start != "background" && c.storage_start != "fail-fast") {
        fail(source, st["start"], "storage.start must be background or fail-fast");
      }
    }
  }
  if (const auto& n = root["batching"]) {
    c.batching = scalar<std::string>(source, n, "batching");
    if (c.batching != "auto" && c.batching != "on" && c.batching != "off") {
      fail(source, n, "batching must be auto, on or off");
    }
  }
  if (root["log_level"]) c.log_level = scalar<std::string>(source, root["log_level"], "log_level");
  if (const auto& n = root["log_format"]) {
    c.log_format = scalar<std::string>(source, n, "log_format");
    if (c.log_format != "text" && c.log_format != "json") fail(source, n, "log_format must be text or json");
  }
  if (root["inline_limits"]) c.allow_inline = scalar<bool>(source, root["inline_limits"], "inline_limits");
  if (const auto& n = root["max_inline_policies"]) {
    c.max_inline_policies = size(source, n, "max_inline_policies", limits::kMaxInlinePolicies, "policies");
  }
  if (const auto& n = root["auth_denied_status"]) {
    c.auth_denied_status = static_cast<int>(integer(source, n, "auth_denied_status", 400, 599, "an HTTP error status"));
  }
  if (const auto& n = root["outage_status"]) {
    c.outage_status = static_cast<int>(integer(source, n, "outage_status", 400, 599, "an HTTP error status"));
  }
  if (const YAML::Node& http = root["http"]) parse_http(source, http, c.http);
  if (const YAML::Node& rls = root["rls"]) parse_rls(source, rls, c.rls);
  if (const YAML::Node& metrics = root["metrics"]) parse_metrics(source, metrics, c.metrics);
  if (const YAML::Node& admin = root["admin"]) parse_admin(source, admin, c.admin);
  if (const YAML::Node& tls = root["tls"]) parse_tls(source, tls, c.tls);
  if (const YAML::Node& policies = root["policies"]) parse_policies(source, policies, c);
}

}  // namespace

absl::StatusOr<Config> parse_config(const std::string& yaml, const std::string& source) {
  Config c;
  c.source = source;
  const absl::Status s = yaml::guarded(source, [&] {
    const YAML::Node root = yaml::load_document(yaml, source);
    if (!root.IsNull()) parse_root(source, root, c);  // an empty file: the defaults
  });
  if (!s.ok()) return s;
  return c;
}

absl::StatusOr<Config> load_config(const std::string& path) {
  auto text = yaml::read_config_file(path);
  if (!text.ok()) return text.status();
  return parse_config(*text, path);
}

}  // namespace floodgate::server
