// The pieces of a log line that every format shares: field names, keys, addresses and times.
#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "floodgate/sim/access_log.hpp"
#include "util/text.hpp"

namespace floodgate {

namespace {

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && text::lower(s.substr(0, prefix.size())) == prefix;
}

// Digits at s[at, at + n) as a number, or −1.
int digits(std::string_view s, std::size_t at, std::size_t n) {
  if (at + n > s.size()) return -1;
  int v = 0;
  for (std::size_t i = at; i < at + n; ++i) {
    if (!text::is_digit(s[i])) return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

// Days from 1970-01-01 to a proleptic Gregorian date (the era arithmetic: 400-year cycles of
// 146097 days, March-based years so that the leap day comes last).
std::int64_t days_from_civil(std::int64_t y, int m, int d) {
  y -= m <= 2 ? 1 : 0;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const std::int64_t yoe = y - era * 400;
  const std::int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const std::int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

std::optional<Micros> civil_time(int y, int mo, int d, int h, int mi, int s) {
  if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60) {
    return std::nullopt;
  }
  const std::int64_t secs = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s;
  return secs * kMicrosPerSecond;
}

// "+0200", "-07:00", "Z" at s[at…] → offset in seconds east of UTC; "" is UTC.
std::optional<std::int64_t> zone_offset(std::string_view z) {
  z = text::trim(z);
  if (z.empty() || z == "Z" || z == "z") return 0;
  if (z[0] != '+' && z[0] != '-') return std::nullopt;
  const int h = digits(z, 1, 2);
  const std::size_t mat = z.size() > 3 && z[3] == ':' ? 4 : 3;
  const int m = digits(z, mat, 2);
  if (h < 0 || m < 0 || z.size() != mat + 2) return std::nullopt;
  const std::int64_t off = h * 3600 + m * 60;
  return z[0] == '-' ? -off : off;
}

// ".123456" → µs (digits past the sixth are dropped); the rest after it.
Micros fraction(std::string_view& s) {
  Micros us = 0;
  if (s.empty() || (s[0] != '.' && s[0] != ',')) return 0;
  std::size_t i = 1;
  Micros scale = 100000;
  for (; i < s.size() && text::is_digit(s[i]); ++i) {
    us += (s[i] - '0') * scale;
    scale /= 10;
  }
  s.remove_prefix(i);
  return us;
}

std::optional<Micros> nginx_time(std::string_view s) {  // 10/Oct/2000:13:55:36 -0700
  static constexpr std::array<std::string_view, 12> kMonths{"jan", "feb", "mar", "apr", "may", "jun",
                                                            "jul", "aug", "sep", "oct", "nov", "dec"};
  if (s.size() < 20 || s[2] != '/' || s[6] != '/' || s[11] != ':') return std::nullopt;
  int month = 0;
  const std::string mon = text::lower(s.substr(3, 3));
  for (std::size_t i = 0; i < kMonths.size(); ++i) {
    if (kMonths[i] == mon) month = static_cast<int>(i) + 1;
  }
  const int d = digits(s, 0, 2), y = digits(s, 7, 4), h = digits(s, 12, 2), mi = digits(s, 15, 2),
            sec = digits(s, 18, 2);
  if (month == 0 || d < 0 || y < 0 || h < 0 || mi < 0 || sec < 0) return std::nullopt;
  auto t = civil_time(y, month, d, h, mi, sec);
  std::string_view rest = s.substr(20);
  const Micros frac = fraction(rest);
  auto off = zone_offset(rest);
  if (!t || !off) return std::nullopt;
  return *t + frac - *off * kMicrosPerSecond;
}

std::optional<Micros> iso_time(std::string_view s) {  // 2024-05-01T12:00:00.5Z
  if (s.size() < 19 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != ' ' && s[10] != 't') ||
      s[13] != ':' || s[16] != ':') {
    return std::nullopt;
  }
  const int y = digits(s, 0, 4), mo = digits(s, 5, 2), d = digits(s, 8, 2), h = digits(s, 11, 2),
            mi = digits(s, 14, 2), sec = digits(s, 17, 2);
  if (y < 0 || mo < 0 || d < 0 || h < 0 || mi < 0 || sec < 0) return std::nullopt;
  auto t = civil_time(y, mo, d, h, mi, sec);
  std::string_view rest = s.substr(19);
  const Micros frac = fraction(rest);
  auto off = zone_offset(rest);
  if (!t || !off) return std::nullopt;
  return *t + frac - *off * kMicrosPerSecond;
}

std::optional<Micros> epoch_number(std::string_view s) {
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v) || v < 0) return std::nullopt;
  double us = v * 1e6;
  if (v > 1e14) {
    us = v;
  } else if (v > 1e11) {
    us = v * 1e3;
  }
  if (us > 4e17) return std::nullopt;  // past the year 14000: not a time
  return static_cast<Micros>(std::llround(us));
}

