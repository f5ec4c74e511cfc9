#include "server/config.hpp"

#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "server/yaml_errors.hpp"

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
  host = std::string(text.substr(0, colon));
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  port = static_cast<std::uint16_t>(value);
  return absl::OkStatus();
}

namespace {

using yaml::check_keys;
using yaml::fail;
using yaml::scalar;

std::chrono::milliseconds millis(const std::string& source, const YAML::Node& node,
                                 const std::string& what) {
  const auto v = scalar<std::int64_t>(source, node, what);
  if (v <= 0) fail(source, node, fmt::format("{} must be at least 1 (milliseconds)", what));
  return std::chrono::milliseconds(v);
}

std::size_t positive(const std::string& source, const YAML::Node& node, const std::string& what) {
  const auto v = scalar<std::int64_t>(source, node, what);
  if (v <= 0) fail(source, node, fmt::format("{} must be at least 1", what));
  return static_cast<std::size_t>(v);
}

constexpr std::int64_t kMaxBlockedCache = 10'000'000;

ServicePolicy parse_policy(const std::string& source, const YAML::Node& node) {
  if (!node.IsMap()) fail(source, node, "each policy must be a map with name, strategy and limit");
  check_keys(source, node,
             {"name", "strategy", "limit", "burst", "anchor", "shape", "key", "fail", "shadow",
              "blocked_cache", "overrides", "allow"},
             "a policy");
  if (!node["name"]) fail(source, node, "a policy needs a name");
  const auto name = scalar<std::string>(source, node["name"], "name");
  const std::string where = fmt::format("policy \"{}\"", name);
  if (!node["limit"]) fail(source, node, where + " needs a limit, e.g. limit: 10/minute");
  auto strategy = parse_strategy(node["strategy"] ? scalar<std::string>(source, node["strategy"], "strategy")
                                                  : std::string("gcra"));
  if (!strategy.ok()) fail(source, node["strategy"], where + ": " + std::string(strategy.status().message()));

  PolicyOptions o;
  if (node["burst"]) o.burst = static_cast<std::int64_t>(positive(source, node["burst"], where + " burst"));
  if (node["anchor"]) {
    const auto anchor = scalar<std::string>(source, node["anchor"], "anchor");
    if (anchor == "first-hit") {
      o.anchor = Anchor::kFirstHit;
    } else if (anchor != "clock") {
      fail(source, node["anchor"], where + ": anchor must be clock or first-hit");
    }
  }
  if (node["shape"]) o.shape = scalar<bool>(source, node["shape"], "shape");
  if (node["fail"]) {
    const auto mode = scalar<std::string>(source, node["fail"], "fail");
    if (mode == "closed") {
      o.fail = FailMode::kClosed;
    } else if (mode != "open") {
      fail(source, node["fail"], where + ": fail must be open or closed");
    }
  }
  if (node["blocked_cache"]) {
    const auto n = scalar<std::int64_t>(source, node["blocked_cache"], "blocked_cache");
    if (n < 0 || n > kMaxBlockedCache) {
      fail(source, node["blocked_cache"],
           fmt::format("{}: blocked_cache must be from 0 (off) to {} keys", where, kMaxBlockedCache));
    }
    o.blocked_cache = static_cast<std::size_t>(n);
  }
  const YAML::Node& limit_node = node["limit"];
  const auto limit_text = scalar<std::string>(source, limit_node, "limit");
  auto policy = Policy::make(name, *strategy, limit_text, o);
  if (!policy.ok()) fail(source, limit_node, where + ": " + std::string(policy.status().message()));

  ServicePolicy sp;
  sp.policy = std::make_shared<const Policy>(*std::move(policy));
  if (node["shadow"]) sp.shadow = scalar<bool>(source, node["shadow"], "shadow");
  if (const YAML::Node& key = node["key"]) {
    // key: {header: X-Api-Key}  or  key: {query: api_key}
    if (!key.IsMap() || key.size() != 1 || !(key["header"] || key["query"])) {
      fail(source, key, where + ": key must be {header: NAME} or {query: NAME}");
    }
    sp.key_source.kind = key["header"] ? KeySource::Kind::kHeader : KeySource::Kind::kQuery;
    sp.key_source.name =
        scalar<std::string>(source, key["header"] ? key["header"] : key["query"], "key");
    if (sp.key_source.name.empty()) fail(source, key, where + ": key name is empty");
  }
  if (const YAML::Node& overrides = node["overrides"]) {
    if (!overrides.IsMap()) fail(source, overrides, where + ": overrides must map keys to limits");
    for (const auto& kv : overrides) {
      const auto key = kv.first.as<std::string>();
      const auto text = scalar<std::string>(source, kv.second, "override");
      PolicyOptions oo = o;
      auto op = Policy::make(fmt::format("{}/override/{}", name, key), *strategy, text, oo);
      if (!op.ok()) {
        fail(source, kv.second, fmt::format("{} override \"{}\": {}", where, key, std::string(op.status().message())));
      }
      sp.overrides.emplace(key, std::make_shared<const Policy>(*std::move(op)));
    }
  }
  if (const YAML::Node& allow = node["allow"]) {
    if (!allow.IsSequence()) fail(source, allow, where + ": allow must be a list of keys");
    for (const auto& k : allow) sp.allow.insert(scalar<std::string>(source, k, "allow"));
  }
  return sp;
}

}  // namespace

