// Prints, one JSON object per line, the rate-limit headers of real decisions (the memory store
// running each algorithm) across strategies, bursts, multi-limits and amounts up to 2^53, allowed
// and denied. check_headers.js reads them with an RFC 8941 parser nobody here wrote.
#include <cstdio>
#include <string>
#include <vector>

#include "floodgate/headers.hpp"
#include "floodgate/memory_storage.hpp"

namespace {

using namespace floodgate;

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

void print(const Policy& p, const Decision& d) {
  std::string line = "{\"policy\":" + json_string(p.describe()) + ",\"allowed\":" + (d.allowed ? "true" : "false") +
                     ",\"headers\":[";
  bool first = true;
  for (const auto& [name, value] : rate_limit_headers(p, d)) {
    line += (first ? "[" : ",[") + json_string(name) + "," + json_string(value) + "]";
    first = false;
  }
  std::puts((line + "]}").c_str());
}

}  // namespace

int main() {
  const std::vector<std::string> amounts{"1", "10", "999999999999999", "1000000000000000", "9007199254740992"};
  const std::vector<std::string> periods{"second", "minute", "250 ms", "7 days"};
  const std::vector<std::string> bursts{"", " burst 1", " burst 25", " burst 9007199254740992"};
  const std::vector<Strategy> strategies{Strategy::kFixedWindow, Strategy::kMovingWindow,
                                         Strategy::kSlidingWindowCounter, Strategy::kTokenBucket,
                                         Strategy::kLeakyBucket, Strategy::kGcra};
  MemoryStorage store;
  int n = 0;
  for (const Strategy s : strategies) {
    for (const auto& amount : amounts) {
      for (const auto& period : periods) {
        for (const auto& burst : bursts) {
          if (!burst.empty() && !uses_burst(s)) continue;
          const std::string text = amount + " per " + period + burst + "; 3 per hour";
          for (const std::string& limits : {amount + " per " + period + burst, text}) {
            auto p = Policy::make("p\"" + std::to_string(n++), s, limits);
            if (!p.ok()) continue;
            const Micros now = 1'700'000'000'000'000;
            // A unit hit, a large one (denied or draining), then one that can never fit.
            for (const std::int64_t cost : {std::int64_t{1}, std::int64_t{1} << 52, kMaxAmount}) {
              auto d = store.apply(*p, "k", cost, Effect::kHit, now);
              if (d.ok()) print(*p, *d);
            }
          }
        }
      }
    }
  }
  // A smooth limit beside a calendar month's (the fixed window runs calendar periods): every limit
  // is an item of RateLimit with its own balance.
  for (const char* limits : {"100 per minute; 5000 per calendar month", "2 per second; 3 per minute; 10 per calendar day"}) {
    auto p = Policy::make("cal\"" + std::to_string(n++), Strategy::kFixedWindow, limits);
    if (!p.ok()) continue;
    for (const std::int64_t cost : {std::int64_t{1}, std::int64_t{4000}, kMaxAmount}) {
      auto d = store.apply(*p, "k", cost, Effect::kHit, 1'700'000'000'000'000);
      if (d.ok()) print(*p, *d);
    }
  }
  // Concurrency limits: `qu="concurrent-requests"` and no window. Hits without an id take leases
  // that only their time to live frees (the headers are what is checked here).
  for (const auto& amount : amounts) {
    for (const std::string ttl : {"1 second", "5 minutes"}) {
      auto p = Policy::make("slots\"" + std::to_string(n++), Strategy::kConcurrency, amount + " concurrent for " + ttl);
      if (!p.ok()) continue;
      for (const std::int64_t cost : {std::int64_t{1}, std::int64_t{1} << 52, kMaxAmount}) {
        auto d = store.apply(*p, "k", cost, Effect::kHit, 1'700'000'000'000'000);
        if (d.ok()) print(*p, *d);
      }
    }
  }
  return 0;
}
