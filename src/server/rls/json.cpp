// POST /json: a thin shell over RlsService::should_rate_limit (rls/json.hpp).
#include "server/rls/json.hpp"

#include <string>

#include <google/protobuf/util/json_util.h>

namespace floodgate::server {

void answer_rls_json(RlsService& rls, std::string_view body, Response& res) {
  rlsv3::RateLimitRequest request;
  const auto parsed = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(body.data(), body.size()), &request);
  if (!parsed.ok()) {
    const auto why = parsed.message();
    respond_error(res, http::status::bad_request,
                  "not a RateLimitRequest in JSON: " + std::string(why.data(), why.size()));
    return;
  }
  rlsv3::RateLimitResponse response;
  const grpc::Status decided = rls.should_rate_limit(request, response);
  if (!decided.ok()) {
    respond_error(res, http::status::bad_request, decided.error_message());
    return;
  }
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(response, &out).ok()) {
    respond_error(res, http::status::internal_server_error, "the response could not be written as JSON");
    return;
  }
  http::status status = http::status::ok;
  if (response.overall_code() == rlsv3::RateLimitResponse::OVER_LIMIT) {
    status = http::status::too_many_requests;
  } else if (response.overall_code() == rlsv3::RateLimitResponse::UNKNOWN) {
    status = http::status::internal_server_error;
  }
  respond(res, status, std::move(out));
}

}  // namespace floodgate::server
