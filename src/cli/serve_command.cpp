// floodgate serve: the rate-limit service over HTTP.
#include <mutex>
#include <sys/stat.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include <boost/asio.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>

#include "cli/commands.hpp"
#include "cli/serve_config.hpp"
#include "cli/serve_watch.hpp"
#include "server/api/admin_auth.hpp"
#include "server/config/config.hpp"
#include "server/grpc/runtime.hpp"
#include "server/grpc/server.hpp"
#include "server/config/envoyproxy_env.hpp"
#include "server/rls/service.hpp"
#include "server/rlqs/service.hpp"
#include "server/rlqs/settings.hpp"
#include "server/rls/json.hpp"
#include "server/xds/client.hpp"
#include "server/xds/overlaid_rules.hpp"
#include "server/common/housekeeping.hpp"
#include "server/http/metrics_listener.hpp"
#include "server/http/server.hpp"
#include "server/api/metrics.hpp"
#include "server/api/service.hpp"
#include "server/common/storage_watch.hpp"
#include "server/net/tls.hpp"
#include "storage/url.hpp"

namespace floodgate::cli {

namespace {

// Whole or not at all: the file appears under its name only once the port is in it.
void write_port_file(const std::string& path, unsigned short port) {
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp) << port << "\n";
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) spdlog::error("cannot write the port file {}: {}", path, ec.message());
}

// Reloads on SIGHUP or a changed file. A configuration that fails to load or check, or that would
// remove every policy (a file emptied, or caught between an editor's truncate and write), is
// refused: the running one keeps serving, the log says why and the failure is counted.
struct Reloader {
  const ServeArgs& args;
  const std::string& rules_dir;  // the directory given at start (a new one needs a restart)
  server::Service& service;
  server::RlsService* rls;
  server::ReloadCounters& counters;
  server::TlsState* tls;  // null: plain text
  server::rlqs::Service* quota = nullptr;
  server::OverlaidRules* overlaid = nullptr;  // rules over xDS: the push in force, read again with new overlays

  // The certificate is installed first: when it is refused, nothing else of the reload is.
  absl::Status install_tls(const std::shared_ptr<const server::TlsMaterial>& next) const {
    if ((tls == nullptr) != (next == nullptr)) {
      return absl::FailedPreconditionError("turning TLS on or off (tls.cert_file, tls.key_file) needs a restart");
    }
    if (tls == nullptr) return absl::OkStatus();
    if (auto s = tls->install(next); !s.ok()) return s;
    spdlog::info("TLS certificate for new connections: {}", next->summary);
    return absl::OkStatus();
  }

  void operator()(const char* why) {
    auto next = load_checked(args, args.config_path, rules_dir);
    absl::Status refused = next.status();
    if (next.ok() && next->config.policies.empty() && !service.config()->policies.empty()) {
      refused = absl::InvalidArgumentError(fmt::format(
          "{} has no policies: it would remove all {} (an empty or half-written file?)", args.config_path,
          service.config()->policies.size()));
    }
    if (refused.ok() && next->config.tls.http != service.config()->tls.http) {
      refused = absl::FailedPreconditionError("changing tls.http needs a restart");
    }
    if (refused.ok()) refused = install_tls(next->tls);
    if (refused.ok() && overlaid != nullptr) refused = overlaid->set_overlays(next->config.rls.overlays);
    if (!refused.ok()) {
      counters.failed();
      spdlog::error("reload ({}) rejected, the old configuration keeps serving: {}", why,
                    std::string(refused.message()));
      return;
    }
    if (rls != nullptr && next->rules) {
      rls->reload(next->rules);
      spdlog::info("reloaded the rate-limit rules ({}): {} domains", why, next->rules->domains.size());
    }
    if (quota != nullptr && next->quota) quota->reload(next->quota);
    log_config_warnings(next->config);
    service.reload(std::make_shared<const server::Config>(std::move(next->config)));
    counters.succeeded();
    spdlog::info("reloaded the configuration ({}): {} polic{}", why, service.config()->policies.size(),
                 service.config()->policies.size() == 1 ? "y" : "ies");
  }
};

