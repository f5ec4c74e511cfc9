#include "floodgate/replay.hpp"

#include <cmath>
#include <istream>
#include <ostream>
#include <string>

#include <boost/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/ascii.h"
#include "storage/url.hpp"
#include "trace_json.hpp"

namespace floodgate {

absl::StatusOr<std::string> replay_storage_url(std::string_view url) {
  auto parsed = parse_storage_url(url);
  if (!parsed.ok()) return parsed.status();
  if (!parsed->scheme.starts_with("redis")) return std::string(url);
  for (const auto& [name, value] : parsed->query) {
    if (name != "clock") continue;
    if (value == "client") return std::string(url);
    return absl::InvalidArgumentError(
        "replay runs on the trace's clock, so its storage needs clock=client, not clock=" + value +
        " (in \"" + std::string(url) + "\")");
  }
  return std::string(url) + (url.find('?') == std::string_view::npos ? "?" : "&") + "clock=client";
}

absl::StatusOr<TraceEvent> parse_trace_event(const boost::json::value& v, Micros previous) {
  const boost::json::object* obj = v.if_object();
  if (obj == nullptr) return absl::InvalidArgumentError("expected a JSON object");

  TraceEvent r{};
  const boost::json::value* t = obj->if_contains("t");
  if (t == nullptr) return absl::InvalidArgumentError("missing \"t\" (seconds)");
  double seconds = 0;
  if (t->is_double()) {
    seconds = t->get_double();
  } else if (t->is_int64()) {
    seconds = static_cast<double>(t->get_int64());
  } else if (t->is_uint64()) {
    seconds = static_cast<double>(t->get_uint64());
  } else {
    return absl::InvalidArgumentError("\"t\" must be a number of seconds");
  }
  // 2^62 µs is about 146,000 years: far beyond any trace, and far from overflow.
  if (!std::isfinite(seconds) || seconds < 0 || seconds * 1e6 > 4.6e18) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"t\" must be a finite number of seconds from 0 to 4.6e12, got ", seconds));
  }
  r.t = static_cast<Micros>(std::llround(seconds * 1e6));
  if (r.t < previous) {
    return absl::InvalidArgumentError(absl::StrCat("\"t\" goes backwards: ", seconds,
                                                   " is before the previous line's ",
                                                   format_seconds(previous)));
  }

  const boost::json::value* key = obj->if_contains("key");
  if (key == nullptr) return absl::InvalidArgumentError("missing \"key\"");
  if (!key->is_string()) return absl::InvalidArgumentError("\"key\" must be a string");
  r.key = std::string(key->get_string());

  r.cost = 1;
  if (const boost::json::value* c = obj->if_contains("cost")) {
    if (c->is_int64()) {
      r.cost = c->get_int64();
    } else if (c->is_uint64() && c->get_uint64() <= static_cast<std::uint64_t>(kMaxAmount)) {
      r.cost = static_cast<std::int64_t>(c->get_uint64());
    } else if (c->is_double() && std::floor(c->get_double()) == c->get_double() &&
               std::fabs(c->get_double()) <= static_cast<double>(kMaxAmount)) {
      r.cost = static_cast<std::int64_t>(c->get_double());
    } else {
      return absl::InvalidArgumentError("\"cost\" must be a whole number from 0 to 2^53");
    }
    if (r.cost < 0 || r.cost > kMaxAmount) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"cost\" must be a whole number from 0 to 2^53, got ", r.cost));
    }
  }
  return r;
}

namespace {

absl::StatusOr<TraceEvent> parse_line(std::string_view line, Micros previous) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(line, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("not valid JSON (", ec.message(), ")"));
  return parse_trace_event(v, previous);
}

}  // namespace

absl::Status replay(const Policy& policy, Storage& storage, std::istream& in, std::ostream& out) {
  std::string line;
  std::size_t number = 0;
  Micros previous = 0;
  while (std::getline(in, line)) {
    ++number;
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    auto request = parse_line(line, previous);
    if (!request.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", number, ": ", request.status().message()));
    }
    previous = request->t;
    auto d = storage.apply(policy, request->key, request->cost, Effect::kHit, request->t);
    if (!d.ok()) {
      return absl::Status(d.status().code(),
                          absl::StrCat("line ", number, ": storage error: ", d.status().message()));
    }
    out << "{\"allowed\": " << (d->allowed ? "true" : "false") << ", \"remaining\": " << d->remaining
        << ", \"retry_after\": " << (d->can_retry() ? format_seconds(d->retry_after) : "null")
        << ", \"reset_after\": " << format_seconds(d->reset_after);
    if (policy.shape()) out << ", \"delay\": " << format_seconds(d->delay);
    out << "}\n" << std::flush;
  }
  return absl::OkStatus();
}

}  // namespace floodgate