absl::StatusOr<Config> parse_config(const std::string& yaml, const std::string& source) {
  Config c;
  c.source = source;
  try {
    const YAML::Node root = YAML::Load(yaml);
    if (root.IsNull()) return c;  // an empty file: the defaults
    if (!root.IsMap()) fail(source, root, "the configuration must be a map of settings");
    check_keys(source, root,
               {"listen", "threads", "storage", "batching", "log_level", "inline_limits", "max_inline_policies",
                "auth_denied_status", "http", "rls", "policies"},
               "the configuration");
    if (root["listen"]) {
      const auto text = scalar<std::string>(source, root["listen"], "listen");
      if (auto s = parse_listen(text, c.listen_host, c.listen_port); !s.ok()) {
        fail(source, root["listen"], std::string(s.message()));
      }
    }
    if (root["threads"]) c.threads = static_cast<unsigned>(positive(source, root["threads"], "threads"));
    if (root["storage"]) {
      const YAML::Node& st = root["storage"];
      c.storage = scalar<std::string>(source, st.IsMap() ? st["url"] : st, "storage");
    }
    if (root["batching"]) {
      c.batching = scalar<std::string>(source, root["batching"], "batching");
      if (c.batching != "auto" && c.batching != "on" && c.batching != "off") {
        fail(source, root["batching"], "batching must be auto, on or off");
      }
    }
    if (root["log_level"]) c.log_level = scalar<std::string>(source, root["log_level"], "log_level");
    if (root["inline_limits"]) c.allow_inline = scalar<bool>(source, root["inline_limits"], "inline_limits");
    if (root["max_inline_policies"]) {
      c.max_inline_policies = positive(source, root["max_inline_policies"], "max_inline_policies");
    }
    if (root["auth_denied_status"]) {
      const auto status = scalar<int>(source, root["auth_denied_status"], "auth_denied_status");
      if (status < 400 || status > 599) {
        fail(source, root["auth_denied_status"], "auth_denied_status must be an HTTP error status (400-599)");
      }
      c.auth_denied_status = status;
    }
    if (const YAML::Node& http = root["http"]) {
      check_keys(source, http,
                 {"max_header_bytes", "max_body_bytes", "idle_timeout_ms", "request_timeout_ms",
                  "write_timeout_ms", "max_connections", "max_pipelined", "drain_timeout_ms",
                  "max_simulate_body_bytes"},
                 "http");
      if (http["max_header_bytes"]) c.http.max_header_bytes = positive(source, http["max_header_bytes"], "max_header_bytes");
      if (http["max_body_bytes"]) c.http.max_body_bytes = positive(source, http["max_body_bytes"], "max_body_bytes");
      if (http["idle_timeout_ms"]) c.http.idle_timeout = millis(source, http["idle_timeout_ms"], "idle_timeout_ms");
      if (http["request_timeout_ms"]) c.http.request_timeout = millis(source, http["request_timeout_ms"], "request_timeout_ms");
      if (http["write_timeout_ms"]) c.http.write_timeout = millis(source, http["write_timeout_ms"], "write_timeout_ms");
      if (http["max_connections"]) c.http.max_connections = positive(source, http["max_connections"], "max_connections");
      if (http["max_pipelined"]) c.http.max_pipelined = positive(source, http["max_pipelined"], "max_pipelined");
      if (http["max_simulate_body_bytes"]) {
        c.http.max_simulate_body_bytes =
            positive(source, http["max_simulate_body_bytes"], "max_simulate_body_bytes");
      }
      if (http["drain_timeout_ms"]) c.http.drain_timeout = millis(source, http["drain_timeout_ms"], "drain_timeout_ms");
    }
    if (const YAML::Node& rls = root["rls"]) {
      check_keys(source, rls,
                 {"config", "listen", "response_headers", "max_message_bytes", "max_descriptors",
                  "max_entries", "max_string_bytes"},
                 "rls");
      if (rls["config"]) {
        std::filesystem::path dir = scalar<std::string>(source, rls["config"], "rls config");
        if (dir.empty()) fail(source, rls["config"], "rls config is empty");
        // A relative directory is relative to the file that names it.
        if (dir.is_relative()) dir = std::filesystem::path(source).parent_path() / dir;
        c.rls.config_dir = dir.string();
      }
      if (rls["listen"]) {
        const auto text = scalar<std::string>(source, rls["listen"], "rls listen");
        if (auto s = parse_listen(text, c.rls.listen_host, c.rls.listen_port); !s.ok()) {
          fail(source, rls["listen"], std::string(s.message()));
        }
      }
      if (rls["response_headers"]) c.rls.response_headers = scalar<bool>(source, rls["response_headers"], "response_headers");
      if (rls["max_message_bytes"]) c.rls.max_message_bytes = positive(source, rls["max_message_bytes"], "max_message_bytes");
      if (rls["max_descriptors"]) c.rls.max_descriptors = positive(source, rls["max_descriptors"], "max_descriptors");
      if (rls["max_entries"]) c.rls.max_entries = positive(source, rls["max_entries"], "max_entries");
      if (rls["max_string_bytes"]) c.rls.max_string_bytes = positive(source, rls["max_string_bytes"], "max_string_bytes");
    }
    if (const YAML::Node& policies = root["policies"]) {
      if (!policies.IsSequence()) fail(source, policies, "policies must be a list");
      for (const auto& p : policies) {
        ServicePolicy sp = parse_policy(source, p);
        if (c.find(sp.policy->name()) != nullptr) {
          fail(source, p, fmt::format("policy \"{}\" is defined twice", sp.policy->name()));
        }
        c.policies.push_back(std::move(sp));
      }
    }
  } catch (const yaml::Error& e) {
    return absl::InvalidArgumentError(e.message);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        fmt::format("{}:{}: {}", source, e.mark.line >= 0 ? e.mark.line + 1 : 0, e.msg));
  }
  return c;
}

absl::StatusOr<Config> load_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(fmt::format("{}: cannot open the configuration file", path));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_config(text.str(), path);
}

}  // namespace floodgate::server
