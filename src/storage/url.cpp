#include "storage/url.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace floodgate {

namespace {
// The user info's password as "***".
std::string redact_user_info(std::string_view text) {
  const std::size_t scheme = text.find("://");
  if (scheme == std::string_view::npos) return std::string(text);
  const std::size_t start = scheme + 3;
  const std::size_t end = std::min(text.find('?', start), text.size());
  const std::size_t at = text.substr(start, end - start).rfind('@');
  if (at == std::string_view::npos) return std::string(text);
  const std::size_t colon = text.substr(start, at).find(':');
  if (colon == std::string_view::npos) return std::string(text);
  std::string out(text.substr(0, start + colon + 1));
  out += "***";
  out += text.substr(start + at);
  return out;
}
}  // namespace

std::string redact_storage_url(std::string_view text) {
  std::string out = redact_user_info(text);
  // Options whose name ends in "password" (redis+sentinel://'s password, sentinel_password).
  const std::size_t q = out.find('?');
  if (q == std::string::npos) return out;
  std::string query;
  std::string_view rest = std::string_view(out).substr(q + 1);
  while (true) {
    const std::size_t amp = rest.find('&');
    const std::string_view item = rest.substr(0, amp);
    const std::size_t eq = item.find('=');
    const bool secret = eq != std::string_view::npos && item.substr(0, eq).ends_with("password") && item.size() > eq + 1;
    query += secret ? std::string(item.substr(0, eq + 1)) + "***" : std::string(item);
    if (amp == std::string_view::npos) break;
    query += '&';
    rest = rest.substr(amp + 1);
  }
  return out.substr(0, q + 1) + query;
}

absl::StatusOr<StorageUrl> parse_storage_url(std::string_view text) {
  StorageUrl url;
  url.text = redact_storage_url(text);
  if (text == "memory") {
    url.scheme = "memory";
    return url;
  }
  const std::size_t colon = text.find("://");
  if (colon == std::string_view::npos || colon == 0) {
    return absl::InvalidArgumentError(
        fmt::format("storage URL \"{}\": expected scheme://… (e.g. memory:// or redis://host:6379)", url.text));
  }
  url.scheme = std::string(text.substr(0, colon));
  std::string_view rest = text.substr(colon + 3);
  if (const std::size_t q = rest.find('?'); q != std::string_view::npos) {
    std::string_view query = rest.substr(q + 1);
    rest = rest.substr(0, q);
    while (!query.empty()) {
      const std::size_t amp = query.find('&');
      const std::string_view item = query.substr(0, amp);
      const std::size_t eq = item.find('=');
      if (eq == std::string_view::npos || eq == 0) {
        return absl::InvalidArgumentError(
            fmt::format("storage URL \"{}\": option \"{}\" must be name=value", url.text, item));
      }
      url.query.emplace_back(std::string(item.substr(0, eq)), std::string(item.substr(eq + 1)));
      query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    }
  }
  if (const std::size_t at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view info = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const std::size_t c = info.find(':');
    url.user = std::string(info.substr(0, c));
    if (c != std::string_view::npos) url.password = std::string(info.substr(c + 1));
  }
  const std::size_t slash = rest.find('/');
  url.hosts = std::string(rest.substr(0, slash));
  if (slash != std::string_view::npos) url.path = std::string(rest.substr(slash));
  return url;
}

absl::Status storage_url_error(const StorageUrl& url, std::string_view problem) {
  return absl::InvalidArgumentError(
      "storage URL \"" + url.scheme + "://" + url.hosts + "…\": " + std::string(problem));
}

}  // namespace floodgate
