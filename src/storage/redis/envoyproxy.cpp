// The Redis storage's calls in envoyproxy/ratelimit's key layout (key_layout=envoyproxy;
// storage/envoyproxy_layout.hpp, scripts/envoyproxy_window.lua).
#include <string>

#include <fmt/format.h>

#include "storage/envoyproxy_layout.hpp"
#include "storage/redis/call.hpp"

namespace floodgate::redis {

std::string envoyproxy_key(std::string_view prefix, std::string_view key, Micros period, Micros now) {
  // envoyproxy: (now / divider) * divider on unix seconds, the divider being the unit in seconds.
  const std::int64_t divider = period / kMicrosPerSecond;
  const std::int64_t seconds = now / kMicrosPerSecond;
  return fmt::format("{}{}{}", prefix, key, seconds / divider * divider);
}

namespace detail {

bool envoyproxy_call(const RedisOptions& o, const Policy& policy, std::string_view key, std::int64_t cost,
                     Effect effect, Micros now, Call& c) {
  if (!o.envoyproxy_keys || !envoyproxy_window(policy)) return false;
  const Limit& limit = policy.limits()[0];
  c.script = &scripts::kEnvoyproxy;
  c.argv = {"EVALSHA", "", "1", envoyproxy_key(o.envoyproxy_prefix, key, limit.period, now)};
  c.slot = call_slot(o, c.argv[3]);
  c.argv.push_back(std::to_string(now));
  c.argv.push_back(std::to_string(cost));
  c.argv.emplace_back(effect == Effect::kHit ? "1" : "0");
  c.argv.push_back(std::to_string(limit.period / kMicrosPerSecond));  // EXPIRE: one unit, as envoyproxy
  c.argv.push_back(std::to_string(limit.amount));
  c.argv.push_back(std::to_string(limit.period));
  return true;
}

}  // namespace detail

}  // namespace floodgate::redis
