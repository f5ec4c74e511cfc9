// RFC 9112's request-target rules as pure functions: what the session needs of a target before
// and after it reads a request.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/http/verb.hpp>

namespace floodgate::server {

/// RFC 9112 §3.2.2: a server must accept a target in absolute form,
/// "http://host:port/path?query" (which a client sends to a proxy). The path and query of an
/// http or https one, as the origin form would give them; nothing for any other target (an origin
/// form, the usual case, is not parsed).
std::optional<std::string> origin_of_absolute(std::string_view target);

/// The path of a target in origin or absolute form, without its query ("/v1/hit").
std::string target_path(std::string_view target);

/// The method and the target's path of a request line ("POST /v1/simulate?x HTTP/1.1" →
/// post, "/v1/simulate"); nothing when the line has no space after the method or an unknown one.
struct RequestLine {
  boost::beast::http::verb method;
  std::string path;
};
std::optional<RequestLine> parse_request_line(std::string_view line);

}  // namespace floodgate::server
