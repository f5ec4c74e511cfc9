#include "storage/redis/redis_storage.hpp"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cerrno>
#include <map>

#include <fmt/format.h>

#include "storage/redis/scripts_gen.hpp"

namespace floodgate::redis {

namespace {

constexpr int kMaxAttempts = 6;  // first try + NOSCRIPT / MOVED / ASK follow-ups
constexpr std::int64_t kRefreshEveryMicros = 100'000;

std::int64_t steady_micros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

// What a failed read or write on a connection means for the call.
absl::Status io_error(const Node& node, const redisContext* c, int saved_errno) {
  if (c->err == REDIS_ERR_IO && (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK)) {
    return absl::DeadlineExceededError(
        fmt::format("redis {}: no reply within the command timeout", node.endpoint().name()));
  }
  return absl::UnavailableError(fmt::format("redis {}: {}", node.endpoint().name(), c->errstr));
}

}  // namespace

struct RedisStorage::Call {
  std::vector<std::string> argv;  // EVALSHA sha numkeys keys… args…, or DEL keys…
  int slot = 0;
  const scripts::Script* script = nullptr;  // null: a plain command (DEL)
  Node* ask_target = nullptr;               // the next attempt goes there, after ASKING
  bool use_eval = false;                    // the server said NOSCRIPT: send the text
  bool done = false;
  absl::StatusOr<Decision> result{Decision{}};  // run() sets every call's result
  // The group script: its per-item decisions and whether it committed (result: the call's status).
  std::vector<Decision>* group = nullptr;
  std::size_t group_items = 0;
  bool committed = false;
};

RedisStorage::RedisStorage(RedisOptions options) : options_(std::move(options)) {
  for (const Endpoint& e : options_.seeds) node_named(e);
  if (options_.cluster) slots_.assign(kSlots, 0);
}

RedisStorage::~RedisStorage() = default;

absl::StatusOr<std::shared_ptr<RedisStorage>> RedisStorage::open(RedisOptions options) {
  auto storage = std::make_shared<RedisStorage>(std::move(options));
  if (storage->options_.cluster) {
    if (auto s = storage->refresh_topology(); !s.ok()) return s;
    return storage;
  }
  Node& node = *storage->nodes_.front();
  auto lease = node.acquire();
  if (!lease.ok()) return lease.status();
  ReplyPtr r(static_cast<redisReply*>(redisCommand(lease->get(), "PING")));
  if (r == nullptr) {
    lease->set_broken();
    return absl::UnavailableError(
        fmt::format("redis {}: {}", node.endpoint().name(), lease->get()->errstr));
  }
  if (r->type == REDIS_REPLY_ERROR) {
    return absl::UnavailableError(
        fmt::format("redis {}: {}", node.endpoint().name(), std::string(r->str, r->len)));
  }
  return storage;
}

std::vector<Storage::ServerState> RedisStorage::servers() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  std::vector<ServerState> out;
  out.reserve(nodes_.size());
  for (const auto& n : nodes_) {
    const Node::State s = n->state();
    out.push_back({n->endpoint().name(), s.breaker_open, s.reconnecting, s.connections});
  }
  return out;
}

Node& RedisStorage::node_named(const Endpoint& e) {
  const std::string name = e.name();
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    if (auto it = by_name_.find(name); it != by_name_.end()) return *it->second;
  }
  std::unique_lock<std::shared_mutex> lock(mu_);
  if (auto it = by_name_.find(name); it != by_name_.end()) return *it->second;
  nodes_.push_back(std::make_unique<Node>(e, options_));
  by_name_.emplace(name, nodes_.back().get());
  return *nodes_.back();
}

Node& RedisStorage::node_for_slot(int slot) {
  std::shared_lock<std::shared_mutex> lock(mu_);
  if (!options_.cluster) return *nodes_.front();
  const std::uint16_t i = slots_[static_cast<std::size_t>(slot)];
  return i == 0 ? *nodes_.front() : *nodes_[i - 1u];
}

absl::Status RedisStorage::refresh_topology() { return refresh_topology_locked_out(true); }

