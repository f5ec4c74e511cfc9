// The Redis storage's write/read loop: every pending call goes to its server, the replies are read
// in order, and next_step (replies.cpp) says what each one means.
#include <map>

#include "storage/redis/call.hpp"
#include "storage/redis/redis_storage.hpp"

namespace floodgate::redis {

namespace {
constexpr int kMaxAttempts = 6;  // first try + NOSCRIPT / library load / MOVED / ASK follow-ups
// A flight is written in chunks of this many calls: Redis runs the first chunk while the rest is
// formatted, and its replies are read while it runs the later ones (a flight written whole leaves
// Redis idle while the client formats it and reads the replies).
constexpr std::size_t kFlushEvery = 16;
using detail::io_error;
using detail::ReplyPtr;
using detail::parse_ints;
}  // namespace

// One server's share of an attempt: its calls, written on one pooled connection.
struct RedisStorage::Flight {
  Node* node;
  std::vector<Call*> calls;
  PooledConnection conn;
};

namespace {
void finish_all(const std::vector<Call*>& calls, const absl::Status& s);

// The command and its first argument for a script call, as it goes now.
std::string_view script_word(const Call& c, std::size_t i) {
  if (c.fcall) return i == 0 ? std::string_view("FCALL") : c.script->function;
  if (c.via == Call::Via::kEval) return i == 0 ? std::string_view("EVAL") : c.script->text;
  return i == 0 ? std::string_view("EVALSHA") : c.script->sha;
}

void append_library_load(PooledConnection& conn) {
  static constexpr std::string_view kWords[] = {"FUNCTION", "LOAD", "REPLACE", scripts::kLibraryText};
  const char* argv[4];
  std::size_t lens[4];
  for (std::size_t i = 0; i < 4; ++i) argv[i] = kWords[i].data(), lens[i] = kWords[i].size();
  conn.append(4, argv, lens);
}
}  // namespace

// Every call not done yet, by the server it goes to now (its ASK target, else its slot's owner).
std::map<Node*, std::vector<Call*>> RedisStorage::by_node(std::span<Call> calls) {
  std::map<Node*, std::vector<Call*>> groups;
  for (Call& c : calls) {
    if (!c.done) groups[c.ask_target != nullptr ? c.ask_target : node_for_slot(c.slot)].push_back(&c);
  }
  return groups;
}

// Writes a server's calls (ASKING first where asked); nullopt when it failed (calls finished).
std::optional<RedisStorage::Flight> RedisStorage::send(Node& node, std::vector<Call*> calls) {
  auto conn = node.acquire();
  if (!conn.ok()) {
    finish_all(calls, conn.status());
    return std::nullopt;
  }
  redisContext* ctx = conn->get();
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  const char* asking = "ASKING";
  const std::size_t asking_len = 6;
  const bool functions = functions_.load(std::memory_order_relaxed);
  bool loading = false;  // one FUNCTION LOAD per flight, before the first call that needs it
  std::size_t appended = 0;
  for (Call* c : calls) {
    c->fcall = c->script != nullptr && c->via == Call::Via::kAuto && functions;
    c->load_library = c->load_library && c->fcall && !loading;
    loading = loading || c->load_library;
    // The library first: ASKING applies to the one command after it.
    if (c->load_library) append_library_load(*conn);
    if (c->ask_target != nullptr) conn->append(1, &asking, &asking_len);
    argv.clear();
    lens.clear();
    for (std::size_t i = 0; i < c->argv.size(); ++i) {
      std::string_view a = c->argv[i];
      if (c->script != nullptr && i < 2) a = script_word(*c, i);
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    conn->append(static_cast<int>(argv.size()), argv.data(), lens.data());
    if (++appended % kFlushEvery == 0 && appended < calls.size() && conn->flush() != REDIS_OK) break;
  }
  if (ctx->err != 0 || conn->flush() != REDIS_OK) {
    conn->set_broken();
    node.record(false);
    finish_all(calls, io_error(node, ctx, errno));
    return std::nullopt;
  }
  return Flight{&node, std::move(calls), *std::move(conn)};
}

// Reads a flight's replies in order and acts on each (next_step). Returns whether the cluster's
// slot map should be read again (MOVED, or a broken connection).
bool RedisStorage::receive(Flight& flight) {
  redisContext* ctx = flight.conn.get();
  PooledConnection& conn = flight.conn;
  absl::Status broken;
  bool refresh = false;
  for (Call* c : flight.calls) {
    if (!broken.ok()) {
      finish_all({c}, broken);
      continue;
    }
    void* raw = nullptr;
    if (c->load_library && conn.reply(&raw) == REDIS_OK && raw != nullptr) library_loaded(*c, raw);
    raw = nullptr;
    const bool asked = c->ask_target != nullptr;
    c->ask_target = nullptr;
    if (asked && conn.reply(&raw) == REDIS_OK) freeReplyObject(raw);  // +OK to ASKING
    raw = nullptr;
    if (conn.reply(&raw) != REDIS_OK || raw == nullptr) {
      broken = io_error(*flight.node, ctx, errno);
      flight.conn.set_broken();
      finish_all({c}, broken);
      continue;
    }
    ReplyPtr r(static_cast<redisReply*>(raw));
    const bool error_reply = r->type == REDIS_REPLY_ERROR;
    const NextStep step = next_step(error_reply, error_reply ? std::string_view(r->str, r->len) : "",
                                    c->script != nullptr, options_.cluster, flight.node->endpoint().name(),
                                    c->fcall);
    refresh = follow(*c, step, r.get()) || refresh;
  }
  flight.node->record(broken.ok());
  return refresh || !broken.ok();
}

// Applies what a reply says to its call; returns whether the topology changed (MOVED, READONLY).
bool RedisStorage::follow(Call& c, const NextStep& step, const redisReply* reply) {
  switch (step.kind) {
    case NextStep::Kind::kResendWithEval:
      c.via = Call::Via::kEval;
      noscript_.fetch_add(1, std::memory_order_relaxed);
      return false;
    case NextStep::Kind::kLoadLibrary:
      // Load it with the next attempt, unless a load just failed (library_loaded chose EVALSHA).
      c.load_library = c.via == Call::Via::kAuto;
      return false;
    case NextStep::Kind::kWithoutFunctions:
      functions_.store(false, std::memory_order_relaxed);
      c.via = Call::Via::kEvalsha;
      return false;
    case NextStep::Kind::kAsk:
      redirects_.fetch_add(1, std::memory_order_relaxed);
      c.ask_target = &node_named(step.redirect.target);
      return false;
    case NextStep::Kind::kMoved:
      redirects_.fetch_add(1, std::memory_order_relaxed);
      remap_slot(step.redirect.slot, node_named(step.redirect.target));
      return true;
    case NextStep::Kind::kFail:
      c.result = step.error;
      break;
    case NextStep::Kind::kReadOnly:  // a replica now: fails, and the master is asked for again
      c.result = step.error;
      c.done = true;
      return true;
    case NextStep::Kind::kDone:
      if (c.ints != nullptr) {
        const absl::Status s = parse_ints(reply, *c.ints);
        c.result = s.ok() ? absl::StatusOr<Decision>(Decision{}) : absl::StatusOr<Decision>(s);
      } else if (c.group != nullptr) {
        const absl::Status s = parse_group(reply, c.group_items, *c.group, c.committed);
        c.result = s.ok() ? absl::StatusOr<Decision>(Decision{}) : absl::StatusOr<Decision>(s);
      } else {
        c.result = c.script != nullptr ? parse_decision(reply, c.limit, c.period) : absl::StatusOr<Decision>(Decision{});
      }
      break;
  }
  c.done = true;
  return false;
}

// The reply to FUNCTION LOAD before a call: counted when it worked; a refusal of the command
// (Redis 6, an ACL) turns the library off for the storage, any other error (out of memory…)
// sends this call with EVALSHA.
void RedisStorage::library_loaded(Call& c, void* raw) {
  ReplyPtr r(static_cast<redisReply*>(raw));
  c.load_library = false;
  if (r->type != REDIS_REPLY_ERROR) {
    library_loads_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (functions_refused(std::string_view(r->str, r->len))) functions_.store(false, std::memory_order_relaxed);
  c.via = Call::Via::kEvalsha;
}

void RedisStorage::remap_slot(int slot, const Node& target) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].get() == &target) slots_[static_cast<std::size_t>(slot)] = static_cast<std::uint16_t>(i + 1);
  }
}