// Envoy's RateLimitService: the service and its rules (from the directory, or none until xDS
// brings them: no domain, every descriptor OK).
std::unique_ptr<server::RlsService> make_rls(const Loaded& loaded, server::Service& service) {
  server::RlsSettings settings = loaded.config.rls;
  settings.batching = service.batches();  // networked storages: coalesce decisions, as HTTP does
  auto rls = std::make_unique<server::RlsService>(service.limiter(), std::move(settings));  // one pipeline for both
  auto none = std::make_shared<server::RlsConfig>();
  none->source = "xDS";
  rls->reload(loaded.rules ? loaded.rules : std::shared_ptr<const server::RlsConfig>(std::move(none)));
  service.set_json_rls([r = rls.get()](std::string_view body, server::Response& res) {
    server::answer_rls_json(*r, body, res);
  });
  return rls;
}

// The gRPC listener. The listen address, the caps and the header switch are read at start only;
// the rules reload.
absl::Status start_grpc(const Loaded& loaded, server::RlsService& rls, const server::TlsState* tls,
                        const server::XdsClient* xds, server::rlqs::Service* quota,
                        std::unique_ptr<server::GrpcServer>& grpc, std::atomic<server::GrpcServer*>& grpc_for_xds) {
  const server::Config& c = loaded.config;
  grpc = std::make_unique<server::GrpcServer>(rls, c.rls.listen_host, c.rls.listen_port, tls);
  if (quota != nullptr) grpc->add_service(quota);
  if (xds != nullptr) grpc->set_ready(xds->has_rules());
  if (auto s = grpc->start(); !s.ok()) return s;
  spdlog::info("gRPC rate-limit service on {}:{}{} ({} domains from {})", c.rls.listen_host, grpc->port(),
               tls != nullptr ? " over TLS" : "", rls.config()->domains.size(),
               xds != nullptr ? "xDS " + c.rls.xds.server : c.rls.config_dir);
  grpc_for_xds.store(grpc.get());
  if (xds != nullptr) grpc->set_ready(xds->has_rules());  // rules that came while it started
  return absl::OkStatus();
}

// Rules over xDS: each response is read with the overlays, checked like a rules directory (and
// against the storage), then published at once; the stream ACKs it after. `grpc` (set once it
// exists) hears the first rules. `overlaid` keeps the push in force for a reload's overlays.
std::unique_ptr<server::XdsClient> make_xds(const server::Config& c, server::RlsService& rls,
                                            std::atomic<server::GrpcServer*>& grpc,
                                            std::shared_ptr<server::OverlaidRules>& overlaid) {
  auto self = std::make_shared<server::XdsClient*>(nullptr);  // set below, before the stream starts
  auto publish = [&rls, &grpc, self, storage = c.storage](std::shared_ptr<const server::RlsConfig> rules,
                                                          const std::string& version, std::uint64_t unmatched) {
    if (auto s = server::check_rules_storage(*rules, storage); !s.ok()) return s;
    rls.reload(rules);
    spdlog::info("xDS: rules of version {} in force: {} domains", version, rules->domains.size());
    (*self)->set_overlays_unmatched(unmatched);
    if (auto* g = grpc.load()) g->set_ready(true);
    return absl::OkStatus();
  };
  overlaid = std::make_shared<server::OverlaidRules>(c.rls.merge_domains, c.rls.overlays, std::move(publish));
  auto client = std::make_unique<server::XdsClient>(
      c.rls.xds, [o = overlaid](const server::discoveryv3::DiscoveryResponse& r) { return o->apply(r); });
  *self = client.get();
  return client;
}