absl::Status RedisStorage::refresh_topology_locked_out(bool force) {
  if (!options_.cluster) return absl::OkStatus();
  std::unique_lock<std::mutex> refresh(refresh_mu_, std::try_to_lock);
  if (!refresh.owns_lock()) {
    if (!force) return absl::OkStatus();  // another thread is at it
    refresh.lock();
  }
  if (!force && steady_micros() - last_refresh_.load() < kRefreshEveryMicros) {
    return absl::OkStatus();
  }
  std::vector<Node*> candidates;
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    for (const auto& n : nodes_) candidates.push_back(n.get());
  }
  absl::Status last = absl::UnavailableError("redis cluster: no node to ask for the slot map");
  for (Node* node : candidates) {
    auto lease = node->acquire();
    if (!lease.ok()) {
      last = lease.status();
      continue;
    }
    ReplyPtr r(static_cast<redisReply*>(redisCommand(lease->get(), "CLUSTER SLOTS")));
    if (r == nullptr) {
      last = io_error(*node, lease->get(), errno);
      lease->set_broken();
      node->record(false);
      continue;
    }
    if (r->type == REDIS_REPLY_ERROR) {
      last = absl::UnavailableError(fmt::format("redis {}: CLUSTER SLOTS: {}",
                                                node->endpoint().name(),
                                                std::string(r->str, r->len)));
      continue;
    }
    auto ranges = parse_cluster_slots(r.get(), node->endpoint().host);
    if (!ranges.ok()) {
      last = ranges.status();
      continue;
    }
    std::vector<std::pair<const SlotRange*, Node*>> owners;
    for (const SlotRange& range : *ranges) owners.emplace_back(&range, &node_named(range.master));
    std::unique_lock<std::shared_mutex> lock(mu_);
    std::vector<std::uint16_t> slots(kSlots, 0);
    for (const auto& [range, owner] : owners) {
      std::uint16_t index = 0;
      for (std::size_t i = 0; i < nodes_.size(); ++i) {
        if (nodes_[i].get() == owner) index = static_cast<std::uint16_t>(i + 1);
      }
      std::fill(slots.begin() + range->first, slots.begin() + range->last + 1, index);
    }
    slots_ = std::move(slots);
    last_refresh_.store(steady_micros());
    return absl::OkStatus();
  }
  return last;
}

