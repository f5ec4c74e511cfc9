#include "storage/memcached/memcached_storage.hpp"

#include <cctype>
#include <cstring>

#include <libmemcached/memcached.h>
#include <libmemcachedutil-1.0/pool.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <ctime>
#include <optional>
#include <span>

#include <fmt/format.h>

#include "absl/container/flat_hash_map.h"
#include "storage/decide.hpp"

namespace floodgate::memcached {

namespace {

// Whether a return code means the server (or the way to it) failed, as opposed to an answer.
bool is_connection_failure(memcached_return_t rc) {
  switch (rc) {
    case MEMCACHED_CONNECTION_FAILURE:
    case MEMCACHED_CONNECTION_SOCKET_CREATE_FAILURE:
    case MEMCACHED_HOST_LOOKUP_FAILURE:
    case MEMCACHED_SERVER_MARKED_DEAD:
    case MEMCACHED_SERVER_TEMPORARILY_DISABLED:
    case MEMCACHED_NO_SERVERS:
      return true;
    default:
      return false;
  }
}

bool is_server_failure(memcached_return_t rc) {
  switch (rc) {
    case MEMCACHED_TIMEOUT:
    case MEMCACHED_ERRNO:
    case MEMCACHED_WRITE_FAILURE:
    case MEMCACHED_READ_FAILURE:
    case MEMCACHED_UNKNOWN_READ_FAILURE:
    case MEMCACHED_PROTOCOL_ERROR:
    case MEMCACHED_CONNECTION_BIND_FAILURE:
    case MEMCACHED_PARTIAL_READ:
    case MEMCACHED_SOME_ERRORS:
      return true;
    default:
      return is_connection_failure(rc);
  }
}

}  // namespace

// libmemcached's name of `rc` in lower case, with the system's reason for a connection failure
// ("connection failure: Connection refused"; another error's errno may be an older one's). Its
// last-error message carries a pointer and a source location, which no user needs.
std::string error_text(const memcached_st* m, memcached_return_t rc) {
  std::string t = memcached_strerror(m, rc);
  for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (const int e = memcached_last_error_errno(m); e != 0 && is_connection_failure(rc)) {
    t += fmt::format(": {}", std::strerror(e));
  }
  return t;
}

std::int64_t wall_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}


MemcachedStorage::MemcachedStorage(MemcachedOptions options) : options_(std::move(options)) {
  master_ = memcached_create(nullptr);
  for (const Server& s : options_.servers) {
    memcached_server_add(master_, s.host.c_str(), static_cast<in_port_t>(s.port));
    health_.push_back(std::make_unique<Health>(
        options_, std::hash<std::string>{}(s.name()) ^ reinterpret_cast<std::uintptr_t>(this)));
  }
  const auto set = [&](memcached_behavior_t b, std::uint64_t v) {
    memcached_behavior_set(master_, b, v);
  };
  set(MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 1);
  set(MEMCACHED_BEHAVIOR_SUPPORT_CAS, 1);
  set(MEMCACHED_BEHAVIOR_KETAMA, 1);  // consistent hashing, MD5 points: other clients agree
  set(MEMCACHED_BEHAVIOR_TCP_NODELAY, 1);
  set(MEMCACHED_BEHAVIOR_NO_BLOCK, 1);
  set(MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, static_cast<std::uint64_t>(options_.connect_timeout.count()));
  set(MEMCACHED_BEHAVIOR_POLL_TIMEOUT, static_cast<std::uint64_t>(options_.timeout.count()));
  set(MEMCACHED_BEHAVIOR_SND_TIMEOUT, static_cast<std::uint64_t>(options_.timeout.count()) * 1000);
  set(MEMCACHED_BEHAVIOR_RCV_TIMEOUT, static_cast<std::uint64_t>(options_.timeout.count()) * 1000);
  // Our breaker decides when a failed server is tried again; libmemcached must neither wait
  // seconds on its own nor move a failed server's keys to another (their state is not there).
  set(MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, 0);
  set(MEMCACHED_BEHAVIOR_DEAD_TIMEOUT, 0);
  set(MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT, 0);
  set(MEMCACHED_BEHAVIOR_REMOVE_FAILED_SERVERS, 0);
  set(MEMCACHED_BEHAVIOR_AUTO_EJECT_HOSTS, 0);
  pool_ = memcached_pool_create(master_, 1, static_cast<std::uint32_t>(options_.pool));
}

