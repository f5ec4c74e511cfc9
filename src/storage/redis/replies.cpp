// The Redis storage's reading of replies, free of sockets: MOVED/ASK, the CLUSTER SLOTS reply, the
// scripts' decisions, and what to do next after a reply (see protocol.hpp).
#include <hiredis/hiredis.h>

#include <charconv>

#include <fmt/format.h>

#include "storage/redis/protocol.hpp"

namespace floodgate::redis {

namespace {
bool to_int(std::string_view s, long long& out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}
}  // namespace

std::optional<Redirect> parse_redirect(std::string_view error) {
  Redirect r;
  if (error.starts_with("MOVED ")) {
    error.remove_prefix(6);
  } else if (error.starts_with("ASK ")) {
    r.ask = true;
    error.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const std::size_t space = error.find(' ');
  long long slot = 0;
  if (space == std::string_view::npos || !to_int(error.substr(0, space), slot) || slot < 0 ||
      slot >= kSlots) {
    return std::nullopt;
  }
  r.slot = static_cast<int>(slot);
  const std::string_view where = error.substr(space + 1);
  const std::size_t colon = where.rfind(':');
  long long port = 0;
  if (colon == std::string_view::npos || !to_int(where.substr(colon + 1), port) || port < 1 ||
      port > 65535) {
    return std::nullopt;
  }
  std::string_view host = where.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  r.target.host = std::string(host);
  r.target.port = static_cast<int>(port);
  return r;
}

absl::StatusOr<std::vector<SlotRange>> parse_cluster_slots(const redisReply* reply,
                                                           std::string_view fallback_host) {
  auto malformed = [] { return absl::InternalError("malformed CLUSTER SLOTS reply"); };
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) return malformed();
  std::vector<SlotRange> out;
  for (std::size_t i = 0; i < reply->elements; ++i) {
    const redisReply* r = reply->element[i];
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3) return malformed();
    const redisReply* first = r->element[0];
    const redisReply* last = r->element[1];
    const redisReply* master = r->element[2];
    if (first->type != REDIS_REPLY_INTEGER || last->type != REDIS_REPLY_INTEGER ||
        master->type != REDIS_REPLY_ARRAY || master->elements < 2 ||
        master->element[0]->type != REDIS_REPLY_STRING ||
        master->element[1]->type != REDIS_REPLY_INTEGER) {
      return malformed();
    }
    SlotRange range;
    range.first = static_cast<int>(first->integer);
    range.last = static_cast<int>(last->integer);
    if (range.first < 0 || range.last >= kSlots || range.first > range.last) return malformed();
    range.master.host = std::string(master->element[0]->str, master->element[0]->len);
    if (range.master.host.empty() || range.master.host == "?") {
      range.master.host = std::string(fallback_host);
    }
    range.master.port = static_cast<int>(master->element[1]->integer);
    out.push_back(std::move(range));
  }
  return out;
}

namespace {
// The decision in a reply element: the string of 7 integers, "allowed limit period remaining
// reset_after retry_after delay", and an 8th (the named limit's reset_after) after several limits
// were combined, followed by each limit's remaining and reset_after (two words a limit), and last
// after a settle its SettleOutcome (1 to 3), separated by single spaces; nullopt if it is anything
// else.
constexpr std::size_t kMaxWords = 8 + 2 * kMaxLimitBalances + 1;
std::optional<Decision> decision_of(const redisReply* e, const Decision* short_form = nullptr) {
  if (e->type != REDIS_REPLY_STRING) return std::nullopt;
  std::string_view rest(e->str, e->len);
  long long v[kMaxWords] = {};
  std::size_t n = 0;
  for (;;) {
    if (n == kMaxWords) return std::nullopt;  // too many words
    const std::size_t space = rest.find(' ');
    if (!to_int(rest.substr(0, space), v[n++])) return std::nullopt;  // an empty word too
    if (space == std::string_view::npos) break;
    rest.remove_prefix(space + 1);
  }
  if (n == 2 && short_form != nullptr) {
    Decision d = *short_form;
    d.remaining = v[0];
    d.reset_after = v[1];
    return d;
  }
  if (n < 7) return std::nullopt;
  if (v[0] != 0 && v[0] != 1) return std::nullopt;
  const bool settle = n > 8 && (n - 8) % 2 == 1;
  if (settle && (v[n - 1] < 1 || v[n - 1] > 3)) return std::nullopt;
  const std::size_t balances = n > 8 ? (n - 8) / 2 : 0;
  if (balances == 1) return std::nullopt;  // several limits, or none
  Decision d;
  d.allowed = v[0] == 1;
  d.limit = v[1];
  d.period = v[2];
  d.remaining = v[3];
  d.reset_after = v[4];
  d.retry_after = v[5] < 0 ? kNever : v[5];
  d.delay = v[6];
  d.limit_reset_after = n >= 8 ? v[7] : 0;
  for (std::size_t i = 0; i < balances; ++i) d.balances[i] = {v[8 + 2 * i], v[9 + 2 * i]};
  d.balance_count = static_cast<std::uint8_t>(balances);
  if (settle) d.settle = static_cast<SettleOutcome>(v[n - 1]);
  return d;
}

}  // namespace

absl::StatusOr<Decision> parse_decision(const redisReply* reply) {
  const auto bad = [] { return absl::InternalError("unexpected reply from the floodgate script"); };
  if (reply == nullptr) return bad();
  auto d = decision_of(reply);
  if (!d) return bad();
  return *d;
}

