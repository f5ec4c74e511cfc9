// Reading the service's YAML files (the main configuration and envoyproxy/ratelimit rules): every
// error names the file and line of the node it is about, "<file>:<line>: <message>".
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

namespace floodgate::server::yaml {

/// Thrown by the helpers below; the loaders catch it and return it as an InvalidArgument status.
struct Error {
  std::string message;
};

[[noreturn]] inline void fail(const std::string& source, const YAML::Node& node, const std::string& what) {
  const int line = node.Mark().line >= 0 ? node.Mark().line + 1 : 0;
  throw Error{fmt::format("{}:{}: {}", source, line, what)};
}

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

/// A key of `map` not in `known` is an error that lists the known ones (a typo is never ignored).
inline void check_keys(const std::string& source, const YAML::Node& map,
                       std::initializer_list<std::string_view> known, const std::string& where) {
  for (const auto& kv : map) {
    const std::string key = kv.first.as<std::string>();
    bool ok = false;
    for (std::string_view k : known) ok = ok || k == key;
    if (!ok) {
      std::string list;
      for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      fail(source, kv.first, fmt::format("unknown key \"{}\" in {} (known: {})", key, where, list));
    }
  }
}

}  // namespace floodgate::server::yaml