MemcachedStorage::~MemcachedStorage() {
  if (pool_ != nullptr) memcached_pool_destroy(pool_);
  memcached_free(master_);
}

absl::StatusOr<std::shared_ptr<MemcachedStorage>> MemcachedStorage::open(MemcachedOptions options,
                                                                       StorageStart start) {
  auto storage = std::make_shared<MemcachedStorage>(std::move(options));
  if (storage->pool_ == nullptr) return absl::InternalError("memcached: cannot create the pool");
  if (start == StorageStart::kFailFast) {
    if (auto s = storage->probe(); !s.ok()) return s;
  }
  return storage;
}

absl::Status MemcachedStorage::probe() {
  auto conn = acquire();
  if (!conn.ok()) return conn.status();
  // memcached_stat asks every server: each must answer.
  memcached_return_t rc = MEMCACHED_SUCCESS;
  memcached_stat_st* stat = memcached_stat(conn->get(), nullptr, &rc);
  if (stat != nullptr) memcached_stat_free(conn->get(), stat);
  if (rc == MEMCACHED_SUCCESS) return absl::OkStatus();
  std::string names;
  for (const Server& s : options_.servers) names += (names.empty() ? "" : ",") + s.name();
  return absl::UnavailableError(fmt::format("memcached {}: no answer ({})", names, error_text(conn->get(), rc)));
}

std::vector<Storage::ServerState> MemcachedStorage::servers() const {
  std::vector<ServerState> out;
  const auto now = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < health_.size(); ++i) {
    std::lock_guard<std::mutex> lock(health_[i]->mu);
    out.push_back({options_.servers[i].name(), health_[i]->breaker.open(now),
                   health_[i]->disconnected, health_[i]->disconnected ? 0 : options_.pool});
  }
  return out;
}

absl::StatusOr<MemcachedStorage::Connection> MemcachedStorage::acquire() {
  const auto ms = options_.timeout.count();
  timespec wait{static_cast<time_t>(ms / 1000), static_cast<long>((ms % 1000) * 1000000)};
  memcached_return_t rc = MEMCACHED_SUCCESS;
  memcached_st* m = memcached_pool_fetch(pool_, &wait, &rc);
  if (m == nullptr) {
    return absl::DeadlineExceededError(fmt::format(
        "memcached: no free client handle within the timeout (pool={})", options_.pool));
  }
  return Connection(pool_, m);
}

std::uint32_t MemcachedStorage::server_of(memcached_st* m, const std::string& key) const {
  const std::uint32_t i = memcached_generate_hash(m, key.data(), key.size());
  return i < health_.size() ? i : 0;
}

absl::Status MemcachedStorage::admit(std::uint32_t server) {
  Health& h = *health_[server];
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(h.mu);
  if (!h.breaker.allows_call(now)) {
    return absl::UnavailableError(fmt::format(
        "memcached {}: circuit breaker open after repeated failures", options_.servers[server].name()));
  }
  if (h.disconnected && !h.breaker.allows_connect(now)) {
    return absl::UnavailableError(fmt::format("memcached {}: waiting to reconnect (backoff)",
                                              options_.servers[server].name()));
  }
  return absl::OkStatus();
}

// Feeds the breaker and turns a failure into a status (OK for answers, such as NOTFOUND).
absl::Status MemcachedStorage::record(memcached_st* m, std::uint32_t server, int code) {
  const auto rc = static_cast<memcached_return_t>(code);
  Health& h = *health_[server];
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(h.mu);
  if (!is_server_failure(rc)) {
    h.breaker.on_success();
    if (h.disconnected) h.breaker.on_connect_success();
    h.disconnected = false;
    return absl::OkStatus();
  }
  if (is_connection_failure(rc)) {
    h.breaker.on_connect_failure(now);
    h.disconnected = true;
  } else {
    h.breaker.on_failure(now);
  }
  const std::string message = fmt::format("memcached {}: {}", options_.servers[server].name(),
                                          error_text(m, rc));
  if (rc == MEMCACHED_TIMEOUT) return absl::DeadlineExceededError(message);
  return absl::UnavailableError(message);
}

