// Reading the service's YAML files (the main configuration and envoyproxy/ratelimit rules): every
// error names the file, line and column of the node it is about, "<file>:<line>:<column>: <message>".
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "absl/status/statusor.h"

namespace floodgate::server::yaml {

/// Thrown by the helpers below; the loaders catch it and return it as an InvalidArgument status.
struct Error {
  std::string message;
};

/// "<source>:<line>:<column>" of a position (1-based; 0 when yaml-cpp does not know it).
std::string where(const std::string& source, const YAML::Mark& mark);

[[noreturn]] void fail(const std::string& source, const YAML::Node& node, const std::string& what);

/// The node's value as T; a map, a list or a value of another kind is an error naming `what`.
template <class T>
T scalar(const std::string& source, const YAML::Node& node, const std::string& what) {
  if (!node.IsScalar()) fail(source, node, fmt::format("{} must be a single value", what));
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    fail(source, node, fmt::format("{} has a value of the wrong kind: \"{}\"", what, node.Scalar()));
  }
}

/// A whole number in [min, max]; `unit` ("milliseconds", "bytes", "" for a count) is named in the
/// error, e.g. "http.idle_timeout_ms must be a whole number from 1 to 86400000 (milliseconds)".
std::int64_t integer(const std::string& source, const YAML::Node& node, const std::string& what,
                     std::int64_t min, std::int64_t max, std::string_view unit = "");

/// A key of `map` not in `known` is an error that lists the known ones (a typo is never ignored).
void check_keys(const std::string& source, const YAML::Node& map,
                std::initializer_list<std::string_view> known, const std::string& where);

/// Parses a YAML text that must hold one document (none: a null node). A second document, a key
/// repeated in one map (yaml-cpp keeps the first silently) or a syntax error throw Error.
YAML::Node load_document(const std::string& text, const std::string& source);

/// The largest configuration or rule file read (a config is a few kilobytes).
inline constexpr std::size_t kMaxFileBytes = 1024 * 1024;

/// The text of a configuration file: a regular file (or a link to one) of at most kMaxFileBytes.
/// A directory, a device (/dev/zero) or a larger file is refused without reading it whole.
/// Errors: NotFound (cannot open), InvalidArgument (not a regular file, too large).
absl::StatusOr<std::string> read_config_file(const std::string& path);

/// The YAML files (*.yaml, *.yml) of directory `dir`, sorted by path: the rule directories' files.
/// Errors: NotFound naming `dir` as "a directory of `what`"; Unavailable when it cannot be read.
absl::StatusOr<std::vector<std::string>> yaml_files_in(const std::string& dir, std::string_view what);

/// Runs `parse`, turning Error and yaml-cpp exceptions into InvalidArgument statuses.
template <class F>
absl::Status guarded(const std::string& source, F&& parse) {
  try {
    parse();
  } catch (const Error& e) {
    return absl::InvalidArgumentError(e.message);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(fmt::format("{}: {}", where(source, e.mark), e.msg));
  }
  return absl::OkStatus();
}

}  // namespace floodgate::server::yaml
