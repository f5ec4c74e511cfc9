// What `serve` checks before it starts, beyond the file's schema (config/config.hpp: check_startup).
#include <sys/resource.h>

#include <fmt/format.h>
#include <spdlog/common.h>

#include "server/config/config.hpp"
#include "storage/url.hpp"

namespace floodgate::server {

namespace {

absl::Status check_threads(unsigned threads) {
  if (threads > limits::kMaxThreads) {
    return absl::InvalidArgumentError(
        fmt::format("threads must be from 1 to {}, not {}", limits::kMaxThreads, threads));
  }
  struct rlimit rl {};
  if (threads > 0 && ::getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      threads >= rl.rlim_cur) {
    return absl::InvalidArgumentError(fmt::format(
        "threads {}: the process may run at most {} threads (ulimit -u)", threads, rl.rlim_cur));
  }
  return absl::OkStatus();
}

absl::Status check_log_level(const std::string& level) {
  if (spdlog::level::from_str(level) == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(fmt::format(
        "unknown log_level \"{}\" (trace, debug, info, warn, error, critical, off)", level));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status check_startup(const Config& c) {
  if (auto s = check_threads(c.threads); !s.ok()) return s;
  if (auto s = check_log_level(c.log_level); !s.ok()) return s;
  auto check = check_storage_url(c.storage);
  if (!check.ok()) return check.status();
  for (const ServicePolicy& sp : c.policies) {
    if (auto s = (*check)(*sp.policy); !s.ok()) return s;
    for (const auto& [key, policy] : sp.overrides) {
      if (auto s = (*check)(*policy); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace floodgate::server
