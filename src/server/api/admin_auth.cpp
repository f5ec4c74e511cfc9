// The admin endpoints' bearer token: where it comes from and its constant-time check.
#include "server/api/admin_auth.hpp"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <array>
#include <cstdlib>
#include <fstream>

#include <fmt/format.h>

#include "server/config/config.hpp"

namespace floodgate::server {

namespace {

using Digest = std::array<unsigned char, SHA256_DIGEST_LENGTH>;

Digest digest(std::string_view s) noexcept {
  Digest d{};
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), d.data());
  return d;
}

bool b64token_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
         c == '_' || c == '~' || c == '+' || c == '/';
}

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

AdminAuth check_admin(std::string_view authorization, std::string_view token) noexcept {
  if (token.empty()) return AdminAuth::kNotConfigured;
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() <= kScheme.size()) return AdminAuth::kMissing;
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    const char c = authorization[i];
    if ((c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c) != kScheme[i]) return AdminAuth::kMissing;
  }
  const Digest given = digest(trim(authorization.substr(kScheme.size())));
  const Digest wanted = digest(token);
  return CRYPTO_memcmp(given.data(), wanted.data(), given.size()) == 0 ? AdminAuth::kGranted : AdminAuth::kWrong;
}

absl::Status check_admin_token(std::string_view token) {
  if (token.size() < kMinAdminTokenBytes || token.size() > kMaxAdminTokenBytes) {
    return absl::InvalidArgumentError(fmt::format("the admin token must be {} to {} bytes long (it has {})",
                                                  kMinAdminTokenBytes, kMaxAdminTokenBytes, token.size()));
  }
  std::size_t end = token.size();
  while (end > 0 && token[end - 1] == '=') --end;
  for (std::size_t i = 0; i < end; ++i) {
    if (!b64token_char(token[i])) {
      return absl::InvalidArgumentError(
          "the admin token may hold only letters, digits, \"-._~+/\" and trailing \"=\" (RFC 6750)");
    }
  }
  return absl::OkStatus();
}

absl::Status resolve_admin_token(Config& config) {
  std::string source;
  std::string token;
  if (const char* env = std::getenv(kAdminTokenEnv); env != nullptr && *env != '\0') {
    source = kAdminTokenEnv;
    token = std::string(trim(env));
  } else if (!config.admin.token_file.empty()) {
    source = config.admin.token_file;
    std::ifstream in(config.admin.token_file);
    std::string line;
    if (!in || !std::getline(in, line)) {
      return absl::InvalidArgumentError(fmt::format("admin.token_file {}: cannot read it", source));
    }
    token = std::string(trim(line));
  } else {
    config.admin.token.clear();
    return absl::OkStatus();
  }
  if (auto s = check_admin_token(token); !s.ok()) {
    return absl::InvalidArgumentError(fmt::format("{}: {}", source, std::string(s.message())));
  }
  config.admin.token = std::move(token);
  return absl::OkStatus();
}

}  // namespace floodgate::server
