// The HTTP server: listeners, one I/O thread per core, and draining on SIGTERM.
#include "server/http/server.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "server/http/session.hpp"

namespace floodgate::server {

using detail::Batcher;
using detail::Session;
namespace asio = detail::asio;
namespace beast = detail::beast;
using tcp = detail::tcp;

namespace {

void accept_loop(std::shared_ptr<ServerState> shared, tcp::acceptor& acceptor, Batcher& batcher) {
  acceptor.async_accept([shared, &acceptor, &batcher](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
    if (!ec) {
      if (static_cast<std::size_t>(shared->service->metrics().open_connections()) >=
          shared->limits.max_connections) {
        beast::error_code ignored;
        socket.close(ignored);  // over the bound: refuse by closing at once
      } else {
        socket.set_option(tcp::no_delay(true), ec);
        detail::start_session(std::move(socket), shared, batcher);
      }
    }
    accept_loop(shared, acceptor, batcher);
  });
}

}  // namespace

HttpServer::HttpServer(Service& service, const Config& config, const TlsState* tls)
    : service_(service),
      host_(config.listen_host),
      port_(config.listen_port),
      threads_(config.threads > 0 ? config.threads : std::max(1u, std::thread::hardware_concurrency())),
      shared_(std::make_shared<ServerState>()) {
  shared_->service = &service_;
  shared_->limits = config.http;
  shared_->tls = tls;
}

HttpServer::~HttpServer() {
  drain();
  join();
}

absl::Status HttpServer::start() {
  beast::error_code ec;
  const auto address = asio::ip::make_address(host_, ec);
  if (ec) return absl::InvalidArgumentError(fmt::format("listen address \"{}\": {}", host_, ec.message()));
  // One listening socket, bound without SO_REUSEPORT, so that an address another process holds
  // (a second floodgate, a stale one after a restart) is refused instead of shared: with
  // SO_REUSEPORT the kernel would split the connections between two processes, each with its own
  // counts. Each I/O thread accepts on its own duplicate of that socket.
  const tcp::endpoint endpoint(address, port_);
  for (unsigned i = 0; i < threads_; ++i) {
    shared_->contexts.push_back(std::make_unique<asio::io_context>(1));
    shared_->batchers.push_back(std::make_unique<Batcher>());
    shared_->batchers.back()->io = shared_->contexts.back().get();
    auto acceptor = std::make_unique<tcp::acceptor>(*shared_->contexts.back());
    if (i == 0) {
      acceptor->open(endpoint.protocol(), ec);
      if (!ec) acceptor->set_option(asio::socket_base::reuse_address(true), ec);  // past TIME_WAIT only
      if (!ec) acceptor->bind(endpoint, ec);
      if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
      if (ec == asio::error::address_in_use) {
        return absl::UnavailableError(fmt::format(
            "cannot listen on {}:{}: another process is listening there (a second floodgate serve?); "
            "stop it or choose another address with --listen",
            host_, port_));
      }
      if (!ec) port_ = acceptor->local_endpoint().port();  // fixes an ephemeral port
    } else {
      const int fd = ::dup(shared_->acceptors.front()->native_handle());
      if (fd < 0) ec.assign(errno, boost::system::system_category());
      if (!ec) acceptor->assign(endpoint.protocol(), fd, ec);
      if (ec && fd >= 0) ::close(fd);
    }
    if (ec) {
      return absl::UnavailableError(fmt::format("cannot listen on {}:{}: {}", host_, port_, ec.message()));
    }
    shared_->acceptors.push_back(std::move(acceptor));
  }
  for (unsigned i = 0; i < threads_; ++i) {
    if (service_.batches()) {
      Batcher& b = *shared_->batchers[i];
      b.coalescer = std::make_unique<Coalescer<std::shared_ptr<Session>>>(
          1, [&b, &service = service_](std::vector<std::shared_ptr<Session>>& batch) {
            detail::decide_batch(b, service, batch);
          });
    }
    accept_loop(shared_, *shared_->acceptors[i], *shared_->batchers[i]);
    workers_.emplace_back([ctx = shared_->contexts[i].get()] {
      auto guard = asio::make_work_guard(*ctx);
      ctx->run();
    });
  }
  return absl::OkStatus();
}

void HttpServer::drain() {
  if (shared_->draining.exchange(true)) return;
  for (std::size_t i = 0; i < shared_->acceptors.size(); ++i) {
    asio::post(*shared_->contexts[i], [a = shared_->acceptors[i].get()] {
      beast::error_code ignored;
      a->close(ignored);
    });
  }
  const auto deadline = std::chrono::steady_clock::now() + shared_->limits.drain_timeout;
  while (shared_->in_flight.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (auto& ctx : shared_->contexts) ctx->stop();
}

void HttpServer::join() {
  for (auto& w : workers_) {
    if (w.joinable()) w.join();
  }
  workers_.clear();
  shared_->simulations.stop();  // a running simulation finishes; queued ones are dropped
  shared_->simulations.join();
  for (auto& b : shared_->batchers) b->coalescer.reset();  // decides what it holds, posts nothing that runs
  // Destroying the contexts destroys the sessions still waiting in them (they hold `shared_`).
  auto acceptors = std::move(shared_->acceptors);
  acceptors.clear();
  auto contexts = std::move(shared_->contexts);
  contexts.clear();
  for (auto& b : shared_->batchers) b->waiting.clear();
}

}  // namespace floodgate::server