// The storage of a start: with "background" an unreachable server is no error (decisions follow
// each policy's fail mode until it answers, and reconnect with the storage's backoff).
absl::StatusOr<std::shared_ptr<Storage>> open_service_storage(const server::Config& c) {
  return open_storage(c.storage, c.storage_start == "fail-fast" ? StorageStart::kFailFast : StorageStart::kBackground);
}

// Every storage is maintained on a thread of its own (Storage::maintain: the memory store frees
// idle tables while no decision comes); a networked one is also probed: /readyz and the log follow it.
// After each maintain, `housekeeping` drops unused compiled policies and trims the heap.
std::unique_ptr<server::StorageWatch> watch_storage(const std::shared_ptr<Storage>& storage, server::Service& service,
                                                    server::Housekeeping& housekeeping) {
  server::StorageWatch::Options o;
  o.after_maintain = [&housekeeping, &service](Micros now) {
    housekeeping.run(now);
    service.limiter().end_budgets();  // an idle key's budget slice gives its unused units back
  };
  if (!storage->traits().networked) {
    return std::make_unique<server::StorageWatch>(storage, [](bool, const absl::Status&) {}, o);
  }
  return std::make_unique<server::StorageWatch>(storage, [&service, last = -1](bool up, const absl::Status& error) mutable {
    service.set_storage_reachable(up);
    if (static_cast<int>(up) == last) return;
    last = static_cast<int>(up);
    if (up) {
      spdlog::info("storage reachable");
    } else {
      spdlog::warn("storage unreachable, deciding by each policy's fail mode until it answers: {}",
                   std::string(error.message()));
    }
  }, o);
}

// The certificate state of a start (null without TLS); gRPC gets private copies of its files.
absl::StatusOr<std::unique_ptr<server::TlsState>> open_tls(const Loaded& loaded) {
  if (!loaded.tls) return std::unique_ptr<server::TlsState>();
  auto state = server::TlsState::create(loaded.tls, loaded.rules != nullptr || loaded.quota != nullptr ||
                                                        loaded.config.rls.xds.enabled());
  if (state.ok()) {
    spdlog::info("TLS on{}: {}", loaded.tls->client_ca.empty() ? "" : ", client certificates required",
                 loaded.tls->summary);
  }
  return state;
}

void log_started(const server::Config& c, std::uint16_t port, bool tls) {
  spdlog::info("listening on {}://{}:{} ({} polic{}, storage {})", tls ? "https" : "http", c.listen_host, port,
               c.policies.size(), c.policies.size() == 1 ? "y" : "ies", redact_storage_url(c.storage));
  // The dashboard's address; its data needs the admin token, which is never logged: the page asks
  // for it, or takes it after '#token=' in the address (it stays in the browser).
  const bool any = c.listen_host == "0.0.0.0" || c.listen_host == "::";
  const std::string host = any ? "127.0.0.1" : c.listen_host;
  spdlog::info("dashboard: {}://{}:{}/{}", tls ? "https" : "http",
               host.find(':') != std::string::npos ? "[" + host + "]" : host, port,
               c.admin.token.empty() ? " (its data needs an admin token: none is configured)"
                                     : " (add #token=<the admin token> to the address, or paste it in the page)");
  if (c.admin.token.empty()) {
    spdlog::warn("no admin token ({} or admin.token_file): DELETE /v1/keys, /v1/simulate and /v1/live "
                 "(the dashboard's data) are refused", server::kAdminTokenEnv);
  }
}

// log_format json (LOG_FORMAT=json with --envoyproxy-env): one JSON object a line, for log
// shippers: {"time": RFC 3339 in UTC, "level", "msg"}. spdlog's pattern does not escape the
// message, so a flag of its own writes it as a JSON string.
class JsonString final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    const std::string s = boost::json::serialize(boost::json::value(boost::json::string_view(msg.payload.data(), msg.payload.size())));
    dest.append(s.data(), s.data() + s.size());
  }
  [[nodiscard]] std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<JsonString>(); }
};

