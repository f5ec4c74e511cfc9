// Traffic for `floodgate simulate`: generated (Poisson arrivals, a burst) or read from a trace.
#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <istream>
#include <random>
#include <string>

#include <boost/json.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "absl/strings/ascii.h"
#include "floodgate/sim/simulate.hpp"
#include "trace_json.hpp"
#include "util/text.hpp"

namespace floodgate {

namespace {

constexpr std::size_t kMaxGeneratedEvents = 1'000'000;
constexpr std::size_t kMaxLineBytes = 64 * 1024;

// "60s", "1.5s", "500ms", "2m", "1h", "250us"; a bare number is seconds.
absl::StatusOr<Micros> parse_duration(std::string_view text) {
  const std::string s(text::trim(text));
  const char* begin = s.c_str();
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(begin, &end);
  if (end == begin || errno != 0 || !std::isfinite(value) || value < 0) {
    return absl::InvalidArgumentError(
        fmt::format("bad duration \"{}\": expected a number and a unit, e.g. \"60s\" or \"500ms\"", text));
  }
  const std::string unit = text::lower(text::trim(std::string_view(end)));
  double scale = 0;
  if (unit.empty() || unit == "s" || unit == "sec" || unit == "second" || unit == "seconds") {
    scale = 1e6;
  } else if (unit == "ms") {
    scale = 1e3;
  } else if (unit == "us") {
    scale = 1;
  } else if (unit == "m" || unit == "min" || unit == "minute" || unit == "minutes") {
    scale = 60e6;
  } else if (unit == "h" || unit == "hour" || unit == "hours") {
    scale = 3600e6;
  } else {
    return absl::InvalidArgumentError(fmt::format(
        "bad duration \"{}\": unknown unit \"{}\" (us, ms, s, m, h)", text, unit));
  }
  if (value * scale > 1e15) {
    return absl::InvalidArgumentError(fmt::format("bad duration \"{}\": too long", text));
  }
  return static_cast<Micros>(std::llround(value * scale));
}

// One "name=value" list: "rate=2/s,duration=60s".
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> parse_params(
    std::string_view text, std::span<const std::string_view> known) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return absl::InvalidArgumentError(fmt::format("\"{}\" is not name=value", item));
    }
    std::string name = text::lower(text::trim(item.substr(0, eq)));
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return absl::InvalidArgumentError(fmt::format("unknown parameter \"{}\" (expected {})", name,
                                                    fmt::join(known, ", ")));
    }
    for (const auto& [n, v] : out) {
      if (n == name) return absl::InvalidArgumentError(fmt::format("\"{}\" is given twice", name));
    }
    out.emplace_back(std::move(name), std::string(text::trim(item.substr(eq + 1))));
    if (comma == std::string_view::npos) break;
    text = text.substr(comma + 1);
  }
  return out;
}

const std::string* find(const std::vector<std::pair<std::string, std::string>>& params,
                        std::string_view name) {
  for (const auto& [n, v] : params) {
    if (n == name) return &v;
  }
  return nullptr;
}

// A uniform double in [0, 1) from the top 53 bits: the same on every platform, unlike
// std::uniform_real_distribution whose algorithm the standard leaves open.
double uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

absl::Status poisson(std::string_view params_text, std::uint64_t seed, std::vector<TraceEvent>& out) {
  static constexpr std::array<std::string_view, 4> kKnown{"rate", "duration", "key", "start"};
  auto params = parse_params(params_text, kKnown);
  if (!params.ok()) return params.status();
  const std::string* rate = find(*params, "rate");
  const std::string* duration = find(*params, "duration");
  if (rate == nullptr || duration == nullptr) {
    return absl::InvalidArgumentError("poisson needs rate=… and duration=…, e.g. poisson:rate=2/s,duration=60s");
  }
  auto limits = parse_limits(*rate);
  if (!limits.ok()) {
    return absl::InvalidArgumentError(fmt::format("bad rate \"{}\": {}", *rate, std::string(limits.status().message())));
  }
  if (limits->size() != 1 || limits->front().burst != 0) {
    return absl::InvalidArgumentError(fmt::format("bad rate \"{}\": give one rate such as 2/s", *rate));
  }
  auto length = parse_duration(*duration);
  if (!length.ok()) return length.status();
  Micros start = 0;
  if (const std::string* s = find(*params, "start")) {
    auto st = parse_duration(*s);
    if (!st.ok()) return st.status();
    start = *st;
  }
  const std::string* key = find(*params, "key");
  if (key != nullptr && key->empty()) return absl::InvalidArgumentError("key= must not be empty");
  const double per_us = static_cast<double>(limits->front().amount) /
                        static_cast<double>(limits->front().period);
  const double expected = per_us * static_cast<double>(*length);
  if (expected > static_cast<double>(kMaxGeneratedEvents)) {
    return absl::InvalidArgumentError(fmt::format(
        "rate {} for {} gives about {:.0f} requests: at most {} are simulated", *rate, *duration,
        expected, kMaxGeneratedEvents));
  }
  std::mt19937_64 rng(seed);
  double at = 0;
  for (;;) {
    at += -std::log1p(-uniform(rng)) / per_us;  // exponential gaps: a Poisson process
    if (at >= static_cast<double>(*length)) break;
    out.push_back({start + static_cast<Micros>(std::llround(at)), key ? *key : "a", 1});
    if (out.size() > kMaxGeneratedEvents) {
      return absl::InvalidArgumentError(fmt::format("more than {} requests", kMaxGeneratedEvents));
    }
  }
  return absl::OkStatus();
}

