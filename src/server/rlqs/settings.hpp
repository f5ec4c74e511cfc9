// The `rlqs` section of the configuration file: where the Rate Limit Quota Service's rules are.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace floodgate::server::rlqs {

/// The rules directory that the configuration file at `path` names in `rlqs: {config: DIR}` (a
/// relative DIR is relative to the file); "" when the file has no `rlqs` section or `path` is
/// empty. The main configuration (config/config.cpp) accepts the key and leaves it to this.
/// Errors: those of reading the file, and InvalidArgument "<file>:<line>:<column>: …" for the
/// section.
absl::StatusOr<std::string> rules_dir_of(const std::string& path);

}  // namespace floodgate::server::rlqs
