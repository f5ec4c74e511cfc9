// Library messages through spdlog, at most a few lines a second (see library_log.hpp).
#include "server/library_log.hpp"

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>

#include <grpc/support/log.h>
#include <google/protobuf/stubs/logging.h>
#include <spdlog/spdlog.h>

namespace floodgate::server {

namespace {

std::atomic<std::uint32_t> g_per_second{10};
std::atomic<std::uint64_t> g_suppressed{0};
std::mutex g_mu;
std::int64_t g_second = 0;            // guarded by g_mu: the second being counted
std::uint32_t g_lines = 0;            // guarded by g_mu: lines written in it
std::uint64_t g_unreported = 0;       // guarded by g_mu: suppressed since the last report

void from_protobuf(google::protobuf::LogLevel level, const char* file, int line, const std::string& message) {
  const int l = level >= google::protobuf::LOGLEVEL_ERROR     ? spdlog::level::err
                : level == google::protobuf::LOGLEVEL_WARNING ? spdlog::level::warn
                                                               : spdlog::level::debug;
  library_log(l, "libprotobuf", std::string(file) + ":" + std::to_string(line) + ": " + message);
}

void from_grpc(gpr_log_func_args* args) {
  const int l = args->severity == GPR_LOG_SEVERITY_ERROR  ? spdlog::level::err
                : args->severity == GPR_LOG_SEVERITY_INFO ? spdlog::level::info
                                                          : spdlog::level::debug;
  library_log(l, "grpc", args->message != nullptr ? args->message : "");
}

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

void route_library_logs(std::uint32_t per_second) {
  g_per_second.store(per_second, std::memory_order_relaxed);
  google::protobuf::SetLogHandler(&from_protobuf);
  gpr_set_log_function(&from_grpc);
}

std::uint64_t library_log_suppressed() noexcept { return g_suppressed.load(std::memory_order_relaxed); }

}  // namespace floodgate::server
