// RFC 9112's request-target forms, as pure functions.
#include "server/http/request_target.hpp"

#include <boost/beast/http/verb.hpp>
#include <boost/url/parse.hpp>

namespace floodgate::server {

std::optional<std::string> origin_of_absolute(std::string_view target) {
  if (target.empty() || target.front() == '/') return std::nullopt;
  const auto uri = boost::urls::parse_absolute_uri(target);
  if (!uri || (uri->scheme_id() != boost::urls::scheme::http && uri->scheme_id() != boost::urls::scheme::https)) {
    return std::nullopt;
  }
  std::string origin = uri->encoded_path().empty() ? "/" : std::string(uri->encoded_path());
  if (uri->has_query()) {
    origin += '?';
    origin += uri->encoded_query();
  }
  return origin;
}

std::string target_path(std::string_view target) {
  const std::optional<std::string> origin = origin_of_absolute(target);
  const std::string_view t = origin ? std::string_view(*origin) : target;
  return std::string(t.substr(0, t.find('?')));
}

std::optional<RequestLine> parse_request_line(std::string_view line) {
  const std::size_t sp = line.find(' ');
  if (sp == std::string_view::npos) return std::nullopt;
  const auto method = boost::beast::http::string_to_verb(line.substr(0, sp));
  if (method == boost::beast::http::verb::unknown) return std::nullopt;
  const std::string_view target = line.substr(sp + 1);
  return RequestLine{method, target_path(target.substr(0, target.find(' ')))};
}

}  // namespace floodgate::server
