// What the HTTP server's I/O threads and connections share: the service, the limits, each
// thread's batcher, the listeners, and the counters of a drain. Internal to http/.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include <boost/asio.hpp>

#include "server/api/service.hpp"
#include "server/common/coalescer.hpp"
#include "server/config/config.hpp"

namespace floodgate::server {

class TlsState;

namespace detail {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

class Session;

// Requests of one I/O thread waiting for a decision from a networked storage: collected while the
// thread handles the events that are ready, then handed to its coalescer (common/coalescer.hpp), whose
// storage thread decides everything handed over since its last batch with one round trip, so the
// I/O thread goes on reading requests (and filling the next batch) while a batch is on the wire.
// Also the I/O thread's own state for Session::give_way (its yield between rounds).
struct Batcher {
  static constexpr std::size_t kMax = 256;
  asio::io_context* io = nullptr;
  bool yield_due = false;  // I/O thread only: Session::give_way's yield is queued
  std::chrono::steady_clock::time_point gave_way{};  // I/O thread only: its last yield
  std::vector<std::shared_ptr<Session>> waiting;  // I/O thread only
  bool scheduled = false;                         // I/O thread only
  std::unique_ptr<Coalescer<std::shared_ptr<Session>>> coalescer;
};

}  // namespace detail

/// What the server's I/O threads and connections share; owned by HttpServer, kept alive by every
/// session.
struct ServerState {
  Service* service;
  HttpLimits limits;
  const TlsState* tls = nullptr;  // null: plain HTTP
  std::vector<std::unique_ptr<detail::Batcher>> batchers;  // one per I/O thread
  std::vector<std::unique_ptr<detail::asio::io_context>> contexts;
  std::vector<std::unique_ptr<detail::tcp::acceptor>> acceptors;
  std::atomic<bool> draining{false};
  std::atomic<std::int64_t> in_flight{0};
  // Routes that take milliseconds (RouteNeeds::off_thread: POST /v1/simulate, up to 10,000
  // requests through seven strategies, a few hundred ms under sanitizers) run here, off the I/O threads, so that it never delays decisions.
  // At most kMaxSimulations at once, queued included; beyond that: 503 with Retry-After.
  static constexpr int kMaxSimulations = 4;
  detail::asio::thread_pool simulations{1};
  std::atomic<int> simulating{0};
};

}  // namespace floodgate::server