void RedisStorage::run(std::span<Call> calls) {
  struct Flight {
    Node* node;
    std::vector<Call*> calls;
  };
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    std::map<Node*, std::vector<Call*>> groups;
    for (Call& c : calls) {
      if (c.done) continue;
      Node* node = c.ask_target != nullptr ? c.ask_target : &node_for_slot(c.slot);
      groups[node].push_back(&c);
    }
    if (groups.empty()) return;

    // Write every server's commands first, then read: one round trip per server.
    std::vector<Flight> flights;
    std::vector<Lease> leases;
    flights.reserve(groups.size());
    leases.reserve(groups.size());
    bool refresh = false;  // a cluster's map is read again after MOVED or a failed node
    for (auto& [node, group] : groups) {
      auto lease = node->acquire();
      if (!lease.ok()) {
        for (Call* c : group) {
          c->result = lease.status();
          c->done = true;
        }
        refresh = true;
        continue;
      }
      redisContext* ctx = lease->get();
      std::vector<const char*> argv;
      std::vector<std::size_t> lens;
      for (Call* c : group) {
        if (c->ask_target != nullptr) redisAppendCommand(ctx, "ASKING");
        argv.clear();
        lens.clear();
        for (std::size_t i = 0; i < c->argv.size(); ++i) {
          std::string_view a = c->argv[i];
          if (c->script != nullptr && i == 0) a = c->use_eval ? "EVAL" : "EVALSHA";
          if (c->script != nullptr && i == 1) a = c->use_eval ? c->script->text : c->script->sha;
          argv.push_back(a.data());
          lens.push_back(a.size());
        }
        redisAppendCommandArgv(ctx, static_cast<int>(argv.size()), argv.data(), lens.data());
      }
      int done = 0;
      int rc = REDIS_OK;
      while (rc == REDIS_OK && done == 0) rc = redisBufferWrite(ctx, &done);
      if (rc != REDIS_OK) {
        const absl::Status s = io_error(*node, ctx, errno);
        lease->set_broken();
        node->record(false);
        for (Call* c : group) {
          c->result = s;
          c->done = true;
        }
        refresh = true;
        continue;
      }
      flights.push_back(Flight{node, std::move(group)});
      leases.push_back(*std::move(lease));
    }

    for (std::size_t f = 0; f < flights.size(); ++f) {
      Flight& flight = flights[f];
      redisContext* ctx = leases[f].get();
      absl::Status broken;
      for (Call* c : flight.calls) {
        if (!broken.ok()) {
          c->result = broken;
          c->done = true;
          continue;
        }
        const bool asked = c->ask_target != nullptr;
        c->ask_target = nullptr;
        void* raw = nullptr;
        if (asked && redisGetReply(ctx, &raw) == REDIS_OK) {
          freeReplyObject(raw);  // +OK to ASKING
          raw = nullptr;
        }
        if (redisGetReply(ctx, &raw) != REDIS_OK || raw == nullptr) {
          broken = io_error(*flight.node, ctx, errno);
          leases[f].set_broken();
          c->result = broken;
          c->done = true;
          continue;
        }
        ReplyPtr r(static_cast<redisReply*>(raw));
        if (r->type == REDIS_REPLY_ERROR) {
          const std::string_view text(r->str, r->len);
          if (c->script != nullptr && text.starts_with("NOSCRIPT")) {
            c->use_eval = true;
            noscript_.fetch_add(1, std::memory_order_relaxed);
            continue;
          }
          if (auto redirect = parse_redirect(text); redirect && options_.cluster) {
            redirects_.fetch_add(1, std::memory_order_relaxed);
            Node& target = node_named(redirect->target);
            if (redirect->ask) {
              c->ask_target = &target;
            } else {
              std::unique_lock<std::shared_mutex> lock(mu_);
              for (std::size_t i = 0; i < nodes_.size(); ++i) {
                if (nodes_[i].get() == &target) {
                  slots_[static_cast<std::size_t>(redirect->slot)] =
                      static_cast<std::uint16_t>(i + 1);
                }
              }
              refresh = true;
            }
            continue;
          }
          c->result = absl::InternalError(
              fmt::format("redis {}: {}", flight.node->endpoint().name(), text));
          c->done = true;
          continue;
        }
        if (c->group != nullptr) {
          const absl::Status s = parse_group(r.get(), c->group_items, *c->group, c->committed);
          c->result = s.ok() ? absl::StatusOr<Decision>(Decision{}) : absl::StatusOr<Decision>(s);
        } else {
          c->result = c->script != nullptr ? parse_decision(r.get()) : absl::StatusOr<Decision>(Decision{});
        }
        c->done = true;
      }
      flight.node->record(broken.ok());
      if (!broken.ok()) refresh = true;
    }
    leases.clear();  // back to the pools before a refresh borrows one
    if (refresh && options_.cluster) (void)refresh_topology_locked_out(false);
  }
  for (Call& c : calls) {
    if (!c.done) {
      c.result = absl::InternalError("redis: too many redirects (NOSCRIPT, MOVED, ASK)");
      c.done = true;
    }
  }
}

