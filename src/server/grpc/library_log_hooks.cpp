// protobuf's and gRPC's log handlers, routed through library_log (common/library_log.hpp).
#include <string>
#include <string_view>

#include <grpc/support/log.h>
#include <google/protobuf/stubs/logging.h>
#include <spdlog/spdlog.h>

#include "server/common/library_log.hpp"

namespace floodgate::server {

namespace {

void from_protobuf(google::protobuf::LogLevel level, const char* file, int line, const std::string& message) {
  const int l = level >= google::protobuf::LOGLEVEL_ERROR     ? spdlog::level::err
                : level == google::protobuf::LOGLEVEL_WARNING ? spdlog::level::warn
                                                               : spdlog::level::debug;
  library_log(l, "libprotobuf", std::string(file) + ":" + std::to_string(line) + ": " + message);
}

void from_grpc(gpr_log_func_args* args) {
  constexpr std::string_view kHandshakeFailed = "Handshake failed with fatal error";
  if (args->message != nullptr && std::string_view(args->message).starts_with(kHandshakeFailed)) {
    count_grpc_tls_handshake_failure();
  }
  const int l = args->severity == GPR_LOG_SEVERITY_ERROR  ? spdlog::level::err
                : args->severity == GPR_LOG_SEVERITY_INFO ? spdlog::level::info
                                                          : spdlog::level::debug;
  library_log(l, "grpc", args->message != nullptr ? args->message : "");
}

}  // namespace

void route_library_logs(std::uint32_t per_second) {
  set_library_log_rate(per_second);
  google::protobuf::SetLogHandler(&from_protobuf);
  gpr_set_log_function(&from_grpc);
}

}  // namespace floodgate::server