// Each attempt writes every pending call to its server, then reads the replies: one round trip
// per server. NOSCRIPT, MOVED and ASK leave a call pending for the next attempt.
void RedisStorage::run(std::span<Call> calls) {
  if (sentinel() && node_for_slot(0) == nullptr) wake_watcher();  // these calls fail: no master yet
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    auto groups = by_node(calls);
    if (groups.empty()) return;
    std::vector<Flight> flights;
    flights.reserve(groups.size());
    // A cluster's map is read again (Sentinel: the master asked for) after MOVED, READONLY or a
    // failed node.
    bool refresh = false;
    for (auto& [node, group] : groups) {
      if (node == nullptr) {  // Sentinel: no master found yet
        finish_all(group, no_master());
        refresh = true;
        continue;
      }
      auto flight = send(*node, std::move(group));
      if (flight) {
        flights.push_back(*std::move(flight));
      } else {
        refresh = true;
      }
    }
    for (Flight& f : flights) refresh = receive(f) || refresh;
    flights.clear();  // back to the pools before a refresh borrows one
    if (refresh) (void)refresh_topology_locked_out(false);
  }
  std::vector<Call*> left;
  for (Call& c : calls) {
    if (!c.done) left.push_back(&c);
  }
  finish_all(left, absl::InternalError("redis: too many redirects (NOSCRIPT, library load, MOVED, ASK)"));
}

namespace {
void finish_all(const std::vector<Call*>& calls, const absl::Status& s) {
  for (Call* c : calls) {
    c->result = s;
    c->done = true;
  }
}
}  // namespace

}  // namespace floodgate::redis
