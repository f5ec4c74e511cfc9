// open_storage(url): the one place that turns a storage URL into a Storage.
#include <charconv>
#include <string>

#include <fmt/format.h>

#include "floodgate/memory_storage.hpp"
#include "floodgate/storage.hpp"
#include "storage/url.hpp"

namespace floodgate {

namespace {

absl::StatusOr<MemoryStorageOptions> memory_options(const StorageUrl& url) {
  MemoryStorageOptions o;
  for (const auto& [name, value] : url.query) {
    std::size_t n = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || end != value.data() + value.size() || n == 0) {
      return absl::InvalidArgumentError(fmt::format(
          "storage URL \"{}\": option {}={} must be a whole number of at least 1", url.text, name,
          value));
    }
    if (name == "max_keys") {
      o.max_keys = n;
    } else if (name == "shards") {
      o.shards = n;
    } else if (name == "max_policies") {
      o.max_policies = n;
    } else if (name == "max_request_policies") {
      o.max_request_policies = n;
    } else if (name == "request_policy_shards") {
      o.request_policy_shards = n;
    } else if (name == "max_log_bytes") {
      o.max_log_bytes = n;
    } else if (name == "max_reservations") {
      o.max_reservations = n;
    } else if (name == "max_request_log_bytes") {
      o.max_request_log_bytes = n;
    } else {
      return absl::InvalidArgumentError(fmt::format(
          "storage URL \"{}\": unknown option \"{}\" (memory takes max_keys, shards, max_policies, max_request_policies, request_policy_shards, max_log_bytes, max_request_log_bytes and max_reservations)", url.text,
          name));
    }
  }
  return o;
}

absl::Status unknown_storage(std::string_view text) {
  return absl::InvalidArgumentError(fmt::format(
      "unknown storage \"{}\": expected memory, redis://host:port, redis+unix:///path, "
      "redis-cluster://host:port[,host:port…] (rediss:// and rediss-cluster:// with TLS) or "
      "memcached://host:port[,host:port…]",
      text));
}

}  // namespace

absl::StatusOr<std::shared_ptr<Storage>> open_storage(std::string_view text, StorageStart start) {
  auto url = parse_storage_url(text);
  if (!url.ok()) return url.status();
  if (url->scheme == "memory") {
    auto o = memory_options(*url);
    if (!o.ok()) return o.status();
    return std::make_shared<MemoryStorage>(*o);
  }
  if (auto opened = open_memcached_storage(*url, start)) return *std::move(opened);
  if (auto opened = open_registered_storage(*url, start)) return *std::move(opened);
  return unknown_storage(text);
}

absl::StatusOr<PolicyCheck> check_storage_url(std::string_view text) {
  auto url = parse_storage_url(text);
  if (!url.ok()) return url.status();
  if (url->scheme == "memory") {
    if (auto o = memory_options(*url); !o.ok()) return o.status();
    // The memory store keeps every limit that Policy::make accepts exactly.
    return PolicyCheck([](const Policy&) { return absl::OkStatus(); });
  }
  if (auto checked = check_memcached_storage(*url)) return *std::move(checked);
  if (auto checked = check_registered_storage(*url)) return *std::move(checked);
  return unknown_storage(text);
}

}  // namespace floodgate
