// Library messages through spdlog, at most a few lines a second (see common/library_log.hpp); the hooks
// into protobuf and gRPC are in grpc/library_log_hooks.cpp (the server library, which links them).
#include "server/common/library_log.hpp"

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>

#include <spdlog/spdlog.h>

namespace floodgate::server {

namespace {

std::atomic<std::uint32_t> g_per_second{10};
std::atomic<std::uint64_t> g_suppressed{0};
std::atomic<std::uint64_t> g_grpc_tls_failures{0};
std::mutex g_mu;
std::int64_t g_second = 0;            // guarded by g_mu: the second being counted
std::uint32_t g_lines = 0;            // guarded by g_mu: lines written in it
std::uint64_t g_unreported = 0;       // guarded by g_mu: suppressed since the last report

}  // namespace

bool library_log(int spdlog_level, std::string_view source, std::string_view message) {
  const auto level = static_cast<spdlog::level::level_enum>(spdlog_level);
  const std::int64_t second = std::chrono::duration_cast<std::chrono::seconds>(
                                  std::chrono::steady_clock::now().time_since_epoch()).count();
  std::uint64_t report = 0;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (second != g_second) {
      g_second = second;
      g_lines = 0;
    }
    if (g_lines >= g_per_second.load(std::memory_order_relaxed)) {
      ++g_unreported;
      g_suppressed.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    ++g_lines;
    report = g_unreported;
    g_unreported = 0;
  }
  if (report > 0) spdlog::warn("{} library log lines suppressed (at most {} a second)", report, g_per_second.load());
  spdlog::log(level, "{}: {}", source, message);
  return true;
}

void set_library_log_rate(std::uint32_t per_second) noexcept {
  g_per_second.store(per_second, std::memory_order_relaxed);
}

void count_grpc_tls_handshake_failure() noexcept { g_grpc_tls_failures.fetch_add(1, std::memory_order_relaxed); }

std::uint64_t grpc_tls_handshake_failures() noexcept { return g_grpc_tls_failures.load(std::memory_order_relaxed); }

std::uint64_t library_log_suppressed() noexcept { return g_suppressed.load(std::memory_order_relaxed); }

}  // namespace floodgate::server