absl::StatusOr<MemcachedStorage::Got> MemcachedStorage::get(memcached_st* m, std::uint32_t server,
                                                            const std::string& key) {
  const char* keys[1] = {key.data()};
  const std::size_t lens[1] = {key.size()};
  memcached_return_t rc = memcached_mget(m, keys, lens, 1);
  Got g;
  if (rc == MEMCACHED_SUCCESS) {
    memcached_result_st result;
    memcached_result_create(m, &result);
    while (memcached_fetch_result(m, &result, &rc) != nullptr) {
      g.found = true;
      g.value.assign(memcached_result_value(&result), memcached_result_length(&result));
      g.cas = memcached_result_cas(&result);
      g.flags = memcached_result_flags(&result);
    }
    memcached_result_free(&result);
    if (rc == MEMCACHED_END || rc == MEMCACHED_NOTFOUND) rc = MEMCACHED_SUCCESS;
  }
  if (auto s = record(m, server, rc); !s.ok()) return s;
  if (rc != MEMCACHED_SUCCESS) {
    return absl::InternalError(fmt::format("memcached {}: gets: {}",
                                           options_.servers[server].name(),
                                           error_text(m, rc)));
  }
  return g;
}

template <class A>
absl::StatusOr<Decision> MemcachedStorage::decide(memcached_st* m, const Policy& policy,
                                                  const std::string& key, std::int64_t cost,
                                                  Effect effect, Micros now, Got* prefetched) {
  return update<A>(m, policy, key, now, prefetched, [&](typename A::State* st) {
    const Decision d = detail::decide<A>(st, policy.limits(), policy.shape(), cost, effect, now);
    return std::pair<Decision, bool>{d, effect == Effect::kHit && d.allowed && cost > 0};
  });
}

absl::StatusOr<Decision> MemcachedStorage::apply(const Policy& policy, std::string_view key,
                                                 std::int64_t cost, Effect effect, Micros now) {
  if (auto s = check_policy(policy, options_.item_size_max); !s.ok()) return s;
  auto conn = acquire();
  if (!conn.ok()) return conn.status();
  const std::string k = storage_key(options_.prefix, policy, key);
  return detail::with_algorithm(policy, [&](auto a) {
    return decide<decltype(a)>(conn->get(), policy, k, cost, effect, now, nullptr);
  });
}

namespace {

// One multi-get of `keys` into `read` (whose entries they are). Any failure (some server did not
// answer) answers false and leaves `read` unused: a key missing from the replies would look
// absent, so every item then reads its own value.
bool multi_get(memcached_st* m, const std::vector<const char*>& keys, const std::vector<std::size_t>& lens,
               absl::flat_hash_map<std::string, MemcachedStorage::Got>& read) {
  memcached_return_t rc = memcached_mget(m, keys.data(), lens.data(), keys.size());
  if (rc != MEMCACHED_SUCCESS) return false;
  memcached_result_st result;
  memcached_result_create(m, &result);
  while (memcached_fetch_result(m, &result, &rc) != nullptr) {
    const absl::string_view k(memcached_result_key_value(&result), memcached_result_key_length(&result));
    if (auto it = read.find(k); it != read.end()) {
      it->second.found = true;
      it->second.value.assign(memcached_result_value(&result), memcached_result_length(&result));
      it->second.cas = memcached_result_cas(&result);
      it->second.flags = memcached_result_flags(&result);
    }
  }
  memcached_result_free(&result);
  return rc == MEMCACHED_END || rc == MEMCACHED_NOTFOUND || rc == MEMCACHED_SUCCESS;
}

}  // namespace

