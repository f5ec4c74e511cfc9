#include "storage/redis/node.hpp"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <openssl/ssl.h>

#include <fmt/format.h>

#include "storage/redis/tls.hpp"

namespace floodgate::redis {

namespace {
timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<decltype(tv.tv_sec)>(ms.count() / 1000);
  tv.tv_usec = static_cast<decltype(tv.tv_usec)>((ms.count() % 1000) * 1000);
  return tv;
}
}  // namespace

Breaker::Breaker(int failures, std::chrono::milliseconds cooldown,
                 std::chrono::milliseconds backoff_min, std::chrono::milliseconds backoff_max,
                 std::uint64_t seed)
    : threshold_(failures),
      cooldown_(cooldown),
      backoff_min_(backoff_min),
      backoff_max_(backoff_max),
      rng_(static_cast<std::minstd_rand::result_type>(seed % 2147483646 + 1)) {}

void Breaker::on_success() noexcept { consecutive_ = 0; }

void Breaker::on_failure(SteadyTime now) noexcept {
  if (++consecutive_ >= threshold_) open_until_ = now + cooldown_;
}

void Breaker::on_connect_failure(SteadyTime now) noexcept {
  on_failure(now);
  backoff_ = backoff_.count() == 0 ? backoff_min_ : std::min(backoff_max_, backoff_ * 2);
  // ±25% jitter
  const auto base = backoff_.count();
  std::uniform_int_distribution<long long> jitter(-base / 4, base / 4);
  next_connect_ = now + std::chrono::milliseconds(base + jitter(rng_));
}

void Breaker::on_connect_success() noexcept { backoff_ = std::chrono::milliseconds(0); }

PooledConnection::~PooledConnection() {
  if (node_ != nullptr) node_->release(conn_, broken_);
}

void PooledConnection::append(int argc, const char** argv, const std::size_t* lens) {
  append_resp(out_, argc, argv, lens);
}

int PooledConnection::flush() { return detail::flush_commands(conn_.ctx, conn_.ssl, out_); }

int PooledConnection::reply(void** out) { return detail::get_reply(conn_.ctx, conn_.ssl, out); }

redisReply* PooledConnection::command(std::initializer_list<std::string_view> args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (std::string_view a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  append(static_cast<int>(argv.size()), argv.data(), lens.data());
  void* raw = nullptr;
  if (flush() != REDIS_OK || reply(&raw) != REDIS_OK) return nullptr;
  return static_cast<redisReply*>(raw);
}

namespace {
void close_conn(Conn c) {
  if (c.ssl != nullptr) SSL_free(c.ssl);
  redisFree(c.ctx);
}
}  // namespace

Node::Node(Endpoint endpoint, const RedisOptions& options)
    : endpoint_(std::move(endpoint)),
      options_(options),
      breaker_(options.breaker_failures, options.breaker_cooldown, options.backoff_min,
               options.backoff_max, std::hash<std::string>{}(endpoint_.name()) ^
                                        reinterpret_cast<std::uintptr_t>(this)) {}

Node::~Node() {
  for (Conn c : idle_) close_conn(c);
}

absl::StatusOr<PooledConnection> Node::acquire() {
  std::unique_lock<std::mutex> lock(mu_);
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  while (true) {
    const auto now = std::chrono::steady_clock::now();
    if (!breaker_.allows_call(now)) {
      return absl::UnavailableError(
          fmt::format("redis {}: circuit breaker open after repeated failures", endpoint_.name()));
    }
    if (!idle_.empty()) {
      const Conn c = idle_.back();
      idle_.pop_back();
      return PooledConnection(this, c);
    }
    if (open_ < options_.pool) {
      if (!breaker_.allows_connect(now)) {
        return absl::UnavailableError(
            fmt::format("redis {}: waiting to reconnect (backoff)", endpoint_.name()));
      }
      ++open_;
      lock.unlock();
      auto c = connect();
      lock.lock();
      const auto after = std::chrono::steady_clock::now();
      if (!c.ok()) {
        --open_;
        breaker_.on_connect_failure(after);
        cv_.notify_one();
        return c.status();
      }
      breaker_.on_connect_success();
      return PooledConnection(this, *c);
    }
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && idle_.empty()) {
      return absl::DeadlineExceededError(
          fmt::format("redis {}: no free connection in the pool within the timeout",
                      endpoint_.name()));
    }
  }
}

