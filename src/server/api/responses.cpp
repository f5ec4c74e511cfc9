// Building the HTTP API's responses (see api/responses.hpp).
#include "server/api/responses.hpp"

#include <time.h>

#include <algorithm>
#include <ctime>

#include <fmt/format.h>

#include "floodgate/headers.hpp"
#include "server/api/json_out.hpp"

namespace floodgate::server {

void respond(Response& res, http::status status, std::string body, std::string_view content_type) {
  res.result(status);
  res.set(http::field::content_type, content_type);
  res.body() = std::move(body);
  res.prepare_payload();
}

void respond_empty(Response& res, http::status status) {
  res.result(status);
  res.body().clear();
  if (status == http::status::no_content || http::to_status_class(status) == http::status_class::informational) {
    res.content_length(boost::none);
    res.chunked(false);
  } else {
    res.content_length(0);
  }
}

void respond_error(Response& res, http::status status, std::string_view message) {
  JsonOut j;
  j.begin_object().key("error").str(message).end();
  respond(res, status, j.take());
}

void respond_error(Response& res, http::status status, const absl::Status& error) {
  respond_error(res, status, std::string_view(error.message().data(), error.message().size()));
}

std::string format_http_date(std::int64_t t) {
  static constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const std::time_t when = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&when, &tm);
  return fmt::format("{}, {:02} {} {:04} {:02}:{:02}:{:02} GMT", kDays[tm.tm_wday], tm.tm_mday, kMonths[tm.tm_mon],
                     tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

std::string_view http_date_now() {
  thread_local std::int64_t second = -1;
  thread_local std::string text;
  timespec ts{};
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  if (ts.tv_sec != second) {
    second = ts.tv_sec;
    text = format_http_date(second);
  }
  return text;
}

std::string_view settle_outcome_name(SettleOutcome outcome) noexcept {
  switch (outcome) {
    case SettleOutcome::kSettled: return "settled";
    case SettleOutcome::kUnknown: return "unknown";
    case SettleOutcome::kAlreadySettled: return "already_settled";
    case SettleOutcome::kNone: break;
  }
  return "none";
}

namespace {

// `limits`: every limit of the policy with its own balance, named as the RateLimit headers name it.
void write_limits(JsonOut& j, const Policy& policy, const Decision& d) {
  const auto& limits = policy.limits();
  j.key("limits").begin_array();
  for (std::size_t i = 0; i < limits.size(); ++i) {
    const Quota q = quota_of(policy, limits[i]);
    const LimitBalance b = balance_of(policy, d, i);
    j.begin_object();
    j.key("name").str(limits.size() == 1 ? policy.name() : fmt::format("{}-{}", policy.name(), i));
    j.key("limit").str(to_string(limits[i])).key("quota").num(q.quota);
    if (!limits[i].concurrent) j.key("window").num(q.window);
    j.key("remaining").num(b.remaining).key("reset_after").seconds(b.reset_after);
    j.end();
  }
  j.end();
}

}  // namespace

std::string decision_json(const Policy& policy, const Decision& d, bool shadow_denied) {
  JsonOut j;
  j.begin_object();
  j.key("allowed").boolean(d.allowed || shadow_denied);
  // A bucket's quota is its capacity (the burst): `remaining` never exceeds `limit`.
  const std::int64_t quota = decision_quota(policy, d);
  j.key("limit").num(quota).key("remaining").num(std::min(d.remaining, quota));
  j.key("reset_after").seconds(d.reset_after).key("retry_after").seconds(d.retry_after);
  j.key("delay").seconds(d.delay).key("policy").str(policy.name());
  j.key("degraded").boolean(d.degraded).key("shadow_denied").boolean(shadow_denied);
  write_limits(j, policy, d);
  if (d.settle != SettleOutcome::kNone) j.key("reservation").str(settle_outcome_name(d.settle));
  if (d.degraded && !d.allowed) {
    j.key("error").str(fmt::format("the storage is unavailable and policy \"{}\" fails closed: retry later",
                                   policy.name()));
  }
  return j.end().take();
}

namespace {

// A shadow denial lets the request through: no Retry-After.
bool sent(std::string_view name, bool shadow) { return !(shadow && name == "Retry-After"); }

}  // namespace

void set_rate_limit_headers(Response& res, const Policy& policy, const Decision& d, bool shadow) {
  for_each_rate_limit_header(policy, d, [&](std::string_view name, std::string_view value) {
    if (sent(name, shadow)) res.set(name, value);
  });
}

void append_rate_limit_headers(std::string& lines, const Policy& policy, const Decision& d, bool shadow) {
  for_each_rate_limit_header(policy, d, [&](std::string_view name, std::string_view value) {
    if (!sent(name, shadow)) return;
    const std::size_t at = lines.size();
    lines.resize(at + name.size() + value.size() + 4);  // one growth, then copies of known length
    char* out = lines.data() + at;
    out = std::copy(name.begin(), name.end(), out);
    *out++ = ':';
    *out++ = ' ';
    out = std::copy(value.begin(), value.end(), out);
    *out++ = '\r';
    *out = '\n';
  });
}

}  // namespace floodgate::server
