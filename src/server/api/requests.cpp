// Parsing the HTTP API's requests (see api/requests.hpp).
#include "server/api/requests.hpp"

#include <cmath>

#include <boost/json.hpp>
#include <fmt/format.h>

#include "floodgate/policy.hpp"
#include "floodgate/storage.hpp"
#include "trace_json.hpp"

namespace floodgate::server {

namespace {

namespace json = boost::json;

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

absl::Status invalid(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

std::string_view view(const json::string& s) { return {s.data(), s.size()}; }

absl::StatusOr<json::object> parse_object(std::string_view body) {
  boost::system::error_code ec;
  json::value v = json::parse(json::string_view(body.data(), body.size()), ec);
  if (ec) return invalid(fmt::format("the body is not valid JSON ({})", ec.message()));
  if (!v.is_object()) return invalid("the body must be a JSON object");
  return std::move(v.get_object());
}

// An optional whole number in [lo, hi]; `fallback` when absent. A field given as null is refused
// like any other value that is not such a number: nothing is defaulted behind the caller's back.
absl::StatusOr<std::int64_t> whole(const json::object& o, std::string_view name, std::int64_t lo,
                                   std::int64_t hi, std::int64_t fallback, std::string_view what) {
  const json::value* v = o.if_contains(json::string_view(name.data(), name.size()));
  if (v == nullptr) return fallback;
  if (!v->is_int64() || v->get_int64() < lo || v->get_int64() > hi) {
    return invalid(fmt::format("\"{}\" must be {}", name, what));
  }
  return v->get_int64();
}

// An optional string; `fallback` when absent.
absl::StatusOr<std::string> text(const json::object& o, std::string_view name, std::string fallback,
                                 std::string_view what) {
  const json::value* v = o.if_contains(json::string_view(name.data(), name.size()));
  if (v == nullptr) return fallback;
  if (!v->is_string()) return invalid(fmt::format("\"{}\" must be {}", name, what));
  return std::string(view(v->get_string()));
}

}  // namespace

std::string_view path_of(std::string_view target) { return target.substr(0, target.find('?')); }

std::string url_decode(std::string_view s) {
  if (s.find_first_of("+%") == std::string_view::npos) return std::string(s);  // nearly always
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::optional<std::string> query_param(std::string_view target, std::string_view name) {
  const std::size_t q = target.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const std::size_t amp = rest.find('&');
    const std::string_view item = rest.substr(0, amp);
    const std::size_t eq = item.find('=');
    if (url_decode(item.substr(0, eq)) == name) {
      return eq == std::string_view::npos ? std::string() : url_decode(item.substr(eq + 1));
    }
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
  }
  return std::nullopt;
}

absl::Status check_key(std::string_view key, std::string_view what) {
  if (key.empty()) return invalid(fmt::format("{} must be a non-empty string", what));
  if (key.size() > kMaxKeyBytes) return invalid(fmt::format("{} is longer than {} bytes", what, kMaxKeyBytes));
  return absl::OkStatus();
}

absl::StatusOr<DecisionBody> parse_decision_body(std::string_view body) {
  auto obj = parse_object(body);
  if (!obj.ok()) return obj.status();
  DecisionBody d;
  // The JSON endpoints read the key from the body only; a policy's `key: {header: …}` is where
  // GET /v1/auth reads it, and the message says so to whoever relied on it here.
  constexpr std::string_view kNoKey =
      "\"key\" must be a non-empty string: the JSON endpoints take the key from the body's \"key\" "
      "(a policy's key: {header|query: …} is read by GET /v1/auth only)";
  const json::value* key = obj->if_contains("key");
  if (key == nullptr || !key->is_string() || key->get_string().empty()) return invalid(std::string(kNoKey));
  d.key = std::string(view(key->get_string()));
  if (auto s = check_key(d.key, "\"key\""); !s.ok()) return s;
  auto cost = whole(*obj, "cost", 0, kMaxAmount, 1, "a whole number from 0 to 2^53");
  if (!cost.ok()) return cost.status();
  d.cost = *cost;
  if (const json::value* r = obj->if_contains("reservation")) {
    if (!r->is_string() || r->get_string().empty() || r->get_string().size() > kMaxReservationId) {
      return invalid(fmt::format("\"reservation\" must be a string of 1 to {} bytes", kMaxReservationId));
    }
    d.reservation = std::string(view(r->get_string()));
  }
  auto ttl = whole(*obj, "ttl_ms", 1, kMaxReservationTtl / 1000, 0, "a whole number of milliseconds from 1 to 86400000");
  if (!ttl.ok()) return ttl.status();
  if (*ttl != 0 && !d.reservation) return invalid("\"ttl_ms\" is the time to live of a \"reservation\": give one");
  d.ttl_ms = *ttl;
  if (const json::value* p = obj->if_contains("policy")) {
    if (!p->is_string()) return invalid("\"policy\" must be a string");
    d.policy = std::string(view(p->get_string()));
    return d;
  }
  if (!obj->contains("limit")) {
    return invalid("name a configured \"policy\", or give an inline \"limit\" such as \"10/minute\"");
  }
  auto limit = text(*obj, "limit", "", "a string such as \"10/minute\"");
  auto strategy = text(*obj, "strategy", "gcra", "a string");
  auto burst = whole(*obj, "burst", 1, kMaxAmount, 0, "a whole number from 1 to 2^53");
  if (!limit.ok()) return limit.status();
  if (!strategy.ok()) return strategy.status();
  if (!burst.ok()) return burst.status();
  d.limit = *std::move(limit);
  d.strategy = *std::move(strategy);
  d.burst = *burst;
  return d;
}

absl::StatusOr<DecisionBody> parse_settle_body(std::string_view body) {
  auto obj = parse_object(body);
  if (!obj.ok()) return obj.status();
  if (obj->contains("cost")) return invalid("a settle takes the \"actual\" usage, not a \"cost\"");
  if (obj->contains("ttl_ms")) return invalid("a settle takes no \"ttl_ms\": the reservation has its own");
  const json::value* r = obj->if_contains("reservation");
  if (r == nullptr) return invalid("\"reservation\" is required: the id the hit reserved under");
  const json::value* a = obj->if_contains("actual");
  if (a == nullptr || a->is_null()) {
    return invalid("\"actual\" is required: the usage to settle, a whole number from 0 to 2^53");
  }
  auto actual = whole(*obj, "actual", 0, kMaxAmount, 0, "a whole number from 0 to 2^53");
  if (!actual.ok()) return actual.status();
  auto d = parse_decision_body(body);
  if (!d.ok()) return d;
  d->cost = *actual;
  return d;
}

absl::StatusOr<DecisionBody> parse_lease_body(std::string_view body) {
  auto obj = parse_object(body);
  if (!obj.ok()) return obj.status();
  for (const char* field : {"cost", "actual", "ttl_ms"}) {
    if (obj->contains(field)) {
      return invalid(fmt::format("a lease's release or renewal takes no \"{}\": the lease has its units and its "
                                 "time to live",
                                 field));
    }
  }
  if (!obj->contains("reservation")) return invalid("\"reservation\" is required: the lease's id, as given to /v1/hit");
  auto d = parse_decision_body(body);
  if (!d.ok()) return d;
  d->cost = 0;
  return d;
}

absl::StatusOr<KeyQuery> parse_key_query(std::string_view target) {
  auto policy = query_param(target, "policy");
  auto key = query_param(target, "key");
  if (!policy || !key || key->empty()) return invalid("give ?policy=NAME&key=KEY");
  if (auto s = check_key(*key, "the key"); !s.ok()) return s;
  return KeyQuery{*std::move(policy), *std::move(key)};
}

namespace {

absl::Status parse_lanes_field(const json::object& obj, SimulateOptions& o) {
  std::string lanes = "all";
  if (const json::value* st = obj.if_contains("strategies")) {
    if (const json::array* a = st->if_array()) {
      lanes.clear();
      for (const json::value& v : *a) {
        if (!v.is_string()) return invalid("\"strategies\" must be a list of strategy names");
        if (!lanes.empty()) lanes += ',';
        lanes += view(v.get_string());
      }
    } else if (!st->is_string() || st->get_string() != "all") {
      return invalid("\"strategies\" must be \"all\" or a list of strategy names");
    }
  }
  auto parsed = parse_lanes(lanes);
  if (!parsed.ok()) return parsed.status();
  o.lanes = *std::move(parsed);
  return absl::OkStatus();
}

absl::Status parse_origin(const json::object& obj, SimulateOptions& o) {
  const json::value* origin = obj.if_contains("origin");
  if (origin == nullptr) return absl::OkStatus();
  const double seconds = origin->is_double()  ? origin->get_double()
                         : origin->is_int64() ? static_cast<double>(origin->get_int64())
                                              : -1.0;
  if (!(seconds >= 0 && seconds < 4.6e12)) {
    return invalid("\"origin\" must be a number of seconds since the epoch, from 0");
  }
  o.origin = static_cast<Micros>(std::llround(seconds * 1e6));
  return absl::OkStatus();
}

// "concurrency": {"limit": N, "lease_ttl_ms": T, "duration_ms": D}.
absl::Status parse_concurrency(const json::object& obj, SimulateBody& out) {
  const json::value* c = obj.if_contains("concurrency");
  if (c == nullptr) return absl::OkStatus();
  if (!c->is_object()) {
    return invalid("\"concurrency\" must be an object: {\"limit\": N, \"lease_ttl_ms\": T, \"duration_ms\": D}");
  }
  const json::object& o = c->get_object();
  for (const auto& field : o) {
    const std::string_view k(field.key().data(), field.key().size());
    if (k != "limit" && k != "lease_ttl_ms" && k != "duration_ms") {
      return invalid(fmt::format("\"concurrency.{}\" is not a field: give \"limit\", \"lease_ttl_ms\" and "
                                 "\"duration_ms\"",
                                 std::string(k)));
    }
  }
  const auto field = [&](std::string_view name, std::int64_t lo, std::int64_t hi, std::int64_t fallback,
                         std::string_view what) -> absl::StatusOr<std::int64_t> {
    auto v = whole(o, name, lo, hi, fallback, what);
    if (!v.ok()) return invalid(fmt::format("\"concurrency.{}\" must be {}", name, what));
    return v;
  };
  if (!o.contains("limit")) {
    return invalid("\"concurrency.limit\" is required: the most requests of one key in progress at once");
  }
  SimulateConcurrency sc;
  auto n = field("limit", 1, kMaxAmount, 0, "a whole number from 1 to 2^53");
  if (!n.ok()) return n.status();
  auto ttl = field("lease_ttl_ms", 1, kMaxSimLeaseTtlMs, kDefaultSimLeaseTtlMs,
                   "a whole number of milliseconds from 1 to 86400000");
  if (!ttl.ok()) return ttl.status();
  auto d = field("duration_ms", 0, kMaxRequestDuration / 1000, -1,
                 "a whole number of milliseconds from 0 to 82800000 (23 hours)");
  if (!d.ok()) return d.status();
  sc.options.limit = *n;
  sc.options.lease_ttl = *ttl * 1000;
  sc.options.default_duration = *d < 0 ? -1 : *d * 1000;
  sc.options.max_events = kMaxSimulateEvents;
  out.concurrency = std::move(sc);
  return absl::OkStatus();
}

// A request's own "duration_ms" for the concurrency lane (−1: none, the lane's default applies).
absl::StatusOr<Micros> event_duration(const json::value& item, std::size_t i, const ConcurrencyOptions& o) {
  const json::value* d = item.is_object() ? item.get_object().if_contains("duration_ms") : nullptr;
  if (d == nullptr || d->is_null()) {
    if (o.default_duration < 0) {
      return invalid(fmt::format("trace[{}]: no \"duration_ms\": give each request's duration, or "
                                 "\"concurrency.duration_ms\" for every request without one",
                                 i));
    }
    return Micros{-1};
  }
  if (!d->is_int64() || d->get_int64() < 0 || d->get_int64() > kMaxRequestDuration / 1000) {
    return invalid(fmt::format("trace[{}]: \"duration_ms\" must be a whole number of milliseconds from 0 to "
                               "82800000 (23 hours)",
                               i));
  }
  return d->get_int64() * 1000;
}

absl::Status parse_trace(const json::object& obj, SimulateBody& out) {
  const json::value* trace = obj.if_contains("trace");
  if (trace == nullptr || !trace->is_array()) {
    return invalid("\"trace\" must be a list of requests: [{\"t\": 0.0, \"key\": \"a\", \"cost\": 1}, …]");
  }
  const json::array& items = trace->get_array();
  if (items.size() > kMaxSimulateEvents) {
    return invalid(fmt::format("the trace has {} requests: at most {} are simulated", items.size(),
                               kMaxSimulateEvents));
  }
  auto from = whole(obj, "from", 0, static_cast<std::int64_t>(items.size()), 0,
                    "an index from 0 to the trace's length");
  if (!from.ok()) return from.status();
  out.from = static_cast<std::size_t>(*from);
  out.trace.reserve(items.size());
  Micros previous = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    auto e = parse_trace_event(items[i], previous);
    if (!e.ok()) return invalid(fmt::format("trace[{}]: {}", i, std::string(e.status().message())));
    previous = e->t;
    out.trace.push_back(*std::move(e));
    if (out.concurrency) {
      auto d = event_duration(items[i], i, out.concurrency->options);
      if (!d.ok()) return d.status();
      out.concurrency->durations.push_back(*d);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SimulateBody> parse_simulate_body(std::string_view body) {
  auto obj = parse_object(body);
  if (!obj.ok()) return obj.status();
  SimulateBody out;
  out.options.max_events = kMaxSimulateEvents;
  if (auto s = parse_concurrency(*obj, out); !s.ok()) return s;
  const json::value* limit = obj->if_contains("limit");
  out.rate_lanes = limit != nullptr || !out.concurrency;
  if (out.rate_lanes && (limit == nullptr || !limit->is_string())) {
    return invalid(out.concurrency ? "\"limit\" must be a string such as \"3/minute\" (or leave it out to run the "
                                     "concurrency lane alone)"
                                   : "\"limit\" must be a string such as \"3/minute\"");
  }
  if (out.rate_lanes) {
    out.options.limit = std::string(view(limit->get_string()));
  } else {
    for (const char* field : {"burst", "strategies"}) {
      if (obj->contains(field)) {
        return invalid(fmt::format("\"{}\" is for the strategy lanes: give their \"limit\" too", field));
      }
    }
  }
  auto burst = whole(*obj, "burst", 0, kMaxAmount, 0, "a whole number from 0 (= the amount) to 2^53");
  if (!burst.ok()) return burst.status();
  out.options.burst = *burst;
  if (auto s = parse_lanes_field(*obj, out.options); !s.ok()) return s;
  if (auto s = parse_origin(*obj, out.options); !s.ok()) return s;
  if (auto s = parse_trace(*obj, out); !s.ok()) return s;
  return out;
}

}  // namespace floodgate::server