void use_log_format(const std::string& format) {
  if (format != "json") return;
  auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
  formatter->add_flag<JsonString>('*').set_pattern(R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","msg":%*})");
  spdlog::set_formatter(std::move(formatter));
}

int failed_to_start(const absl::Status& why) {
  std::cerr << "floodgate serve: " << why.message() << "\n";
  return 2;
}

// Rules over xDS, started; /readyz says so until the first rules come, and with envoyproxy's
// default (start_without_rules false) the service listens only once they have.
absl::StatusOr<std::unique_ptr<server::XdsClient>> start_xds(const server::Config& c, server::RlsService& rls,
                                                             server::Service& service,
                                                             std::atomic<server::GrpcServer*>& grpc_for_xds,
                                                             std::shared_ptr<server::OverlaidRules>& overlaid) {
  std::unique_ptr<server::XdsClient> xds = make_xds(c, rls, grpc_for_xds, overlaid);
  if (auto s = xds->start(); !s.ok()) return s;
  service.set_not_ready([x = xds.get()] {
    return x->has_rules() ? std::string() : std::string("no rate-limit rules have come over xDS yet");
  });
  if (!c.rls.xds.start_without_rules) {
    spdlog::info("xDS: waiting for the first rules from {} before listening", c.rls.xds.server);
    while (!xds->wait_for_rules(std::chrono::seconds(1))) {
    }
  }
  return xds;
}

// What /metrics adds to the HTTP API's own series (each may be null but the first two).
struct ExtraMetrics {
  server::ReloadCounters& reloads;
  server::Housekeeping& housekeeping;
  server::RlsService* rls;
  server::XdsClient* xds;
  server::rlqs::Service* quota;
};

// The service's /metrics additions, and envoyproxy's /healthcheck: 500 from SIGTERM on (while
// the calls in flight drain) and, with HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED, until rules are
// in force.
void add_service_hooks(server::Service& service, ExtraMetrics extra, std::atomic<bool>& terminating,
                       bool needs_rules) {
  service.set_extra_metrics([extra](server::PromText& out) {
    extra.reloads.render(out);
    if (extra.quota != nullptr) extra.quota->render_metrics(out);
    extra.housekeeping.render(out);
    if (extra.rls != nullptr) extra.rls->metrics().render(out);
    if (extra.xds != nullptr) extra.xds->render(out);
  });
  if (extra.quota != nullptr) {
    service.set_extra_live([quota = extra.quota](server::JsonOut& out) { quota->render_live(out); });
  }
  service.set_healthcheck([&terminating, x = extra.xds, needs_rules] {
    if (terminating.load()) return std::string("terminating: draining the calls in flight");
    if (needs_rules && x != nullptr && !x->has_rules()) return std::string("no rate-limit rules loaded yet");
    return std::string();
  });
}

// The Prometheus listener of its own, when configured (null otherwise).
absl::StatusOr<std::unique_ptr<server::MetricsListener>> start_metrics(const server::MetricsSettings& m,
                                                                       server::Service& service) {
  if (!m.enabled) return std::unique_ptr<server::MetricsListener>();
  auto metrics = std::make_unique<server::MetricsListener>(m.listen_host, m.listen_port, m.path,
                                                           [&service] { return service.metrics_text(); });
  if (auto s = metrics->start(); !s.ok()) return s;
  spdlog::info("metrics on http://{}:{}{}", m.listen_host, metrics->port(), m.path);
  return metrics;
}

// The log: on stderr (stdout stays for data), at the configured level and format, with what the
// command line and the file warned about.
void start_logging(const server::Config& c) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("floodgate"));
  spdlog::set_level(spdlog::level::from_str(c.log_level));
  use_log_format(c.log_format);
  log_start_warnings();
  log_config_warnings(c);
}

