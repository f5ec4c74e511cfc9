#include "storage/redis/redis_storage.hpp"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cerrno>
#include <map>

#include <fmt/format.h>

#include "storage/decide.hpp"
#include "storage/envoyproxy_layout.hpp"
#include "storage/redis/call.hpp"
#include "storage/redis/scripts_gen.hpp"
#include "storage/redis/tls.hpp"

namespace floodgate::redis {

namespace {

using detail::io_error;
using detail::ReplyPtr;

constexpr std::int64_t kRefreshEveryMicros = 100'000;

std::int64_t steady_micros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

namespace {
// rediss://: the TLS context, built once for every connection of the storage.
RedisOptions with_tls_context(RedisOptions o) {
  if (o.tls.enabled && !o.tls_context) {
    auto tls = detail::make_tls_context(o.tls);
    if (tls.ok()) {
      o.tls_context = *std::move(tls);
    } else {
      o.tls_context_error = std::string(tls.status().message());
    }
  }
  return o;
}

// The options of the connections to the sentinels: their credentials, db 0, two connections,
// the sentinels' timeout.
RedisOptions for_sentinels(const RedisOptions& o) {
  RedisOptions s = o;
  s.user = o.sentinel_user;
  s.password = o.sentinel_password;
  s.db = 0;
  s.timeout = o.sentinel_timeout;
  s.pool = 2;
  return s;
}
}  // namespace

RedisStorage::RedisStorage(RedisOptions options)
    : options_(with_tls_context(std::move(options))), sentinel_options_(for_sentinels(options_)) {
  functions_.store(options_.functions);
  if (sentinel()) {
    start_sentinels();
    return;
  }
  for (const Endpoint& e : options_.seeds) node_named(e);
  if (options_.cluster) slots_.assign(kSlots, 0);
}

RedisStorage::~RedisStorage() { stop_sentinels(); }

absl::StatusOr<std::shared_ptr<RedisStorage>> RedisStorage::open(RedisOptions options, StorageStart start) {
  auto storage = std::make_shared<RedisStorage>(std::move(options));
  if (!storage->options_.tls_context_error.empty()) {
    return absl::InvalidArgumentError(storage->options_.tls_context_error);
  }
  if (start == StorageStart::kFailFast) {
    if (auto s = storage->probe(); !s.ok()) return s;
  }
  return storage;
}

absl::Status RedisStorage::probe() {
  if (options_.cluster) return refresh_topology();
  if (sentinel()) {
    // The sentinels all down while the master works is not an outage.
    const absl::Status s = refresh_topology();
    Node* master = node_for_slot(0);
    return s.ok() || master == nullptr || !check_master(*master).ok() ? s : absl::OkStatus();
  }
  Node& node = *node_for_slot(0);
  auto conn = node.acquire();
  if (!conn.ok()) return conn.status();
  ReplyPtr r(conn->command({"PING"}));
  if (r == nullptr) {
    conn->set_broken();
    node.record(false);
    return absl::UnavailableError(fmt::format("redis {}: {}", node.endpoint().name(), conn->get()->errstr));
  }
  if (r->type == REDIS_REPLY_ERROR) {
    return absl::UnavailableError(fmt::format("redis {}: {}", node.endpoint().name(), std::string(r->str, r->len)));
  }
  node.record(true);
  return absl::OkStatus();
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

Node* RedisStorage::node_for_slot(int slot) {
  std::shared_lock<std::shared_mutex> lock(mu_);
  if (sentinel()) return master_;
  if (!options_.cluster) return nodes_.front().get();
  const std::uint16_t i = slots_[static_cast<std::size_t>(slot)];
  return i == 0 ? nodes_.front().get() : nodes_[i - 1u].get();
}

absl::Status RedisStorage::refresh_topology() { return refresh_topology_locked_out(true); }

namespace {

// CLUSTER SLOTS asked of `node`: its slot map, or why it gave none.
absl::StatusOr<std::vector<SlotRange>> cluster_slots(Node& node) {
  auto conn = node.acquire();
  if (!conn.ok()) return conn.status();
  ReplyPtr r(conn->command({"CLUSTER", "SLOTS"}));
  if (r == nullptr) {
    absl::Status error = io_error(node, conn->get(), errno);
    conn->set_broken();
    node.record(false);
    return error;
  }
  if (r->type == REDIS_REPLY_ERROR) {
    return absl::UnavailableError(fmt::format("redis {}: CLUSTER SLOTS: {}", node.endpoint().name(),
                                              std::string(r->str, r->len)));
  }
  return parse_cluster_slots(r.get(), node.endpoint().host);
}

}  // namespace

absl::Status RedisStorage::refresh_topology_locked_out(bool force) {
  if (sentinel()) {
    if (force) return resolve_master(true);
    wake_watcher();  // a decision does not wait for the sentinels
    return absl::OkStatus();
  }
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
    auto ranges = cluster_slots(*node);
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

namespace {

absl::Status make_call(const RedisOptions& o, const Policy& policy, std::string_view key,
                       std::int64_t cost, Effect effect, Micros now, Call& c,
                       std::string_view reservation = {}, Micros ttl = 0) {
  if (auto s = check_policy(policy); !s.ok()) return s;
  if (reserves(effect)) {
    if (o.envoyproxy_keys && envoyproxy_window(policy)) {
      return absl::UnimplementedError(
          "reservations are kept in floodgate's key layout: not with key_layout=envoyproxy");
    }
    const auto& script = scripts::kAll[static_cast<std::size_t>(script_for(policy))];
    c.script = &script;
    const std::size_t k = policy.limits().size();
    c.argv.emplace_back("EVALSHA");
    c.argv.emplace_back();
    c.argv.push_back(std::to_string(k + 1));
    const std::string id = key_id(policy.state_id());
    for (std::size_t i = 0; i < k; ++i) c.argv.push_back(state_key(o.prefix, key, id, i));
    c.argv.push_back(reservation_key(o.prefix, key, id, reservation));
    c.slot = call_slot(o, c.argv[3]);
    script_args(policy, cost, false, o.client_clock ? std::optional<Micros>(now) : std::nullopt,
                o.client_clock ? o.client_ttl_slack.count() : 0, c.argv, now);
    const char* mode = effect == Effect::kReserve  ? "r"
                       : effect == Effect::kSettle ? "s"
                       : effect == Effect::kRenew  ? "n"
                                                   : "e";
    if (ttl == 0) mode = "k";  // Storage::known
    c.argv[3 + k + 1 + 2] = mode;  // ARGV[3]
    if (floodgate::detail::leases(policy)) {
      c.argv[3 + k + 1 + 3] = "l";  // ARGV[4]: leases; they live for their limit's period
      ttl = floodgate::detail::lease_ttl(policy) + 1;  // counts until its time to live ends, inclusive
    }
    // In µs: the record's expiry on the decision's clock (decide.lua's reservation records).
    c.argv.push_back(std::to_string(ttl == 0 ? kDefaultReservationTtl : ttl));
    return absl::OkStatus();
  }
  if (detail::envoyproxy_call(o, policy, key, cost, effect, now, c)) return absl::OkStatus();
  const auto& script = scripts::kAll[static_cast<std::size_t>(script_for(policy))];
  c.script = &script;
  const std::size_t k = policy.limits().size();
  c.limit = policy.limits().front().amount;
  c.period = policy.limits().front().period;
  c.argv.reserve(3 + k + 4 + k * 7);
  c.argv.emplace_back("EVALSHA");
  c.argv.emplace_back();  // the sha or the text, chosen when sent
  c.argv.push_back(std::to_string(k));
  const std::string id = key_id(policy.state_id());
  for (std::size_t i = 0; i < k; ++i) c.argv.push_back(state_key(o.prefix, key, id, i));
  c.slot = call_slot(o, c.argv[3]);
  script_args(policy, cost, effect == Effect::kHit,
              o.client_clock ? std::optional<Micros>(now) : std::nullopt,
              o.client_clock ? o.client_ttl_slack.count() : 0, c.argv, now);
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

absl::StatusOr<Decision> RedisStorage::reserve(const Policy& policy, std::string_view key, std::int64_t cost,
                                               std::string_view id, Micros ttl, Effect effect, Micros now) {
  Call c;
  if (auto s = make_call(options_, policy, key, cost, effect, now, c, id, ttl); !s.ok()) return s;
  run(std::span<Call>(&c, 1));
  return std::move(c.result);
}

absl::StatusOr<Decision> RedisStorage::settle(const Policy& policy, std::string_view key, std::string_view id,
                                              std::int64_t actual, Micros now) {
  Call c;
  if (auto s = make_call(options_, policy, key, actual, Effect::kSettle, now, c, id, kDefaultReservationTtl);
      !s.ok()) {
    return s;
  }
  run(std::span<Call>(&c, 1));
  return std::move(c.result);
}

absl::StatusOr<Decision> RedisStorage::renew(const Policy& policy, std::string_view key, std::string_view id,
                                             Micros now) {
  if (!floodgate::detail::leases(policy)) return floodgate::detail::renew_needs_leases(policy);
  Call c;
  if (auto s = make_call(options_, policy, key, 0, Effect::kRenew, now, c, id, kDefaultReservationTtl); !s.ok()) {
    return s;
  }
  run(std::span<Call>(&c, 1));
  return std::move(c.result);
}

absl::StatusOr<bool> RedisStorage::known(const Policy& policy, std::string_view key, std::string_view id,
                                         Micros now) {
  Call c;
  if (auto s = make_call(options_, policy, key, 0, Effect::kSettle, now, c, id, 0); !s.ok()) return s;
  run(std::span<Call>(&c, 1));
  if (!c.result.ok()) return c.result.status();
  return c.result->allowed;  // the script's 'k' mode answers whether the record exists
}

void RedisStorage::apply_batch(std::span<const BatchItem> items, Micros now,
                               std::span<absl::StatusOr<Decision>> out) {
  std::vector<Call> calls(items.size());
  std::vector<std::size_t> index;  // calls[j] answers items[index[j]]
  index.reserve(items.size());
  std::size_t n = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const BatchItem& it = items[i];
    if (auto s = make_call(options_, *it.policy, it.key, it.cost, it.effect, now, calls[n], it.reservation,
                           it.effect == Effect::kSettle || it.effect == Effect::kRenew ? kDefaultReservationTtl
                                                                                       : it.ttl);
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
  // The group script knows no reservations: such a group is tested, then charged (two calls).
  if (std::any_of(items.begin(), items.end(), [](const BatchItem& it) { return reserves(it.effect); })) {
    return Storage::apply_group(items, now, out);
  }
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
    // envoyproxy's keys (key_layout=envoyproxy) are not in the group script: tested, then charged,
    // key by key (envoyproxy charges each descriptor on its own anyway).
    if (!check_policy(*it.policy).ok() || (options_.envoyproxy_keys && envoyproxy_window(*it.policy))) {
      return Storage::apply_group(items, now, out);
    }
    const std::size_t k = it.policy->limits().size();
    const std::string id = key_id(it.policy->state_id());
    for (std::size_t i = 0; i < k; ++i) c.argv.push_back(state_key(options_.prefix, it.key, id, i));
    args.push_back(std::to_string(static_cast<int>(script_for(*it.policy)) + 1));
    args.push_back(std::to_string(k));
    args.push_back(std::to_string(it.cost));
    args.push_back(it.effect == Effect::kHit ? "1" : "0");
    args.push_back(it.policy->shape() ? "1" : "0");
    args.push_back(it.optional ? "1" : "0");
    limit_args(*it.policy, it.cost, now, args);
  }
  const std::size_t keys = c.argv.size() - 3;
  c.argv[2] = std::to_string(keys);
  c.slot = call_slot(options_, c.argv[3]);
  for (std::size_t i = 3; i < c.argv.size(); ++i) {
    for (std::size_t j = 3; j < i; ++j) {
      if (c.argv[i] == c.argv[j]) return Storage::apply_group(items, now, out);  // a key twice
    }
    if (call_slot(options_, c.argv[i]) != c.slot) return Storage::apply_group(items, now, out);
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
  c.argv.emplace_back("DEL");
  const std::string id = key_id(policy.state_id());
  for (std::size_t i = 0; i < policy.limits().size(); ++i) {
    c.argv.push_back(state_key(options_.prefix, key, id, i));
  }
  c.slot = call_slot(options_, c.argv[1]);
  run(std::span<Call>(&c, 1));
  return c.result.status();
}

}  // namespace floodgate::redis

// ---- open_storage's hook ------------------------------------------------------------------
namespace floodgate {

std::optional<absl::StatusOr<std::shared_ptr<Storage>>> open_registered_storage(
    const StorageUrl& url, StorageStart start) {
  auto options = redis::parse_redis_url(url);
  if (!options) return std::nullopt;
  if (!options->ok()) return absl::StatusOr<std::shared_ptr<Storage>>(options->status());
  auto storage = redis::RedisStorage::open(**std::move(options), start);
  if (!storage.ok()) return absl::StatusOr<std::shared_ptr<Storage>>(storage.status());
  return absl::StatusOr<std::shared_ptr<Storage>>(std::shared_ptr<Storage>(*std::move(storage)));
}

}  // namespace floodgate
