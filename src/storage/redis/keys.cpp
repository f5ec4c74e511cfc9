// Redis key names of a (policy, user key) state, and the storage's load-time checks.
#include <iterator>

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

std::string state_key(std::string_view prefix, std::string_view key, const Policy& policy,
                      std::size_t index) {
  const std::string& fp = policy.state_id();
  std::string out;
  out.reserve(prefix.size() + key.size() + fp.size() + 32);
  append_tagged_key(out, prefix, key);
  out.push_back(':');
  out.append(fp);
  fmt::format_to(std::back_inserter(out), ":{}:{}", fp.size(), index);
  return out;
}

std::string reservation_key(std::string_view prefix, std::string_view key, const Policy& policy,
                            std::string_view id) {
  const std::string& fp = policy.state_id();
  std::string out;
  out.reserve(prefix.size() + key.size() + fp.size() + id.size() + 32);
  append_tagged_key(out, prefix, key);
  fmt::format_to(std::back_inserter(out), ":r:{}:", fp.size());
  out.append(fp);
  out.append(id);
  return out;
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