absl::Status burst(std::string_view params_text, std::vector<TraceEvent>& out) {
  static constexpr std::array<std::string_view, 3> kKnown{"n", "at", "key"};
  auto params = parse_params(params_text, kKnown);
  if (!params.ok()) return params.status();
  const std::string* n = find(*params, "n");
  const std::string* at = find(*params, "at");
  if (n == nullptr || at == nullptr) {
    return absl::InvalidArgumentError("burst needs n=… and at=…, e.g. burst:n=20,at=30s");
  }
  char* end = nullptr;
  errno = 0;
  const long long count = std::strtoll(n->c_str(), &end, 10);
  if (n->empty() || *end != '\0' || errno != 0 || count < 1 ||
      static_cast<std::size_t>(count) > kMaxGeneratedEvents) {
    return absl::InvalidArgumentError(
        fmt::format("bad n \"{}\": a whole number of requests from 1 to {}", *n, kMaxGeneratedEvents));
  }
  auto t = parse_duration(*at);
  if (!t.ok()) return t.status();
  const std::string* key = find(*params, "key");
  if (key != nullptr && key->empty()) return absl::InvalidArgumentError("key= must not be empty");
  for (long long i = 0; i < count; ++i) out.push_back({*t, key ? *key : "a", 1});
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<TraceEvent>> read_trace(std::istream& in) {
  std::vector<TraceEvent> out;
  std::string line;
  std::size_t number = 0;
  Micros previous = 0;
  // Lines are read with a bound, so that a file without newlines (or /dev/zero) is an error
  // rather than an ever-growing string.
  auto next_line = [&]() -> absl::StatusOr<bool> {
    line.clear();
    for (int c; (c = in.get()) != std::char_traits<char>::eof();) {
      if (c == '\n') return true;
      if (line.size() >= kMaxLineBytes) {
        return absl::InvalidArgumentError(
            fmt::format("line {}: longer than {} bytes", number + 1, kMaxLineBytes));
      }
      line.push_back(static_cast<char>(c));
    }
    return !line.empty();
  };
  for (;;) {
    auto more = next_line();
    if (!more.ok()) return more.status();
    if (!*more) break;
    ++number;
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    boost::system::error_code ec;
    const boost::json::value v = boost::json::parse(line, ec);
    absl::StatusOr<TraceEvent> e =
        ec ? absl::InvalidArgumentError(fmt::format("not valid JSON ({})", ec.message()))
           : parse_trace_event(v, previous);
    if (!e.ok()) {
      return absl::InvalidArgumentError(fmt::format("line {}: {}", number, std::string(e.status().message())));
    }
    if (out.size() >= kMaxGeneratedEvents) {
      return absl::InvalidArgumentError(
          fmt::format("line {}: more than {} requests", number, kMaxGeneratedEvents));
    }
    previous = e->t;
    out.push_back(*std::move(e));
  }
  if (!out.empty()) {
    const Micros first = out.front().t;
    for (TraceEvent& e : out) e.t -= first;
  }
  return out;
}

absl::StatusOr<std::vector<TraceEvent>> make_traffic(std::string_view spec, std::uint64_t seed) {
  const std::string_view trimmed = text::trim(spec);
  if (trimmed.empty()) {
    return absl::InvalidArgumentError(
        "empty traffic: give poisson:rate=R,duration=D, burst:n=N,at=T or a trace file");
  }
  const bool generated = trimmed.starts_with("poisson:") || trimmed.starts_with("burst:");
  if (!generated) {
    std::ifstream file{std::string(trimmed)};
    if (!file) {
      return absl::InvalidArgumentError(fmt::format(
          "traffic \"{}\": not poisson:…, burst:… or a readable trace file", trimmed));
    }
    auto trace = read_trace(file);
    if (!trace.ok()) {
      return absl::InvalidArgumentError(fmt::format("{}: {}", trimmed, std::string(trace.status().message())));
    }
    return trace;
  }
  std::vector<TraceEvent> out;
  std::string_view rest = trimmed;
  std::uint64_t part_seed = seed;
  while (!rest.empty()) {
    const std::size_t plus = rest.find('+');
    const std::string_view part = text::trim(rest.substr(0, plus));
    const std::size_t colon = part.find(':');
    const std::string_view kind = part.substr(0, colon);
    const std::string_view params = colon == std::string_view::npos ? "" : part.substr(colon + 1);
    absl::Status s;
    if (kind == "poisson") {
      s = poisson(params, part_seed++, out);
    } else if (kind == "burst") {
      s = burst(params, out);
    } else {
      s = absl::InvalidArgumentError("expected poisson:… or burst:…");
    }
    if (!s.ok()) {
      return absl::InvalidArgumentError(fmt::format("traffic \"{}\": {}", part, std::string(s.message())));
    }
    if (out.size() > kMaxGeneratedEvents) {
      return absl::InvalidArgumentError(fmt::format("traffic \"{}\": more than {} requests in all",
                                                    trimmed, kMaxGeneratedEvents));
    }
    if (plus == std::string_view::npos) break;
    rest = rest.substr(plus + 1);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const TraceEvent& a, const TraceEvent& b) { return a.t < b.t; });
  return out;
}

}  // namespace floodgate
