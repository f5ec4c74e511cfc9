// The service's JSON writer (see api/json_out.hpp).
#include "server/api/json_out.hpp"

#include <cmath>

#include <boost/json/serialize.hpp>
#include <boost/json/string_view.hpp>
#include <fmt/format.h>

#include "floodgate/decision.hpp"

namespace floodgate::server {

namespace {
// The length of the valid UTF-8 sequence at the start of `s`, or 0 (RFC 3629: no overlongs, no
// surrogates, at most U+10FFFF).
std::size_t utf8_sequence(std::string_view s) {
  const auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c >= 0xE0 && c <= 0xEF) { n = 3; lo = c == 0xE0 ? 0xA0 : 0x80; hi = c == 0xED ? 0x9F : 0xBF; }
  else if (c >= 0xF0 && c <= 0xF4) { n = 4; lo = c == 0xF0 ? 0x90 : 0x80; hi = c == 0xF4 ? 0x8F : 0xBF; }
  else return 0;
  if (s.size() < n || b(1) < lo || b(1) > hi) return 0;
  for (std::size_t i = 2; i < n; ++i) {
    if (b(i) < 0x80 || b(i) > 0xBF) return 0;
  }
  return n;
}
}  // namespace

std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  while (!s.empty()) {
    const std::size_t n = utf8_sequence(s);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      s.remove_prefix(1);
    } else {
      out.append(s.substr(0, n));
      s.remove_prefix(n);
    }
  }
  return out;
}

void JsonOut::value_start() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_) out_ += ", ";
  first_ = false;
}

JsonOut& JsonOut::begin_object() {
  value_start();
  out_ += '{';
  closers_.push_back('}');
  first_ = true;
  return *this;
}

JsonOut& JsonOut::begin_array() {
  value_start();
  out_ += '[';
  closers_.push_back(']');
  first_ = true;
  return *this;
}

JsonOut& JsonOut::end() {
  out_ += closers_.back();
  closers_.pop_back();
  first_ = false;
  return *this;
}

JsonOut& JsonOut::key(std::string_view k) {
  str(k);
  out_ += ": ";
  after_key_ = true;
  return *this;
}

JsonOut& JsonOut::str(std::string_view s) {
  value_start();
  const std::string clean = valid_utf8(s);
  out_ += boost::json::serialize(boost::json::string_view(clean.data(), clean.size()));
  return *this;
}

JsonOut& JsonOut::num(std::int64_t v) {
  value_start();
  fmt::format_to(std::back_inserter(out_), "{}", v);
  return *this;
}

JsonOut& JsonOut::num(std::uint64_t v) {
  value_start();
  fmt::format_to(std::back_inserter(out_), "{}", v);
  return *this;
}

JsonOut& JsonOut::real(double v) {
  if (!std::isfinite(v)) return null();
  value_start();
  fmt::format_to(std::back_inserter(out_), "{}", v);
  return *this;
}

JsonOut& JsonOut::seconds(Micros us) {
  if (us == kNever) return null();
  value_start();
  out_ += format_seconds(us);
  return *this;
}

JsonOut& JsonOut::boolean(bool v) {
  value_start();
  out_ += v ? "true" : "false";
  return *this;
}

JsonOut& JsonOut::null() {
  value_start();
  out_ += "null";
  return *this;
}

std::string JsonOut::take() {
  out_ += '\n';
  return std::move(out_);
}

}  // namespace floodgate::server