// Keeps the first `bits` bits of the address in buf[0, n) and writes it as "address/bits".
std::string mask_bytes(int family, unsigned char* buf, int n, int bits) {
  for (int i = 0; i < n; ++i) {
    const int keep = std::clamp(bits - 8 * i, 0, 8);
    buf[i] &= static_cast<unsigned char>(0xFF00 >> keep);
  }
  char out[INET6_ADDRSTRLEN];
  inet_ntop(family, buf, out, sizeof out);
  return fmt::format("{}/{}", out, bits);
}

// Masks the address text `a` to `bits`; nullopt when it is not an address.
std::optional<std::string> masked(std::string_view a, int bits) {
  const std::string s(a);
  unsigned char buf[16];
  if (inet_pton(AF_INET, s.c_str(), buf) == 1) {
    if (bits < 0 || bits > 32) return s;
    return mask_bytes(AF_INET, buf, 4, bits);
  }
  if (inet_pton(AF_INET6, s.c_str(), buf) == 1) {
    if (bits < 0) return s;
    return mask_bytes(AF_INET6, buf, 16, bits);
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<LogFormat> parse_log_format(std::string_view name) {
  const std::string n = text::lower(text::trim(name));
  if (n == "auto" || n.empty()) return LogFormat::kAuto;
  if (n == "jsonl" || n == "json") return LogFormat::kJsonl;
  if (n == "combined" || n == "nginx" || n == "apache") return LogFormat::kCombined;
  if (n == "envoy") return LogFormat::kEnvoy;
  if (n == "csv") return LogFormat::kCsv;
  return absl::InvalidArgumentError(
      fmt::format("unknown log format \"{}\": expected auto, jsonl, combined, envoy or csv", name));
}

std::string_view format_name(LogFormat f) noexcept {
  switch (f) {
    case LogFormat::kJsonl: return "jsonl";
    case LogFormat::kCombined: return "combined";
    case LogFormat::kEnvoy: return "envoy";
    case LogFormat::kCsv: return "csv";
    case LogFormat::kAuto: break;
  }
  return "auto";
}

std::string canonical_field(std::string_view ref) {
  std::string_view r = text::trim(ref);
  if (r.size() >= 2 && r.front() == '%' && r.back() == '%') r = r.substr(1, r.size() - 2);
  if (!r.empty() && r.front() == '$') r.remove_prefix(1);
  std::string out;
  if (starts_with_nocase(r, "http_")) {
    out = "header:" + text::lower(r.substr(5));
    std::replace(out.begin(), out.end(), '_', '-');
    return out;
  }
  if (starts_with_nocase(r, "header:")) return "header:" + text::lower(r.substr(7));
  if (starts_with_nocase(r, "req(") && r.back() == ')') {
    std::string_view h = r.substr(4, r.size() - 5);
    h = h.substr(0, h.find('?'));  // REQ(X-ENVOY-ORIGINAL-PATH?:PATH): the first choice names it
    return "header:" + text::lower(h);
  }
  return text::lower(r);
}

absl::StatusOr<KeySpec> KeySpec::parse(std::string_view spec) {
  KeySpec out;
  const std::string_view all = text::trim(spec);
  if (all.empty() || text::lower(all) == "auto") return out;
  std::string_view rest = all;
  for (;;) {
    const std::size_t plus = rest.find('+');
    std::string_view part = text::trim(rest.substr(0, plus));
    KeyPart p;
    if (const std::size_t slash = part.rfind('/'); slash != std::string_view::npos &&
                                                   part.find(')') == std::string_view::npos) {
      const std::string_view bits = part.substr(slash + 1);
      int v = -1;
      const auto [end, ec] = std::from_chars(bits.data(), bits.data() + bits.size(), v);
      if (ec != std::errc() || end != bits.data() + bits.size() || v < 0 || v > 128) {
        return absl::InvalidArgumentError(fmt::format(
            "key \"{}\": bad prefix \"/{}\" (a number of bits from 0 to 128, e.g. ip/64)", spec, bits));
      }
      p.prefix_bits = v;
      part = text::trim(part.substr(0, slash));
    }
    if (part.empty()) {
      return absl::InvalidArgumentError(fmt::format(
          "key \"{}\": an empty part (give e.g. ip, ip/64, $http_x_api_key, or parts joined by +)", spec));
    }
    const std::string f = canonical_field(part);
    p.field = (f == "ip" || f == "client" || f == "addr" || f == "address") ? "ip" : f;
    out.parts.push_back(std::move(p));
    if (plus == std::string_view::npos) break;
    rest = rest.substr(plus + 1);
  }
  return out;
}

std::string client_address(std::string_view value, int prefix_bits) {
  std::string_view v = text::trim(value.substr(0, value.find(',')));
  if (v.empty()) return "-";  // no address (",10.0.0.1" or blank): the absent value, as nginx logs it
  if (auto m = masked(v, prefix_bits)) return *m;
  if (!v.empty() && v.front() == '[') {  // [v6]:port
    if (auto close = v.find(']'); close != std::string_view::npos) {
      if (auto m = masked(v.substr(1, close - 1), prefix_bits)) return *m;
    }
  }
  if (const std::size_t colon = v.rfind(':'); colon != std::string_view::npos &&
                                             v.find(':') == colon) {  // v4:port
    if (auto m = masked(v.substr(0, colon), prefix_bits)) return *m;
  }
  return std::string(v);
}

std::optional<Micros> parse_log_time(std::string_view s) {
  s = text::trim(s);
  if (!s.empty() && s.front() == '[' && s.back() == ']') s = s.substr(1, s.size() - 2);
  if (s.empty()) return std::nullopt;
  if (auto t = iso_time(s)) return t;
  if (auto t = nginx_time(s)) return t;
  return epoch_number(s);
}

std::optional<Micros> parse_log_duration(std::string_view text, Micros unit) {
  const std::string_view s = text::trim(text);
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end == s.data() || !std::isfinite(v) || v < 0) return std::nullopt;
  const std::string suffix = text::lower(text::trim(std::string_view(end, s.data() + s.size() - end)));
  double scale = static_cast<double>(unit);
  if (suffix == "us" || suffix == "\u00b5s") {
    scale = 1;
  } else if (suffix == "ms") {
    scale = 1e3;
  } else if (suffix == "s") {
    scale = 1e6;
  } else if (suffix == "m" || suffix == "min") {
    scale = 60e6;
  } else if (suffix == "h") {
    scale = 3600e6;
  } else if (!suffix.empty()) {
    return std::nullopt;
  }
  const double us = v * scale;
  if (us > 23.0 * 3600e6) return std::nullopt;
  return static_cast<Micros>(std::llround(us));
}

Micros default_duration_unit(std::string_view field) noexcept {
  if (field == "duration" || field.ends_with("_ms") || field.ends_with("-ms")) return 1000;
  if (field.ends_with("_us") || field.ends_with("-us")) return 1;
  return kMicrosPerSecond;
}

}  // namespace floodgate