// The port files, once the listeners are up (gRPC's when there is one and a file is asked for).
void write_port_files(const ServeArgs& args, const server::GrpcServer* grpc, unsigned short http_port) {
  if (grpc != nullptr && !args.grpc_port_file.empty()) write_port_file(args.grpc_port_file, grpc->port());
  if (!args.port_file.empty()) write_port_file(args.port_file, http_port);
}

// After the HTTP server's last call: budget slices' unused units go back, the listeners stop.
void stopped(server::Service& service, server::MetricsListener* metrics, std::atomic<server::GrpcServer*>& grpc_for_xds,
             server::XdsClient* xds) {
  service.limiter().flush_budgets();
  if (metrics != nullptr) metrics->stop();
  grpc_for_xds.store(nullptr);
  if (xds != nullptr) xds->stop();
  spdlog::info("stopped");
}

int run(const ServeArgs& args) {
  if (!args.check_config.empty()) return check_config(args);
  auto loaded = load_checked(args, args.config_path);
  if (!loaded.ok()) return failed_to_start(loaded.status());
  start_logging(loaded->config);
  auto tls = open_tls(*loaded);
  if (!tls.ok()) return failed_to_start(tls.status());
  auto storage = open_service_storage(loaded->config);
  if (!storage.ok()) return failed_to_start(storage.status());
  auto installed = std::make_shared<const server::Config>(loaded->config);
  Limiter limiter(*storage);  // one decision pipeline, borrowed by the HTTP API and the gRPC service
  server::Service service(installed, limiter);
  server::ReloadCounters reloads;
  std::unique_ptr<server::RlsService> rls;
  auto opened_quota = server::rlqs::Service::open(loaded->quota, SystemClock::instance(), *storage);
  if (!opened_quota.ok()) return failed_to_start(opened_quota.status());
  auto quota = *std::move(opened_quota);  // outlives the gRPC server
  std::unique_ptr<server::GrpcServer> grpc;
  std::atomic<server::GrpcServer*> grpc_for_xds{nullptr};
  std::shared_ptr<server::OverlaidRules> overlaid;  // with xDS: the overlays a reload changes
  std::unique_ptr<server::XdsClient> xds;
  const server::XdsSettings& xds_settings = loaded->config.rls.xds;
  if (loaded->rules || xds_settings.enabled() || quota) rls = make_rls(*loaded, service);
  if (xds_settings.enabled()) {
    auto started = start_xds(loaded->config, *rls, service, grpc_for_xds, overlaid);
    if (!started.ok()) return failed_to_start(started.status());
    xds = *std::move(started);
  }
  if (rls) {
    if (auto s = start_grpc(*loaded, *rls, tls->get(), xds.get(), quota.get(), grpc, grpc_for_xds); !s.ok()) {
      return failed_to_start(s);
    }
  }
  server::Housekeeping housekeeping({[&service] { return service.drop_unused_policies(); },
                                     [r = rls.get()] { return r == nullptr ? 0 : r->drop_unused_overrides(); }});
  const auto storage_watch = watch_storage(*storage, service, housekeeping);  // stopped before those go
  std::atomic<bool> terminating{false};
  add_service_hooks(service, {reloads, housekeeping, rls.get(), xds.get(), quota.get()}, terminating,
                    installed->rls.healthcheck_needs_rules);
  // tls.http false (envoyproxy's GRPC_SERVER_USE_TLS): the certificate is the gRPC service's only.
  const server::TlsState* http_tls = installed->tls.http ? tls->get() : nullptr;
  server::HttpServer http(service, *installed, http_tls);
  if (auto s = http.start(); !s.ok()) return failed_to_start(s);
  log_started(*installed, http.port(), http_tls != nullptr);
  auto metrics = start_metrics(installed->metrics, service);  // envoyproxy's USE_PROMETHEUS / PROMETHEUS_ADDR
  if (!metrics.ok()) return failed_to_start(metrics.status());
  // Ours before the port files say that we are up: a SIGHUP or SIGTERM must not meet the default exit.
  boost::asio::io_context control;
  boost::asio::signal_set signals(control, SIGTERM, SIGINT, SIGHUP);
  write_port_files(args, grpc.get(), http.port());
  Reloader reload{args, installed->rls.config_dir, service, rls.get(), reloads, tls->get(), quota.get(), overlaid.get()};
  watch_and_wait(control, signals, args.config_path, installed->rls.config_dir, reload, [&] {
    terminating.store(true);
    if (grpc) grpc->shutdown(installed->http.drain_timeout);
    http.drain();
  }, loaded->quota_dir);
  http.join();
  stopped(service, metrics->get(), grpc_for_xds, xds.get());
  return 0;
}

}  // namespace