absl::StatusOr<Decision> parse_decision(const redisReply* reply, std::int64_t limit, Micros period) {
  const auto bad = [] { return absl::InternalError("unexpected reply from the floodgate script"); };
  if (reply == nullptr) return bad();
  Decision allowed;
  allowed.allowed = true;
  allowed.limit = limit;
  allowed.period = period;
  auto d = decision_of(reply, &allowed);
  if (!d) return bad();
  return *d;
}

absl::Status parse_group(const redisReply* reply, std::size_t items, std::vector<Decision>& out,
                         bool& committed) {
  const auto bad = absl::InternalError("unexpected reply from the floodgate group script");
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY || reply->elements != 1 + items ||
      reply->element[0]->type != REDIS_REPLY_INTEGER) {
    return bad;
  }
  committed = reply->element[0]->integer == 1;
  out.clear();
  for (std::size_t j = 0; j < items; ++j) {
    auto d = decision_of(reply->element[1 + j]);
    if (!d) return bad;
    out.push_back(*d);
  }
  return absl::OkStatus();
}

absl::StatusOr<Endpoint> parse_master_addr(const redisReply* reply, std::string_view master) {
  if (reply != nullptr && reply->type == REDIS_REPLY_NIL) {
    return absl::NotFoundError(fmt::format("the sentinel does not know a master named \"{}\"", master));
  }
  if (reply != nullptr && reply->type == REDIS_REPLY_ERROR) {
    return absl::UnavailableError(fmt::format("SENTINEL get-master-addr-by-name: {}", std::string(reply->str, reply->len)));
  }
  long long port = 0;
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
      reply->element[0]->type != REDIS_REPLY_STRING || reply->element[1]->type != REDIS_REPLY_STRING ||
      reply->element[0]->len == 0 ||
      !to_int(std::string_view(reply->element[1]->str, reply->element[1]->len), port) || port < 1 ||
      port > 65535) {
    return absl::InternalError("malformed reply to SENTINEL get-master-addr-by-name");
  }
  Endpoint e;
  e.host = std::string(reply->element[0]->str, reply->element[0]->len);
  e.port = static_cast<int>(port);
  return e;
}

absl::StatusOr<std::int64_t> parse_config_epoch(const redisReply* reply) {
  if (reply != nullptr && reply->type == REDIS_REPLY_ERROR) {
    return absl::UnavailableError(fmt::format("SENTINEL MASTER: {}", std::string(reply->str, reply->len)));
  }
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) return absl::InternalError("malformed reply to SENTINEL MASTER");
  for (std::size_t i = 0; i + 1 < reply->elements; i += 2) {
    const redisReply* name = reply->element[i];
    const redisReply* value = reply->element[i + 1];
    if (name->type != REDIS_REPLY_STRING || std::string_view(name->str, name->len) != "config-epoch") continue;
    long long epoch = -1;
    if (value->type == REDIS_REPLY_STRING && to_int(std::string_view(value->str, value->len), epoch) && epoch >= 0) {
      return static_cast<std::int64_t>(epoch);
    }
    break;
  }
  return absl::InternalError("no config-epoch in the reply to SENTINEL MASTER");
}

bool role_is_master(const redisReply* reply) noexcept {
  return reply != nullptr && reply->type == REDIS_REPLY_ARRAY && reply->elements >= 1 &&
         (reply->element[0]->type == REDIS_REPLY_STRING || reply->element[0]->type == REDIS_REPLY_STATUS) &&
         std::string_view(reply->element[0]->str, reply->element[0]->len) == "master";
}

bool functions_refused(std::string_view text) noexcept {
  if (text.starts_with("ERR unknown command")) return true;
  if (!text.starts_with("NOPERM")) return false;
  // NOPERM names the command it refuses; one about a key or a channel is the call's own error.
  return text.find("'fcall'") != std::string_view::npos || text.find("'function") != std::string_view::npos;
}

NextStep next_step(bool error_reply, std::string_view text, bool script, bool cluster,
                   std::string_view server, bool fcall) {
  NextStep step;
  if (!error_reply) return step;  // kDone: the reply is the answer
  if (script && text.starts_with("NOSCRIPT")) {
    step.kind = NextStep::Kind::kResendWithEval;
    return step;
  }
  if (script && fcall && text.starts_with("ERR Function not found")) {
    step.kind = NextStep::Kind::kLoadLibrary;
    return step;
  }
  if (script && fcall && functions_refused(text)) {
    step.kind = NextStep::Kind::kWithoutFunctions;
    return step;
  }
  if (auto redirect = parse_redirect(text); redirect && cluster) {
    step.kind = redirect->ask ? NextStep::Kind::kAsk : NextStep::Kind::kMoved;
    step.redirect = *std::move(redirect);
    return step;
  }
  if (text.starts_with("READONLY")) {
    step.kind = NextStep::Kind::kReadOnly;
    step.error = absl::UnavailableError(fmt::format("redis {} is a replica now: {}", server, text));
    return step;
  }
  step.kind = NextStep::Kind::kFail;
  if (script && text.starts_with("floodgate: reservation ")) {  // decide.lua: the id is known
    step.error = absl::AlreadyExistsError(std::string(text.substr(11)));
    return step;
  }
  if (script && text.starts_with("floodgate: lease not outstanding")) {  // decide.lua: release, renew
    step.error = absl::NotFoundError(
        "the lease is not outstanding (never taken, released, or expired): nothing freed");
    return step;
  }
  step.error = absl::InternalError(fmt::format("redis {}: {}", server, text));
  return step;
}

}  // namespace floodgate::redis
