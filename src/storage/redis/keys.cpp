// Redis key names of a (policy, user key) state, and the storage's load-time checks.
#include <iterator>
#include <utility>

#include <fmt/format.h>

#include "storage/redis/protocol.hpp"
#include "storage/url.hpp"

namespace floodgate::redis {

namespace {

// prefix{key}: a key that would make an empty tag ("" or one starting with '}') or that starts
// with '\x01' gets a '\x01' in front, so the mapping stays one-to-one.
void append_tagged_key(std::string& out, std::string_view prefix, std::string_view key) {
  out.append(prefix);
  out.push_back('{');
  if (key.empty() || key.front() == '}' || key.front() == '\x01') out.push_back('\x01');
  out.append(key);
  out.push_back('}');
}

}  // namespace

std::string state_key(std::string_view prefix, std::string_view key, std::uint64_t policy_hash,
                      std::size_t index) {
  std::string out;
  out.reserve(prefix.size() + key.size() + 24);
  append_tagged_key(out, prefix, key);
  fmt::format_to(std::back_inserter(out), ":{:016x}:{}", policy_hash, index);
  return out;
}

std::string quota_key(std::string_view prefix, std::string_view key) {
  std::string out;
  append_tagged_key(out, prefix, key);
  out.append(":q");
  return out;
}

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Reads a run of digits at `pos` (at least one) into `out`, moving `pos` past it.
bool digits(std::string_view s, std::size_t& pos, std::string_view& out) {
  const std::size_t from = pos;
  while (pos < s.size() && is_digit(s[pos])) ++pos;
  out = s.substr(from, pos - from);
  return pos > from;
}

bool expect(std::string_view s, std::size_t& pos, char c) {
  if (pos >= s.size() || s[pos] != c) return false;
  ++pos;
  return true;
}

// A decimal as the state id prints it (no leading zero, below 2^64) and its value.
bool canonical(std::string_view d, std::uint64_t& value) {
  if (d.empty() || d.size() > 19 || (d.size() > 1 && d.front() == '0')) return false;
  value = 0;
  for (const char c : d) value = value * 10 + static_cast<std::uint64_t>(c - '0');
  return true;
}

// A period in µs, short: the number of the largest of days, hours, minutes and seconds that
// divides it and that unit's letter, else the µs in decimal. Each spelling names one value.
void append_period(std::string& out, std::uint64_t micros) {
  static constexpr std::pair<std::uint64_t, char> kUnits[] = {
      {86'400'000'000ull, 'd'}, {3'600'000'000ull, 'h'}, {60'000'000ull, 'm'}, {1'000'000ull, 's'}};
  for (const auto& [unit, letter] : kUnits) {
    if (micros != 0 && micros % unit == 0) {
      fmt::format_to(std::back_inserter(out), "{}{}", micros / unit, letter);
      return;
    }
  }
  fmt::format_to(std::back_inserter(out), "{}", micros);
}

// The strategy and anchor of a state id as one letter (upper case: anchored at the first hit).
char strategy_letter(std::string_view strategy, std::string_view anchor) {
  static constexpr std::pair<std::string_view, char> kLetters[] = {
      {"fixed-window", 'f'}, {"moving-window", 'm'}, {"sliding-window-counter", 's'},
      {"token-bucket", 't'}, {"leaky-bucket", 'l'},  {"gcra", 'g'}};
  char letter = 0;
  for (const auto& [name, l] : kLetters) {
    if (name == strategy) letter = l;
  }
  if (letter == 0) return 0;
  if (anchor == "clock") return letter;
  if (anchor == "first-hit") return static_cast<char>(letter - 'a' + 'A');
  return 0;
}

// The identity: a kind letter, the number of parts, then ":<length>:<part>" each. Copied as it is.
bool compact_identity(std::string_view s, std::size_t& pos, std::string& out) {
  std::string_view d;
  if (s.empty() || ((s[0] < 'a' || s[0] > 'z') && (s[0] < 'A' || s[0] > 'Z'))) return false;
  ++pos;
  std::uint64_t parts = 0, length = 0;
  if (!digits(s, pos, d) || !canonical(d, parts)) return false;
  for (std::uint64_t i = 0; i < parts; ++i) {
    if (!expect(s, pos, ':') || !digits(s, pos, d) || !canonical(d, length) || !expect(s, pos, ':') ||
        length > s.size() - pos) {
      return false;
    }
    pos += length;
  }
  out.append(s.substr(0, pos));
  return true;
}

// "|strategy|anchor": one letter.
bool compact_strategy(std::string_view s, std::size_t& pos, std::string& out) {
  if (!expect(s, pos, '|')) return false;
  const std::size_t bar = s.find('|', pos);
  if (bar == std::string_view::npos) return false;
  const std::string_view strategy = s.substr(pos, bar - pos);
  pos = bar + 1;
  std::size_t end = s.find('|', pos);
  if (end == std::string_view::npos) end = s.size();
  const char letter = strategy_letter(strategy, s.substr(pos, end - pos));
  if (letter == 0) return false;
  out.push_back('|');
  out.push_back(letter);
  pos = end;
  return true;
}

// One limit's "|period" (an inline limit: "|amount/period/capacity"), the period short, then a
// calendar limit's "~<unit letter><anchor day>:<length>:<zone>" as it is.
bool compact_limit(std::string_view s, std::size_t& pos, std::string& out) {
  std::string_view d;
  std::uint64_t period = 0, length = 0;
  if (!expect(s, pos, '|') || !digits(s, pos, d)) return false;
  out.push_back('|');
  if (pos < s.size() && s[pos] == '/') {
    out.append(d);
    out.push_back('/');
    ++pos;
    if (!digits(s, pos, d) || !canonical(d, period)) return false;
    append_period(out, period);
    if (!expect(s, pos, '/') || !digits(s, pos, d)) return false;
    out.push_back('/');
    out.append(d);
  } else {
    if (!canonical(d, period)) return false;
    append_period(out, period);
  }
  if (pos < s.size() && s[pos] == '~') {
    const std::size_t from = pos++;
    if (pos >= s.size()) return false;
    ++pos;  // the unit letter
    if (!digits(s, pos, d) || !expect(s, pos, ':') || !digits(s, pos, d) || !canonical(d, length) ||
        !expect(s, pos, ':') || length > s.size() - pos) {
      return false;
    }
    pos += length;
    out.append(s.substr(from, pos - from));
  }
  return true;
}

// key_id's reading of a state id (Policy::state_id's grammar); false where it is not that.
bool compact(std::string_view s, std::string& out) {
  std::size_t pos = 0;
  if (!compact_identity(s, pos, out) || !compact_strategy(s, pos, out)) return false;
  while (pos < s.size()) {
    if (!compact_limit(s, pos, out)) return false;
  }
  return true;
}

}  // namespace

