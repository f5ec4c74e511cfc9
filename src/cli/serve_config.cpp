// floodgate serve's configuration: the file and the command line over it, checked as a start
// would use it, for --check-config, the start and every reload.
#include "cli/serve_config.hpp"

#include <iostream>
#include <mutex>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "server/api/admin_auth.hpp"
#include "server/config/envoyproxy_env.hpp"
#include "server/rlqs/settings.hpp"
#include "storage/url.hpp"

namespace floodgate::cli {

namespace {

// What --envoyproxy-env warns about at start.
std::vector<std::string>& start_warnings() {
  static std::vector<std::string> warnings;
  return warnings;
}

// The command line wins over the file for what it names.
absl::StatusOr<server::Config> load(const ServeArgs& a, const std::string& config_path) {
  server::Config c;
  if (!config_path.empty()) {
    auto loaded = server::load_config(config_path);
    if (!loaded.ok()) return loaded.status();
    c = *std::move(loaded);
  }
  if (a.envoyproxy_env) {  // envoyproxy/ratelimit's variables over the file, under the flags
    auto warnings = server::apply_erl_env(server::process_environment(), c);
    if (!warnings.ok()) return warnings.status();
    static std::once_flag once;  // at start, not at every reload; logged once the log is set up
    std::call_once(once, [&] { start_warnings() = *warnings; });
  }
  if (!a.listen.empty()) {
    if (auto s = server::parse_listen(a.listen, c.listen_host, c.listen_port); !s.ok()) return s;
  }
  if (!a.storage.empty()) c.storage = a.storage;
  if (!a.storage_start.empty()) c.storage_start = a.storage_start;
  if (!a.batching.empty()) c.batching = a.batching;
  if (a.threads > 0) c.threads = a.threads;
  if (!a.log_level.empty()) c.log_level = a.log_level;
  if (!a.rls_config.empty()) c.rls.config_dir = a.rls_config;
  if (!a.grpc_listen.empty()) {
    if (auto s = server::parse_listen(a.grpc_listen, c.rls.listen_host, c.rls.listen_port); !s.ok()) {
      return absl::InvalidArgumentError(fmt::format("--grpc-listen: {}", std::string(s.message())));
    }
  }
  if (!a.rls_config.empty() && c.rls.xds.enabled()) {
    return absl::InvalidArgumentError(fmt::format(
        "--rls-config and rls.xds (or CONFIG_TYPE=GRPC_XDS_SOTW) are two sources of rules: give one"));
  }
  if (a.rls_headers) c.rls.response_headers = true;
  if (!a.tls_cert.empty()) c.tls.cert_file = a.tls_cert;
  if (!a.tls_key.empty()) c.tls.key_file = a.tls_key;
  if (!a.tls_client_ca.empty()) c.tls.client_ca_file = a.tls_client_ca;
  if (auto s = server::resolve_admin_token(c); !s.ok()) return s;
  return c;
}

}  // namespace

absl::StatusOr<Loaded> load_checked(const ServeArgs& a, const std::string& config_path, const std::string& rules_dir) {
  auto c = load(a, config_path);
  if (!c.ok()) return c.status();
  if (auto s = server::check_startup(*c); !s.ok()) {
    return absl::InvalidArgumentError(fmt::format("{}: {}", c->source, std::string(s.message())));
  }
  auto tls = server::load_tls(c->tls);
  if (!tls.ok()) return absl::InvalidArgumentError(fmt::format("{}: {}", c->source, std::string(tls.status().message())));
  Loaded out{*std::move(c), nullptr, *std::move(tls), nullptr, {}};
  const std::string dir = rules_dir.empty() ? out.config.rls.config_dir : rules_dir;
  if (!dir.empty()) {
    auto rules = server::load_rls_config(dir, out.config.rls.merge_domains);
    if (!rules.ok()) return rules.status();
    if (auto s = server::check_rules_storage(**rules, out.config.storage); !s.ok()) return s;
    out.rules = *std::move(rules);
  }
  absl::StatusOr<std::string> quota_dir =
      a.rlqs_config.empty() ? server::rlqs::rules_dir_of(config_path) : absl::StatusOr<std::string>(a.rlqs_config);
  if (!quota_dir.ok()) return quota_dir.status();
  if (!quota_dir->empty()) {
    auto quota = server::rlqs::load_rules(*quota_dir);
    if (!quota.ok()) return quota.status();
    out.quota = *std::move(quota);
    out.quota_dir = *std::move(quota_dir);
  }
  return out;
}

int check_config(const ServeArgs& args) {
  auto loaded = load_checked(args, args.check_config);
  log_start_warnings();
  if (loaded.ok()) log_config_warnings(loaded->config);
  if (!loaded.ok()) {
    std::cerr << loaded.status().message() << "\n";
    return 1;
  }
  std::cout << args.check_config << ": ok, " << loaded->config.policies.size() << " policies";
  if (loaded->rules) std::cout << ", " << loaded->rules->domains.size() << " rate-limit domains";
  if (loaded->config.rls.xds.enabled()) std::cout << ", rate-limit rules from xDS " << loaded->config.rls.xds.server;
  std::cout << "\n";
  return 0;
}

void log_start_warnings() {
  for (const std::string& w : start_warnings()) spdlog::warn("--envoyproxy-env: {}", w);
}

void log_config_warnings(const server::Config& c) {
  for (const std::string& w : c.warnings) spdlog::warn("{}", w);
}

}  // namespace floodgate::cli
