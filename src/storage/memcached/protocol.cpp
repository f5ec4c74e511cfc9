#include "storage/memcached/protocol.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>

#include <fmt/format.h>

#include "algorithms/arith.hpp"

namespace floodgate::memcached {

namespace {

absl::Status bad(const StorageUrl& url, std::string_view problem) { return storage_url_error(url, problem); }

bool whole(std::string_view s, long long& out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

absl::StatusOr<Server> parse_server(const StorageUrl& url, std::string_view item) {
  Server s;
  std::string_view port;
  if (item.starts_with('[')) {  // [::1]:11211
    const std::size_t close = item.find(']');
    if (close == std::string_view::npos) return bad(url, "unclosed '[' in a host");
    s.host = std::string(item.substr(1, close - 1));
    const std::string_view rest = item.substr(close + 1);
    if (!rest.empty() && !rest.starts_with(':')) return bad(url, "expected ]:port after an IPv6 host");
    if (!rest.empty()) port = rest.substr(1);
  } else {
    const std::size_t colon = item.find(':');
    s.host = std::string(item.substr(0, colon));
    if (colon != std::string_view::npos) port = item.substr(colon + 1);
  }
  if (s.host.empty()) return bad(url, "expected host[:port] for every server");
  if (!port.empty()) {
    long long p = 0;
    if (!whole(port, p) || p < 1 || p > 65535) {
      return bad(url, fmt::format("port \"{}\" must be a number from 1 to 65535", port));
    }
    s.port = static_cast<int>(p);
  }
  return s;
}

// Little-endian fixed-width fields.
void put64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Reads fields off the front of a value; `ok` turns false on a short read.
struct Reader {
  std::string_view in;
  bool ok = true;
  std::uint64_t u(int bytes) {
    if (in.size() < static_cast<std::size_t>(bytes)) {
      ok = false;
      return 0;
    }
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= std::uint64_t{static_cast<unsigned char>(in[i])} << (8 * i);
    in.remove_prefix(static_cast<std::size_t>(bytes));
    return v;
  }
  std::int64_t i64() { return static_cast<std::int64_t>(u(8)); }
};

// The algorithm byte of the header.
template <class S> constexpr char kTag = 0;
template <> constexpr char kTag<fixed_window::State> = 1;
template <> constexpr char kTag<sliding_window::State> = 2;
template <> constexpr char kTag<bucket::State> = 3;
template <> constexpr char kTag<moving_window::State> = 4;

void put_state(std::string& out, const fixed_window::State& s) {
  put64(out, static_cast<std::uint64_t>(s.start));
  put64(out, static_cast<std::uint64_t>(s.count));
}
bool get_state(Reader& r, fixed_window::State& s) {
  s.start = r.i64();
  // A count past kMaxCount (written before counts saturated) reads as saturated, as it would be now.
  s.count = std::min(r.i64(), detail::kMaxCount);
  return r.ok && s.count >= 0;
}
void put_state(std::string& out, const sliding_window::State& s) {
  put64(out, static_cast<std::uint64_t>(s.start));
  put64(out, static_cast<std::uint64_t>(s.current));
  put64(out, static_cast<std::uint64_t>(s.previous));
}
bool get_state(Reader& r, sliding_window::State& s) {
  s.start = r.i64();
  s.current = std::min(r.i64(), detail::kMaxCount);  // saturated, as the fixed window's count
  s.previous = std::min(r.i64(), detail::kMaxCount);
  return r.ok && s.current >= 0 && s.previous >= 0;
}
__extension__ typedef unsigned __int128 uint128;

void put_state(std::string& out, const bucket::State& s) {
  const auto u = static_cast<uint128>(s.tat);
  put64(out, static_cast<std::uint64_t>(u));
  put64(out, static_cast<std::uint64_t>(u >> 64));
  put64(out, static_cast<std::uint64_t>(s.amount));
}
bool get_state(Reader& r, bucket::State& s) {
  const std::uint64_t lo = r.u(8);
  const std::uint64_t hi = r.u(8);
  s.tat = static_cast<int128>((static_cast<uint128>(hi) << 64) | lo);
  s.amount = r.i64();
  return r.ok && s.amount >= 0;
}
void put_state(std::string& out, const moving_window::State& s) {
  put64(out, static_cast<std::uint64_t>(s.total));
  put32(out, static_cast<std::uint32_t>(s.log.size()));
  for (const moving_window::Entry& e : s.log) {
    put64(out, static_cast<std::uint64_t>(e.at));
    put64(out, static_cast<std::uint64_t>(e.count));
  }
}
bool get_state(Reader& r, moving_window::State& s) {
  s.total = r.i64();
  const std::uint64_t n = r.u(4);
  if (!r.ok || n * 16 > r.in.size() || n > moving_window::EntryLog::kMaxCapacity) return false;
  s.log.clear();
  s.log.set_capacity(std::max<std::size_t>(4, n));
  std::int64_t sum = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    const moving_window::Entry e{r.i64(), r.i64()};
    // Counts that overflow a 64-bit sum are no log floodgate wrote (its total is at most kMaxCount).
    if (e.count <= 0 || (!s.log.empty() && e.at <= s.log.back().at) || __builtin_add_overflow(sum, e.count, &sum)) {
      return false;
    }
    s.log.push_back(e);
  }
  s.front_at = s.log.empty() ? 0 : s.log.front().at;
  s.back_at = s.log.empty() ? 0 : s.log.back().at;
  return r.ok && sum == s.total;
}

}  // namespace

std::string Server::name() const {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

namespace {

using std::chrono::milliseconds;

constexpr NumericOption<MemcachedOptions> kNumericOptions[] = {
    {"connect_timeout_ms", 1, 600000, [](MemcachedOptions& o, long long n) { o.connect_timeout = milliseconds(n); }},
    {"timeout_ms", 1, 600000, [](MemcachedOptions& o, long long n) { o.timeout = milliseconds(n); }},
    {"pool", 1, 1024, [](MemcachedOptions& o, long long n) { o.pool = static_cast<std::size_t>(n); }},
    {"cas_retries", 1, 100000, [](MemcachedOptions& o, long long n) { o.cas_retries = static_cast<int>(n); }},
    {"ttl_slack_ms", 0, 86400000, [](MemcachedOptions& o, long long n) { o.ttl_slack = milliseconds(n); }},
    {"item_size_max", 1024, 1LL << 30, [](MemcachedOptions& o, long long n) { o.item_size_max = static_cast<std::size_t>(n); }},
    {"breaker_failures", 1, 1000000, [](MemcachedOptions& o, long long n) { o.breaker_failures = static_cast<int>(n); }},
    {"breaker_cooldown_ms", 1, 3600000, [](MemcachedOptions& o, long long n) { o.breaker_cooldown = milliseconds(n); }},
    {"backoff_min_ms", 1, 3600000, [](MemcachedOptions& o, long long n) { o.backoff_min = milliseconds(n); }},
    {"backoff_max_ms", 1, 3600000, [](MemcachedOptions& o, long long n) { o.backoff_max = milliseconds(n); }},
};

absl::Status parse_option(const StorageUrl& url, const std::string& name, const std::string& value,
                          MemcachedOptions& o) {
  if (auto numeric = parse_numeric_option(url, kNumericOptions, name, value, o)) return *numeric;
  if (name == "prefix") {
    const bool printable = std::all_of(value.begin(), value.end(), [](char c) { return c > ' ' && c < 0x7f; });
    if (!printable || value.size() > kMaxPrefix) {
      return bad(url, fmt::format("option prefix must be printable ASCII without spaces, at most {} bytes", kMaxPrefix));
    }
    o.prefix = value;
  } else if (name == "clock") {
    if (value != "client") {
      return bad(url, fmt::format("option clock={}: memcached has no clock a client can read; decisions use the "
                                  "caller's clock (clock=client)",
                                  value));
    }
  } else {
    return bad(url, fmt::format("unknown option \"{}\" (memcached takes connect_timeout_ms, timeout_ms, pool, prefix, "
                                "cas_retries, ttl_slack_ms, item_size_max, clock, breaker_failures, "
                                "breaker_cooldown_ms, backoff_min_ms, backoff_max_ms)",
                                name));
  }
  return absl::OkStatus();
}

}  // namespace

std::optional<absl::StatusOr<MemcachedOptions>> parse_memcached_url(const StorageUrl& url) {
  if (url.scheme != "memcached") return std::nullopt;
  MemcachedOptions o;
  if (!url.user.empty() || !url.password.empty()) {
    return bad(url, "memcached has no user or password here (SASL is not supported)");
  }
  if (!url.path.empty() && url.path != "/") return bad(url, "memcached URLs have no path");
  if (url.hosts.empty()) return bad(url, "expected memcached://host[:port][,host[:port]…]");
  for (std::string_view rest = url.hosts;;) {
    const std::size_t comma = rest.find(',');
    auto server = parse_server(url, rest.substr(0, comma));
    if (!server.ok()) return server.status();
    o.servers.push_back(*std::move(server));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  for (const auto& [name, value] : url.query) {
    if (auto st = parse_option(url, name, value, o); !st.ok()) return st;
  }
  if (o.backoff_max < o.backoff_min) o.backoff_max = o.backoff_min;
  return o;
}

std::string storage_key(std::string_view prefix, const Policy& policy, std::string_view key) {
  const std::string& fp = policy.state_id();
  std::string input;
  input.reserve(8 + fp.size() + key.size());
  for (int i = 7; i >= 0; --i) {
    input.push_back(static_cast<char>((static_cast<std::uint64_t>(fp.size()) >> (8 * i)) & 0xff));
  }
  input += fp;
  input += key;
  std::array<unsigned char, 32> digest{};
  unsigned int len = 0;
  EVP_Digest(input.data(), input.size(), digest.data(), &len, EVP_sha256(), nullptr);
  std::string out(prefix);
  out.reserve(prefix.size() + 64);
  static constexpr char kHex[] = "0123456789abcdef";
  for (const unsigned char b : digest) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

std::string reservation_key(std::string_view prefix, const Policy& policy, std::string_view key, std::string_view id) {
  const std::string& fp = policy.state_id();
  std::string input = "r";
  for (const std::size_t n : {fp.size(), key.size()}) {
    for (int i = 7; i >= 0; --i) input.push_back(static_cast<char>((static_cast<std::uint64_t>(n) >> (8 * i)) & 0xff));
  }
  input += fp;
  input += key;
  input += id;
  std::array<unsigned char, 32> digest{};
  unsigned int len = 0;
  EVP_Digest(input.data(), input.size(), digest.data(), &len, EVP_sha256(), nullptr);
  std::string out(prefix);
  out.push_back('r');
  static constexpr char kHex[] = "0123456789abcdef";
  for (const unsigned char b : digest) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

template <class S>
void encode(const S* states, std::size_t count, std::string& out) {
  out.clear();
  out.push_back('F');
  out.push_back('G');
  out.push_back(kTag<S>);
  out.push_back(static_cast<char>(count));
  for (std::size_t i = 0; i < count; ++i) put_state(out, states[i]);
}

template <class S>
bool decode(std::string_view value, S* states, std::size_t count) {
  if (value.size() < 4 || value[0] != 'F' || value[1] != 'G' || value[2] != kTag<S> ||
      static_cast<unsigned char>(value[3]) != count) {
    return false;
  }
  Reader r{value.substr(4)};
  for (std::size_t i = 0; i < count; ++i) {
    if (!get_state(r, states[i])) return false;
  }
  return r.ok && r.in.empty();
}

template void encode(const fixed_window::State*, std::size_t, std::string&);
template void encode(const sliding_window::State*, std::size_t, std::string&);
template void encode(const bucket::State*, std::size_t, std::string&);
template void encode(const moving_window::State*, std::size_t, std::string&);
template bool decode(std::string_view, fixed_window::State*, std::size_t);
template bool decode(std::string_view, sliding_window::State*, std::size_t);
template bool decode(std::string_view, bucket::State*, std::size_t);
template bool decode(std::string_view, moving_window::State*, std::size_t);

std::size_t max_value_size(const Policy& policy) {
  std::size_t n = 4;
  for (const Limit& l : policy.limits()) {
    switch (policy.strategy()) {
      case Strategy::kFixedWindow:
        n += 16;
        break;
      case Strategy::kSlidingWindowCounter:
        n += 24;
        break;
      case Strategy::kMovingWindow:
      case Strategy::kConcurrency:
        // Saturates: an amount beyond any item size is refused below all the same.
        n += 12 + static_cast<std::size_t>(std::min<std::int64_t>(l.amount, std::int64_t{1} << 40)) * 16;
        break;
      case Strategy::kTokenBucket:
      case Strategy::kLeakyBucket:
      case Strategy::kGcra:
        n += 16;
        break;
    }
  }
  return n;
}

absl::Status check_policy(const Policy& policy, std::size_t item_size_max) {
  // memcached's item header (≤ 56 bytes with the CAS), the key (≤ 250) and the value's "\r\n".
  constexpr std::size_t kOverhead = 56 + 250 + 2;
  const std::size_t need = max_value_size(policy);
  if (need + kOverhead > item_size_max) {
    return absl::InvalidArgumentError(fmt::format(
        "policy \"{}\": its state can take {} bytes (the moving window keeps one 16-byte entry "
        "per unit of the amount), more than memcached's item size limit of {} bytes allows; use "
        "a smaller amount, another strategy, or a larger item_size_max (memcached -I)",
        policy.name(), need, item_size_max));
  }
  return absl::OkStatus();
}

std::uint32_t expiration(std::chrono::seconds ttl, std::int64_t wall_now) {
  const std::int64_t t = std::max<std::int64_t>(1, ttl.count());
  if (t <= kRelativeLimit) return static_cast<std::uint32_t>(t);
  const std::int64_t absolute = wall_now > std::numeric_limits<std::int32_t>::max() - t
                                    ? std::numeric_limits<std::int32_t>::max()
                                    : wall_now + t;
  return static_cast<std::uint32_t>(std::max<std::int64_t>(absolute, kRelativeLimit + 1));
}

std::chrono::seconds time_to_live(Micros absent_from, Micros now,
                                  std::chrono::milliseconds slack) {
  // absent_from ≤ 2^53 + 2^53 and now ≥ 0: no overflow.
  const std::int64_t micros = std::max<Micros>(0, absent_from - now) + slack.count() * 1000;
  const std::int64_t seconds = micros / kMicrosPerSecond + (micros % kMicrosPerSecond != 0);
  return std::chrono::seconds(seconds + 1);
}

}  // namespace floodgate::memcached