namespace {

absl::Status make_call(const RedisOptions& o, const Policy& policy, std::string_view key,
                       std::int64_t cost, Effect effect, Micros now, RedisStorage::Call& c) {
  if (auto s = check_policy(policy); !s.ok()) return s;
  const auto& script = scripts::kAll[static_cast<std::size_t>(script_for(policy))];
  c.script = &script;
  const std::size_t k = policy.limits().size();
  const std::uint64_t h = policy_hash(policy);
  c.argv.reserve(3 + k + 4 + k * 7);
  c.argv.emplace_back("EVALSHA");
  c.argv.emplace_back();  // the sha or the text, chosen when sent
  c.argv.push_back(std::to_string(k));
  for (std::size_t i = 0; i < k; ++i) c.argv.push_back(state_key(o.prefix, key, h, i));
  c.slot = key_slot(c.argv[3]);
  script_args(policy, cost, effect == Effect::kHit,
              o.client_clock ? std::optional<Micros>(now) : std::nullopt,
              o.client_clock ? o.client_ttl_slack.count() : 0, c.argv);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Decision> RedisStorage::apply(const Policy& policy, std::string_view key,
                                             std::int64_t cost, Effect effect, Micros now) {
  Call c;
  if (auto s = make_call(options_, policy, key, cost, effect, now, c); !s.ok()) return s;
  run(std::span<Call>(&c, 1));
  return std::move(c.result);
}

void RedisStorage::apply_batch(std::span<const BatchItem> items, Micros now,
                               std::span<absl::StatusOr<Decision>> out) {
  std::vector<Call> calls(items.size());
  std::vector<std::size_t> index;  // calls[j] answers items[index[j]]
  index.reserve(items.size());
  std::size_t n = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const BatchItem& it = items[i];
    if (auto s = make_call(options_, *it.policy, it.key, it.cost, it.effect, now, calls[n]);
        !s.ok()) {
      out[i] = s;
      calls[n] = Call{};
      continue;
    }
    index.push_back(i);
    ++n;
  }
  run(std::span<Call>(calls.data(), n));
  for (std::size_t j = 0; j < n; ++j) out[index[j]] = std::move(calls[j].result);
}

bool RedisStorage::apply_group(std::span<const BatchItem> items, Micros now,
                               std::span<absl::StatusOr<Decision>> out) {
  if (items.empty()) return true;
  Call c;
  c.script = &scripts::kGroup;
  c.argv = {"EVALSHA", "", ""};  // the sha or the text (chosen when sent), then the key count
  std::vector<std::string> args;
  args.push_back(options_.client_clock ? std::to_string(now) : std::string());
  args.push_back(std::to_string(items.size()));
  args.emplace_back();
  args.emplace_back();
  args.push_back(std::to_string(options_.client_clock ? options_.client_ttl_slack.count() : 0));
  for (const BatchItem& it : items) {
    // A policy the scripts cannot run exactly: the default reports it per item.
    if (!check_policy(*it.policy).ok()) return Storage::apply_group(items, now, out);
    const std::uint64_t h = policy_hash(*it.policy);
    const std::size_t k = it.policy->limits().size();
    for (std::size_t i = 0; i < k; ++i) c.argv.push_back(state_key(options_.prefix, it.key, h, i));
    args.push_back(std::to_string(static_cast<int>(script_for(*it.policy)) + 1));
    args.push_back(std::to_string(k));
    args.push_back(std::to_string(it.cost));
    args.push_back(it.effect == Effect::kHit ? "1" : "0");
    args.push_back(it.policy->shape() ? "1" : "0");
    args.push_back(it.optional ? "1" : "0");
    limit_args(*it.policy, it.cost, args);
  }
  const std::size_t keys = c.argv.size() - 3;
  c.argv[2] = std::to_string(keys);
  c.slot = key_slot(c.argv[3]);
  for (std::size_t i = 3; i < c.argv.size(); ++i) {
    for (std::size_t j = 3; j < i; ++j) {
      if (c.argv[i] == c.argv[j]) return Storage::apply_group(items, now, out);  // a key twice
    }
    if (options_.cluster && key_slot(c.argv[i]) != c.slot) return Storage::apply_group(items, now, out);
  }
  c.argv.insert(c.argv.end(), std::make_move_iterator(args.begin()), std::make_move_iterator(args.end()));
  std::vector<Decision> decisions;
  c.group = &decisions;
  c.group_items = items.size();
  run(std::span<Call>(&c, 1));
  if (!c.result.ok()) {
    for (auto& o : out) o = c.result.status();
    return false;
  }
  for (std::size_t i = 0; i < items.size(); ++i) out[i] = decisions[i];
  return c.committed;
}

absl::Status RedisStorage::clear(const Policy& policy, std::string_view key) {
  Call c;
  const std::uint64_t h = policy_hash(policy);
  c.argv.emplace_back("DEL");
  for (std::size_t i = 0; i < policy.limits().size(); ++i) {
    c.argv.push_back(state_key(options_.prefix, key, h, i));
  }
  c.slot = key_slot(c.argv[1]);
  run(std::span<Call>(&c, 1));
  return c.result.status();
}

}  // namespace floodgate::redis

// ---- open_storage's hook ------------------------------------------------------------------
namespace floodgate {

std::optional<absl::StatusOr<std::shared_ptr<Storage>>> open_registered_storage(
    const StorageUrl& url) {
  auto options = redis::parse_redis_url(url);
  if (!options) return std::nullopt;
  if (!options->ok()) return absl::StatusOr<std::shared_ptr<Storage>>(options->status());
  auto storage = redis::RedisStorage::open(**std::move(options));
  if (!storage.ok()) return absl::StatusOr<std::shared_ptr<Storage>>(storage.status());
  return absl::StatusOr<std::shared_ptr<Storage>>(std::shared_ptr<Storage>(*std::move(storage)));
}

}  // namespace floodgate