void MemcachedStorage::apply_batch(std::span<const BatchItem> items, Micros now,
                                   std::span<absl::StatusOr<Decision>> out) {
  if (std::any_of(items.begin(), items.end(), [](const BatchItem& it) { return reserves(it.effect); })) {
    Storage::apply_batch(items, now, out);  // one by one, each with its own client
    return;
  }
  auto conn = acquire();
  if (!conn.ok()) {
    for (auto& o : out) o = conn.status();
    return;
  }
  memcached_st* m = conn->get();
  std::vector<std::string> keys(items.size());
  std::vector<const char*> key_ptrs;
  std::vector<std::size_t> key_lens;
  absl::flat_hash_map<std::string, Got> read;  // distinct keys to read, then their values
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (auto s = check_policy(*items[i].policy, options_.item_size_max); !s.ok()) {
      out[i] = s;
      continue;
    }
    keys[i] = storage_key(options_.prefix, *items[i].policy, items[i].key);
    if (!admit(server_of(m, keys[i])).ok()) continue;  // decide() reports it
    if (read.try_emplace(keys[i]).second) {
      key_ptrs.push_back(keys[i].data());
      key_lens.push_back(keys[i].size());
    }
  }
  const bool prefetched = !key_ptrs.empty() && multi_get(m, key_ptrs, key_lens, read);
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (keys[i].empty()) continue;  // refused above
    Got* got = nullptr;
    auto it = prefetched ? read.find(keys[i]) : read.end();
    if (it != read.end()) got = &it->second;
    const BatchItem& item = *(items.begin() + static_cast<std::ptrdiff_t>(i));
    out[i] = detail::with_algorithm(*item.policy, [&](auto a) {
      return decide<decltype(a)>(m, *item.policy, keys[i], item.cost, item.effect, now, got);
    });
    if (it != read.end()) read.erase(it);  // used (and maybe written): a later item reads again
  }
}

absl::Status MemcachedStorage::clear(const Policy& policy, std::string_view key) {
  auto conn = acquire();
  if (!conn.ok()) return conn.status();
  const std::string k = storage_key(options_.prefix, policy, key);
  const std::uint32_t server = server_of(conn->get(), k);
  if (auto s = admit(server); !s.ok()) return s;
  const memcached_return_t rc = memcached_delete(conn->get(), k.data(), k.size(), 0);
  if (auto s = record(conn->get(), server, rc); !s.ok()) return s;
  if (rc != MEMCACHED_SUCCESS && rc != MEMCACHED_NOTFOUND) {
    return absl::InternalError(fmt::format("memcached {}: delete: {}",
                                           options_.servers[server].name(),
                                           error_text(conn->get(), rc)));
  }
  return absl::OkStatus();
}

}  // namespace floodgate::memcached

// ---- open_storage's hook ------------------------------------------------------------------
namespace floodgate {

std::optional<absl::StatusOr<std::shared_ptr<Storage>>> open_memcached_storage(
    const StorageUrl& url, StorageStart start) {
  auto options = memcached::parse_memcached_url(url);
  if (!options) return std::nullopt;
  if (!options->ok()) return absl::StatusOr<std::shared_ptr<Storage>>(options->status());
  auto storage = memcached::MemcachedStorage::open(**std::move(options), start);
  if (!storage.ok()) return absl::StatusOr<std::shared_ptr<Storage>>(storage.status());
  return absl::StatusOr<std::shared_ptr<Storage>>(std::shared_ptr<Storage>(*std::move(storage)));
}

std::optional<absl::StatusOr<PolicyCheck>> check_memcached_storage(const StorageUrl& url) {
  auto options = memcached::parse_memcached_url(url);
  if (!options) return std::nullopt;
  if (!options->ok()) return absl::StatusOr<PolicyCheck>(options->status());
  const std::size_t item_size_max = (*options)->item_size_max;
  return absl::StatusOr<PolicyCheck>(PolicyCheck(
      [item_size_max](const Policy& policy) { return memcached::check_policy(policy, item_size_max); }));
}

}  // namespace floodgate
