// A streaming JSON writer for the service's responses: structure and commas here, string escaping
// by Boost.JSON, durations as exact decimal seconds ("12.5", which Boost.JSON would print 1.25E1).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/clock.hpp"

namespace floodgate::server {

/// Writes one JSON document. Strings are escaped by Boost.JSON after invalid UTF-8 is replaced by
/// U+FFFD, so the output is always valid UTF-8 JSON whatever bytes a key holds.
///
///     JsonOut j;
///     j.begin_object().key("allowed").boolean(true).key("reset_after").seconds(1'500'000).end();
///     j.take()  // {"allowed": true, "reset_after": 1.5}
class JsonOut {
 public:
  JsonOut& begin_object();
  JsonOut& begin_array();
  JsonOut& end();  ///< closes the innermost object or array
  JsonOut& key(std::string_view k);
  JsonOut& str(std::string_view s);
  JsonOut& num(std::int64_t v);
  JsonOut& num(std::uint64_t v);
  JsonOut& num(int v) { return num(static_cast<std::int64_t>(v)); }
  JsonOut& real(double v);  ///< the shortest decimal that reads back as `v`; NaN or ±inf as null
  JsonOut& seconds(Micros us);  ///< µs as decimal seconds; kNever as null
  JsonOut& boolean(bool v);
  JsonOut& null();

  /// The document, with a trailing newline.
  [[nodiscard]] std::string take();

 private:
  void value_start();
  std::string out_;
  std::vector<char> closers_;  // '}' or ']' per open container
  bool first_ = true;          // no value yet in the innermost container
  bool after_key_ = false;
};

/// `s` with every invalid UTF-8 sequence (and a sequence cut at the end) replaced by U+FFFD.
[[nodiscard]] std::string valid_utf8(std::string_view s);

}  // namespace floodgate::server
