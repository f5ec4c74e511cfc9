// Storage URLs: scheme://[user:password@]hosts[/path][?name=value&…], parsed once.
#pragma once

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

/// Splits a URL; "memory" alone is accepted as "memory://". Errors: InvalidArgument.
absl::StatusOr<StorageUrl> parse_storage_url(std::string_view text);

/// The URL with any password replaced by "***" (for logs, errors and the live view).
std::string redact_storage_url(std::string_view text);

/// Other storage kinds plug in here (the Redis storage defines it): returns nullopt for a scheme it
/// does not know.
std::optional<absl::StatusOr<std::shared_ptr<Storage>>> open_registered_storage(
    const StorageUrl& url);

/// Checks one policy against what a storage keeps exactly (e.g. the Redis storage's longest
/// period): OK, or InvalidArgument naming the policy and the limit.
using PolicyCheck = std::function<absl::Status(const Policy&)>;

/// Checks a storage URL without connecting: its syntax, scheme and options, exactly as
/// open_storage would read them. Returns the check of a policy against that storage, for the
/// configuration's policies. Errors: InvalidArgument, as open_storage's.
absl::StatusOr<PolicyCheck> check_storage_url(std::string_view text);

/// check_storage_url for the storage kinds that plug in (as open_registered_storage).
std::optional<absl::StatusOr<PolicyCheck>> check_registered_storage(const StorageUrl& url);

}  // namespace floodgate
