#include "storage/redis/protocol.hpp"

#include <hiredis/hiredis.h>

#include <charconv>

#include <fmt/format.h>

#include "floodgate/algorithms.hpp"

namespace floodgate::redis {

namespace {
void append_header(std::string& out, char kind, std::size_t n) {
  char buf[24];
  buf[0] = kind;
  char* end = std::to_chars(buf + 1, buf + sizeof buf - 2, n).ptr;
  *end++ = '\r';
  *end++ = '\n';
  out.append(buf, end);
}
}  // namespace

void append_resp(std::string& out, int argc, const char* const* argv, const std::size_t* lens) {
  std::size_t size = 16;
  for (int i = 0; i < argc; ++i) size += lens[i] + 24;
  out.reserve(out.size() + size);
  append_header(out, '*', static_cast<std::size_t>(argc));
  for (int i = 0; i < argc; ++i) {
    append_header(out, '$', lens[i]);
    out.append(argv[i], lens[i]);
    out.append("\r\n", 2);
  }
}

std::uint16_t crc16(std::string_view data) noexcept {
  std::uint16_t crc = 0;
  for (const char ch : data) {
    crc = static_cast<std::uint16_t>(crc ^ (static_cast<std::uint8_t>(ch) << 8));
    for (int i = 0; i < 8; ++i) {
      crc = (crc & 0x8000) ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021)
                           : static_cast<std::uint16_t>(crc << 1);
    }
  }
  return crc;
}

int key_slot(std::string_view key) noexcept {
  const std::size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const std::size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return crc16(key) & (kSlots - 1);
}

ScriptId script_for(const Policy& policy) noexcept {
  switch (policy.strategy()) {
    case Strategy::kFixedWindow: {
      if (policy.anchor() == Anchor::kFirstHit) return ScriptId::kFixedWindowFirstHit;
      for (const Limit& l : policy.limits()) {
        if (l.calendar) return ScriptId::kFixedWindowCalendar;
      }
      return ScriptId::kFixedWindow;
    }
    case Strategy::kMovingWindow:
    case Strategy::kConcurrency:
      return ScriptId::kMovingWindow;
    case Strategy::kSlidingWindowCounter:
      return ScriptId::kSlidingWindow;
    case Strategy::kTokenBucket:
    case Strategy::kLeakyBucket:
    case Strategy::kGcra:
      return ScriptId::kBucket;
  }
  return ScriptId::kBucket;
}

namespace {
constexpr Micros kMaxRedisPeriod = Micros{1} << 51;
constexpr int128 kMaxBucketSpan = int128{1} << 52;
}  // namespace

absl::Status check_policy(const Policy& policy) {
  const auto& limits = policy.limits();
  for (std::size_t i = 0; i < limits.size(); ++i) {
    const Limit& l = limits[i];
    if (l.period > kMaxRedisPeriod) {
      return absl::InvalidArgumentError(fmt::format(
          "policy \"{}\", limit \"{}\": the Redis storage keeps times exact only for periods up "
          "to 2^51 µs (about 71 years)",
          policy.name(), to_string(l)));
    }
    if (uses_burst(policy.strategy())) {
      const int128 span = static_cast<int128>(l.capacity()) * l.period / l.amount;
      if (span >= kMaxBucketSpan) {
        return absl::InvalidArgumentError(fmt::format(
            "policy \"{}\", limit \"{}\": capacity × period / amount = {} µs; the Redis storage "
            "keeps bucket times exact only below 2^52 µs (about 142 years)",
            policy.name(), to_string(l), static_cast<std::int64_t>(
                                             span > INT64_MAX ? int128{INT64_MAX} : span)));
      }
    }
  }
  return absl::OkStatus();
}

std::array<Micros, 4> calendar_starts(const Calendar& calendar, Micros t) noexcept {
  const Period cur = calendar.period_at(t);
  const Period next = calendar.period_at(cur.end);
  return {calendar.period_at(cur.start - 1).start, cur.start, cur.end, next.end};
}

void script_args(const Policy& policy, std::int64_t cost, bool hit, std::optional<Micros> now,
                 std::int64_t ttl_slack_ms, std::vector<std::string>& out, Micros client_now) {
  out.push_back(now ? std::to_string(*now) : std::string());
  out.push_back(std::to_string(cost));
  out.push_back(hit ? "1" : "0");
  out.push_back(policy.shape() ? "1" : "0");
  out.push_back(std::to_string(ttl_slack_ms));
  limit_args(policy, cost, client_now, out);
}

void limit_args(const Policy& policy, std::int64_t cost, Micros client_now, std::vector<std::string>& out) {
  const bool bucket = uses_burst(policy.strategy());
  const bool calendar = script_for(policy) == ScriptId::kFixedWindowCalendar;
  for (const Limit& l : policy.limits()) {
    out.push_back(std::to_string(l.amount));
    out.push_back(std::to_string(l.period));
    if (calendar) {
      if (l.calendar) {
        for (const Micros start : calendar_starts(l.calendar, client_now)) out.push_back(std::to_string(start));
      } else {
        out.insert(out.end(), 4, std::string());
      }
    }
    if (!bucket) continue;
    const int128 n = l.amount;
    const int128 cap = static_cast<int128>(l.capacity()) * l.period;
    const auto cap_w = static_cast<std::int64_t>(cap / n);
    const auto cap_r = static_cast<std::int64_t>(cap % n);
    std::int64_t cost_w = cap_w + 1;  // a cost above the capacity never fits
    std::int64_t cost_r = 0;
    if (cost <= l.capacity()) {
      const int128 c = static_cast<int128>(cost) * l.period;
      cost_w = static_cast<std::int64_t>(c / n);
      cost_r = static_cast<std::int64_t>(c % n);
    }
    out.push_back(std::to_string(l.capacity()));
    out.push_back(std::to_string(cap_w));
    out.push_back(std::to_string(cap_r));
    out.push_back(std::to_string(cost_w));
    out.push_back(std::to_string(cost_r));
  }
}

}  // namespace floodgate::redis