Node::State Node::state() {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  return {breaker_.open(now), open_ == 0 && breaker_.backing_off(now), open_};
}

void Node::record(bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ok) {
    breaker_.on_success();
  } else {
    breaker_.on_failure(std::chrono::steady_clock::now());
  }
}

void Node::release(Conn conn, bool broken) {
  std::lock_guard<std::mutex> lock(mu_);
  if (broken || conn.ctx->err != 0) {
    close_conn(conn);
    --open_;
  } else {
    idle_.push_back(conn);
  }
  cv_.notify_one();
}

absl::StatusOr<Conn> Node::connect() {
  const timeval ct = to_timeval(options_.connect_timeout);
  redisContext* c = endpoint_.unix_path.empty()
                        ? redisConnectWithTimeout(endpoint_.host.c_str(), endpoint_.port, ct)
                        : redisConnectUnixWithTimeout(endpoint_.unix_path.c_str(), ct);
  if (c == nullptr) return absl::UnavailableError("redis: out of memory for a connection");
  auto fail = [&](std::string what) -> absl::Status {
    redisFree(c);
    return absl::UnavailableError(fmt::format("redis {}: {}", endpoint_.name(), what));
  };
  if (c->err != 0) return fail(fmt::format("cannot connect: {}", c->errstr));
  Conn conn{c, nullptr};
  if (options_.tls.enabled) {
    if (!options_.tls_context) return fail(options_.tls_context_error);
    // The handshake is bounded by the connect timeout, the commands by the command timeout.
    if (redisSetTimeout(c, ct) != REDIS_OK) return fail("cannot set the timeout");
    const std::string& name = options_.tls.server_name.empty() ? endpoint_.host : options_.tls.server_name;
    auto ssl = detail::tls_handshake(c, options_.tls_context.get(), name, options_.tls.verify_hostname);
    if (!ssl.ok()) return fail(std::string(ssl.status().message()));
    conn.ssl = *ssl;
  }
  if (redisSetTimeout(c, to_timeval(options_.timeout)) != REDIS_OK) {
    if (conn.ssl != nullptr) SSL_free(conn.ssl);
    return fail("cannot set the timeout");
  }
  if (auto s = handshake_commands(conn); !s.ok()) {
    if (conn.ssl != nullptr) SSL_free(conn.ssl);
    return fail(std::string(s.message()));
  }
  return conn;
}

// AUTH and SELECT on a new connection, through a handle that does not return it to the pool.
absl::Status Node::handshake_commands(Conn conn) {
  PooledConnection handle(nullptr, conn);
  auto command = [&](std::initializer_list<std::string_view> args) -> absl::Status {
    auto* r = handle.command(args);
    const std::string_view name = *args.begin();
    if (r == nullptr) return absl::UnavailableError(fmt::format("{} failed: {}", name, conn.ctx->errstr));
    const bool error = r->type == REDIS_REPLY_ERROR;
    std::string text = error ? std::string(r->str, r->len) : std::string();
    freeReplyObject(r);
    if (error) return absl::UnavailableError(fmt::format("{} failed: {}", name, text));
    return absl::OkStatus();
  };
  if (!options_.password.empty()) {
    auto s = options_.user.empty() ? command({"AUTH", options_.password})
                                   : command({"AUTH", options_.user, options_.password});
    if (!s.ok()) return s;
  }
  if (options_.db != 0) {
    const std::string db = std::to_string(options_.db);
    if (auto s = command({"SELECT", db}); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace floodgate::redis
