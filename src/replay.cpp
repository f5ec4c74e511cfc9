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
    const char* name = "\"cost\"";
    if (c->is_int64()) {
      r.cost = c->get_int64();
    } else if (c->is_uint64() && c->get_uint64() <= static_cast<std::uint64_t>(kMaxAmount)) {
      r.cost = static_cast<std::int64_t>(c->get_uint64());
    } else if (c->is_double() && std::floor(c->get_double()) == c->get_double() &&
               std::fabs(c->get_double()) <= static_cast<double>(kMaxAmount)) {
      r.cost = static_cast<std::int64_t>(c->get_double());
    } else {
      return absl::InvalidArgumentError(absl::StrCat(name, " must be a whole number from 0 to 2^53"));
    }
    if (r.cost < 0 || r.cost > kMaxAmount) {
      return absl::InvalidArgumentError(absl::StrCat(name, " must be a whole number from 0 to 2^53, got ", r.cost));
    }
  }
  return r;
}

namespace {

// A line of a replayed trace: a request, and what it does with a reservation.
struct TraceLine {
  TraceEvent event;
  std::string reservation;  // reserve under this id, or settle it
  bool settle = false;      // event.cost is then the actual usage
  Micros ttl = 0;           // 0: the default
};

// "reservation", "ttl_ms", "settle" and "actual" (replay.hpp).
absl::Status parse_reservation(const boost::json::object& obj, TraceLine& r) {
  if (const boost::json::value* id = obj.if_contains("reservation")) {
    if (!id->is_string() || id->get_string().empty() || id->get_string().size() > kMaxReservationId) {
      return absl::InvalidArgumentError(absl::StrCat("\"reservation\" must be a string of 1 to ", kMaxReservationId,
                                                     " bytes"));
    }
    r.reservation = std::string(id->get_string());
  }
  const boost::json::value* settle = obj.if_contains("settle");
  const boost::json::value* actual = obj.if_contains("actual");
  if (settle != nullptr && (!settle->is_bool() || !settle->get_bool())) {
    return absl::InvalidArgumentError("\"settle\" must be true (or leave it out)");
  }
  if (settle != nullptr || actual != nullptr) {
    if (r.reservation.empty()) return absl::InvalidArgumentError("a settle needs the \"reservation\" id it settles");
    if (actual == nullptr) return absl::InvalidArgumentError("a settle needs the \"actual\" usage");
    if (obj.contains("cost")) return absl::InvalidArgumentError("a settle takes \"actual\", not \"cost\"");
    if (!actual->is_int64() || actual->get_int64() < 0 || actual->get_int64() > kMaxAmount) {
      return absl::InvalidArgumentError("\"actual\" must be a whole number from 0 to 2^53");
    }
    r.settle = true;
    r.event.cost = actual->get_int64();
  }
  if (const boost::json::value* ttl = obj.if_contains("ttl_ms")) {
    if (r.reservation.empty() || r.settle) {
      return absl::InvalidArgumentError("\"ttl_ms\" is the time to live of a reservation: give a \"reservation\"");
    }
    if (!ttl->is_int64() || ttl->get_int64() < 1 || ttl->get_int64() > kMaxReservationTtl / 1000) {
      return absl::InvalidArgumentError("\"ttl_ms\" must be a whole number of milliseconds from 1 to 86400000");
    }
    r.ttl = ttl->get_int64() * 1000;
  }
  return absl::OkStatus();
}

absl::StatusOr<TraceLine> parse_line(std::string_view line, Micros previous) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(line, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("not valid JSON (", ec.message(), ")"));
  auto event = parse_trace_event(v, previous);
  if (!event.ok()) return event.status();
  TraceLine out;
  out.event = *std::move(event);
  if (auto s = parse_reservation(v.get_object(), out); !s.ok()) return s;
  return out;
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
    if (request->ttl != 0 && policy.strategy() == Strategy::kConcurrency) {
      return absl::InvalidArgumentError(absl::StrCat(
          "line ", number, ": a lease lives for its limit's time to live (", to_string(policy.limits().front()),
          "); \"ttl_ms\" is for reservations"));
    }
    previous = request->event.t;
    Storage::BatchItem item{&policy, request->event.key, request->event.cost, Effect::kHit};
    if (!request->reservation.empty()) {
      item.effect = request->settle ? Effect::kSettle : Effect::kReserve;
      item.reservation = request->reservation;
      if (request->ttl != 0) item.ttl = request->ttl;
    }
    auto d = storage.apply_item(item, request->event.t);
    if (d.status().code() == absl::StatusCode::kNotFound) {
      // A release of a lease that is not outstanding: an answer, not a failure of the replay.
      out << "{\"allowed\": false, \"not_outstanding\": true}\n" << std::flush;
      continue;
    }
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
