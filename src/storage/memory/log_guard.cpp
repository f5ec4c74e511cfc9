#include "storage/memory/log_guard.hpp"

#include <fmt/format.h>

namespace floodgate::detail {

absl::Status LogGuard::refusal() const {
  if (too_long) {
    return absl::ResourceExhaustedError(fmt::format(
        "a moving window's log holds at most {} entries per key and limit: this hit needs more (use a smaller "
        "amount or another strategy)", moving_window::EntryLog::kMaxCapacity));
  }
  const bool request = full == logs.request;
  return absl::ResourceExhaustedError(fmt::format(
      "the memory storage's moving-window logs{} are at their bound of {} bytes: this hit needs {} more "
      "(raise {} in the storage URL, or use a smaller amount or another strategy)",
      request ? " of inline limits and limit overrides" : "", full->max, reserved,
      request ? "max_request_log_bytes" : "max_log_bytes"));
}

}  // namespace floodgate::detail
