// floodgate serve's arguments, and its configuration as checked for --check-config, a start and a
// reload (serve_config.cpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/config/config.hpp"
#include "server/net/tls.hpp"
#include "server/rlqs/service.hpp"
#include "server/rls/rules.hpp"

namespace floodgate::cli {

struct ServeArgs {
  std::string config_path;
  std::string listen;
  std::string storage;
  std::string storage_start;
  std::string batching;
  unsigned threads = 0;
  std::string log_level;
  std::string check_config;
  std::string port_file;
  std::string rls_config;
  std::string rlqs_config;
  std::string grpc_listen;
  std::string grpc_port_file;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  bool rls_headers = false;
  bool envoyproxy_env = false;
};

// A configuration and the rate-limit rules it names, checked as `serve` would start them.
struct Loaded {
  server::Config config;
  std::shared_ptr<const server::RlsConfig> rules;  // from the rules directory; null: none (xDS, or no gRPC)
  std::shared_ptr<const server::TlsMaterial> tls;  // null: plain text
  std::shared_ptr<const server::rlqs::Rules> quota;  // the RLQS rules; null: no RLQS
  std::string quota_dir;  // --rlqs-config, else the file's rlqs.config
};

/// The one path of --check-config, start and reload: the file (with the command line over it),
/// checked for a start, its certificate, its rules and its RLQS rules. `rules_dir`: the rules
/// directory to read (a reload keeps the one given at start); empty: the configuration's own.
absl::StatusOr<Loaded> load_checked(const ServeArgs& a, const std::string& config_path,
                                    const std::string& rules_dir = "");

/// --check-config: says what would start, or why not. The exit status.
int check_config(const ServeArgs& args);

/// What --envoyproxy-env warned about, logged once the log's format is known.
void log_start_warnings();

/// What the configuration file says in a deprecated spelling, logged at each load.
void log_config_warnings(const server::Config& c);

}  // namespace floodgate::cli