std::string key_id(std::string_view state_id) {
  std::string out;
  out.reserve(state_id.size());
  if (compact(state_id, out)) return out;
  out = "!";
  out.append(state_id);
  return out;
}

std::string state_key(std::string_view prefix, std::string_view key, std::string_view id, std::size_t index) {
  std::string out;
  out.reserve(prefix.size() + key.size() + id.size() + 16);
  append_tagged_key(out, prefix, key);
  out.push_back(':');
  out.append(id);
  fmt::format_to(std::back_inserter(out), ":{}:{}", id.size(), index);
  return out;
}

std::string state_key(std::string_view prefix, std::string_view key, const Policy& policy,
                      std::size_t index) {
  return state_key(prefix, key, key_id(policy.state_id()), index);
}

std::string reservation_key(std::string_view prefix, std::string_view key, std::string_view id,
                            std::string_view reservation) {
  std::string out;
  out.reserve(prefix.size() + key.size() + id.size() + reservation.size() + 16);
  append_tagged_key(out, prefix, key);
  fmt::format_to(std::back_inserter(out), ":r:{}:", id.size());
  out.append(id);
  out.append(reservation);
  return out;
}

std::string reservation_key(std::string_view prefix, std::string_view key, const Policy& policy,
                            std::string_view reservation) {
  return reservation_key(prefix, key, key_id(policy.state_id()), reservation);
}

std::uint64_t policy_hash(const Policy& policy) noexcept {
  std::uint64_t h = 14695981039346656037ull;
  for (const char c : policy.state_id()) {
    h ^= static_cast<std::uint8_t>(c);
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace floodgate::redis

namespace floodgate {

std::optional<absl::StatusOr<PolicyCheck>> check_registered_storage(const StorageUrl& url) {
  auto options = redis::parse_redis_url(url);
  if (!options) return std::nullopt;
  if (!options->ok()) return absl::StatusOr<PolicyCheck>(options->status());
  return absl::StatusOr<PolicyCheck>(PolicyCheck(&redis::check_policy));
}

}  // namespace floodgate
