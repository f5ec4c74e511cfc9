// Storage URLs: scheme://[user:password@]hosts[/path][?name=value&…], parsed once.
#pragma once

#include <charconv>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "floodgate/policy.hpp"
#include "floodgate/storage.hpp"

namespace floodgate {

struct StorageUrl {
  std::string text;       ///< the URL as given, any password as "***" (for error messages)
  std::string scheme;     ///< "memory", "redis", "redis+unix", "redis-cluster", …
  std::string user;
  std::string password;
  std::string hosts;      ///< what stands between "//" (after any user info) and the path
  std::string path;       ///< from the first '/' after the hosts, without the query
  std::vector<std::pair<std::string, std::string>> query;
};

/// InvalidArgument naming the URL by its scheme and hosts only (it may hold a password).
absl::Status storage_url_error(const StorageUrl& url, std::string_view problem);

/// Splits a URL; "memory" alone is accepted as "memory://". Errors: InvalidArgument.
absl::StatusOr<StorageUrl> parse_storage_url(std::string_view text);

/// A whole-number option of a storage URL: its name, its range, and where the value goes.
template <class Options>
struct NumericOption {
  std::string_view name;
  long long min;
  long long max;
  void (*set)(Options&, long long);
};

/// Parses option `name` = `value` if `table` has it: nullopt when it does not, else OK or
/// InvalidArgument ("option NAME=VALUE must be a whole number from MIN to MAX", after the URL's
/// scheme and hosts).
template <class Options, std::size_t N>
std::optional<absl::Status> parse_numeric_option(const StorageUrl& url, const NumericOption<Options> (&table)[N],
                                                 const std::string& name, const std::string& value, Options& o) {
  for (const NumericOption<Options>& opt : table) {
    if (opt.name != name) continue;
    long long n = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || end != value.data() + value.size() || n < opt.min || n > opt.max) {
      return storage_url_error(url, "option " + name + "=" + value + " must be a whole number from " +
                                        std::to_string(opt.min) + " to " + std::to_string(opt.max));
    }
    opt.set(o, n);
    return absl::OkStatus();
  }
  return std::nullopt;
}

/// The URL with any password replaced by "***" (for logs, errors and the live view).
std::string redact_storage_url(std::string_view text);

/// Other storage kinds plug in here (the Redis storage defines it): returns nullopt for a scheme it
/// does not know.
std::optional<absl::StatusOr<std::shared_ptr<Storage>>> open_registered_storage(
    const StorageUrl& url, StorageStart start);

/// Checks one policy against what a storage keeps exactly (e.g. the Redis storage's longest
/// period): OK, or InvalidArgument naming the policy and the limit.
using PolicyCheck = std::function<absl::Status(const Policy&)>;

/// Checks a storage URL without connecting: its syntax, scheme and options, exactly as
/// open_storage would read them. Returns the check of a policy against that storage, for the
/// configuration's policies. Errors: InvalidArgument, as open_storage's.
absl::StatusOr<PolicyCheck> check_storage_url(std::string_view text);

/// check_storage_url for the storage kinds that plug in (as open_registered_storage).
std::optional<absl::StatusOr<PolicyCheck>> check_registered_storage(const StorageUrl& url);

/// The memcached storage (storage/memcached/): nullopt for a scheme other than memcached. With
/// kFailFast an unreachable server is an error; with kBackground it is not (as Redis).
std::optional<absl::StatusOr<std::shared_ptr<Storage>>> open_memcached_storage(
    const StorageUrl& url, StorageStart start);

/// check_storage_url for memcached:// (storage/memcached/): nullopt for another scheme.
std::optional<absl::StatusOr<PolicyCheck>> check_memcached_storage(const StorageUrl& url);

}  // namespace floodgate
