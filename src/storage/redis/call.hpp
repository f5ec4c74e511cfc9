// What the Redis storage's files share: a call on its way and the reading of hiredis results
// (redis_storage.cpp builds calls, run.cpp sends them).
#pragma once

#include <hiredis/hiredis.h>

#include <cerrno>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "absl/status/statusor.h"
#include "floodgate/decision.hpp"
#include "floodgate/policy.hpp"
#include "floodgate/storage.hpp"
#include "storage/redis/node.hpp"
#include "storage/redis/protocol.hpp"
#include "storage/redis/scripts_gen.hpp"

namespace floodgate::redis {

/// One command on its way: built by redis_storage.cpp, sent by run.cpp.
struct Call {
  std::vector<std::string> argv;  // EVALSHA sha numkeys keys… args… (words 0 and 1 chosen when sent), or DEL keys…
  int slot = 0;
  const scripts::Script* script = nullptr;  // null: a plain command (DEL)
  Node* ask_target = nullptr;               // the next attempt goes there, after ASKING
  /// How a script call is sent: kAuto is FCALL while the storage uses its function library, else
  /// EVALSHA; kEvalsha after the library could not be used; kEval after NOSCRIPT (the text).
  enum class Via : std::uint8_t { kAuto, kEvalsha, kEval };
  Via via = Via::kAuto;
  bool fcall = false;         // the last attempt sent FCALL
  bool load_library = false;  // FUNCTION LOAD goes first on the next attempt (Function not found)
  bool done = false;
  absl::StatusOr<Decision> result{Decision{}};  // run() sets every call's result
  // The amount and period of the call's first limit as sent (ARGV[6], ARGV[7]): the limit and
  // period of a short reply (parse_decision).
  std::int64_t limit = 0;
  Micros period = 0;
  // The group script: its per-item decisions and whether it committed (result: the call's status).
  std::vector<Decision>* group = nullptr;
  std::size_t group_items = 0;
  bool committed = false;
  // A reply of integers (the shared quota's): read into this instead of a decision.
  std::vector<std::int64_t>* ints = nullptr;
};

namespace detail {

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

// What a failed read or write on a connection means for the call.
inline absl::Status io_error(const Node& node, const redisContext* c, int saved_errno) {
  if (c->err == REDIS_ERR_IO && (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK)) {
    return absl::DeadlineExceededError(
        fmt::format("redis {}: no reply within the command timeout", node.endpoint().name()));
  }
  return absl::UnavailableError(fmt::format("redis {}: {}", node.endpoint().name(), c->errstr));
}

/// Builds `c` for a policy kept in envoyproxy/ratelimit's keys (envoyproxy.cpp): false, leaving
/// `c` alone, when the options or the policy do not ask for that layout (envoyproxy_window).
/// The integers of an array reply (the shared quota's), or Internal naming what came instead.
absl::Status parse_ints(const redisReply* reply, std::vector<std::int64_t>& out);

bool envoyproxy_call(const RedisOptions& o, const Policy& policy, std::string_view key, std::int64_t cost,
                     Effect effect, Micros now, Call& c);

}  // namespace detail

}  // namespace floodgate::redis