std::function<int()> add_serve(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve rate-limit decisions over HTTP.");
  cmd->add_option("--config,-c", args->config_path, "YAML configuration file");
  cmd->add_option("--listen", args->listen, "HOST:PORT (default 127.0.0.1:8080)");
  cmd->add_option("--storage", args->storage, "storage URL (default memory)");
  cmd->add_option("--storage-start", args->storage_start,
                  "when the storage cannot be reached at start: background (default: start, decide by each "
                  "policy's fail mode, connect with backoff) or fail-fast (exit)")
      ->check(CLI::IsMember({"background", "fail-fast"}));
  cmd->add_option("--batching", args->batching,
                  "coalesce decisions into storage batches: auto (networked storages), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  cmd->add_option("--threads", args->threads, "I/O threads (default: one per core)");
  cmd->add_option("--log-level", args->log_level, "trace, debug, info, warn, error, critical, off");
  cmd->add_option("--check-config", args->check_config, "validate a configuration file and exit");
  cmd->add_option("--port-file", args->port_file, "write the bound port to this file");
  cmd->add_option("--rls-config", args->rls_config,
                  "directory of envoyproxy/ratelimit YAML files: serve Envoy's RateLimitService over gRPC");
  cmd->add_option("--rlqs-config", args->rlqs_config,
                  "directory of RLQS rule files: serve Envoy's RateLimitQuotaService over gRPC (docs/rlqs.md)");
  cmd->add_option("--grpc-listen", args->grpc_listen, "HOST:PORT of the gRPC service (default 127.0.0.1:8081)");
  cmd->add_option("--grpc-port-file", args->grpc_port_file, "write the bound gRPC port to this file");
  cmd->add_flag("--envoyproxy-env", args->envoyproxy_env,
                "configure from envoyproxy/ratelimit's environment variables (PORT, GRPC_PORT, RUNTIME_*, "
                "REDIS_*, ...; docs/envoy.md); command-line options still win");
  cmd->add_option("--tls-cert", args->tls_cert,
                  "PEM certificate (chain) of the service: HTTPS and gRPC over TLS (reloaded on SIGHUP)");
  cmd->add_option("--tls-key", args->tls_key, "PEM private key of --tls-cert");
  cmd->add_option("--tls-client-ca", args->tls_client_ca,
                  "PEM CA certificates: require and verify client certificates (mTLS) on both listeners");
  cmd->add_flag("--rls-response-headers", args->rls_headers,
                "add RateLimit / X-RateLimit-* headers to ShouldRateLimit responses");
  return [args] {
    const server::GrpcRuntime grpc_runtime;  // outlives everything run() makes: gRPC's threads end before the process
    // In Envoy Gateway's Deployment (command /bin/ratelimit, no arguments) the file is named by
    // the environment: the container's env takes FLOODGATE_CONFIG (docs/envoy-gateway.md).
    const char* file = std::getenv("FLOODGATE_CONFIG");
    if (args->config_path.empty() && args->envoyproxy_env && file != nullptr) args->config_path = file;
    return run(*args);
  };
}

}  // namespace floodgate::cli
