// envoyproxy/ratelimit's `POST /json`: its JSON form of a RateLimitRequest, answered with the JSON
// form of the RateLimitResponse, decided by the same RlsService as the gRPC calls.
#pragma once

#include <string_view>

#include "server/api/responses.hpp"
#include "server/rls/service.hpp"

namespace floodgate::server {

/// Answers one `POST /json` body, as envoyproxy/ratelimit does: the body is the proto3 JSON
/// mapping of a RateLimitRequest (field names in lowerCamelCase or as in the .proto; an unknown
/// field is an error); the answer is the JSON mapping of the response (lowerCamelCase, default
/// values left out), with status 200 (OK), 429 (OVER_LIMIT) or 500 (UNKNOWN). A body that does
/// not parse, or a request RlsService refuses (INVALID_ARGUMENT), is answered 400 with
/// {"error": "<why>"}. Blocks the calling thread for the decision. Thread-safe.
void answer_rls_json(RlsService& rls, std::string_view body, Response& res);

}  // namespace floodgate::server
