#include "server/http_server.hpp"

#include "server/coalescer.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace floodgate::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;
using reuse_port = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

namespace {
class Session;
}  // namespace

// Requests of one I/O thread waiting for a decision from a networked storage: collected while the
// thread handles the events that are ready, then handed to its coalescer (coalescer.hpp), whose
// storage thread decides everything handed over since its last batch with one round trip, so the
// I/O thread goes on reading requests (and filling the next batch) while a batch is on the wire.
struct Batcher {
  static constexpr std::size_t kMax = 256;
  asio::io_context* io = nullptr;
  std::vector<std::shared_ptr<Session>> waiting;  // I/O thread only
  bool scheduled = false;                         // I/O thread only
  std::unique_ptr<Coalescer<std::shared_ptr<Session>>> coalescer;
};

struct HttpServer::Shared {
  Service* service;
  HttpLimits limits;
  std::vector<std::unique_ptr<Batcher>> batchers;  // one per I/O thread
  std::vector<std::unique_ptr<asio::io_context>> contexts;
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors;
  std::atomic<bool> draining{false};
  std::atomic<std::int64_t> in_flight{0};
  // POST /v1/simulate (up to 10,000 requests through seven strategies: milliseconds to a few
  // hundred under sanitizers) runs here, off the I/O threads, so that it never delays decisions.
  // At most kMaxSimulations at once, queued included; beyond that: 503 with Retry-After.
  static constexpr int kMaxSimulations = 4;
  asio::thread_pool simulations{1};
  std::atomic<int> simulating{0};
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<HttpServer::Shared> shared, Batcher& batcher)
      : stream_(std::move(socket)),
        shared_(std::move(shared)),
        batcher_(batcher),
        buffer_(shared_->limits.max_pipelined * (shared_->limits.max_header_bytes + shared_->limits.max_body_bytes)) {
    shared_->service->metrics().connections(1);
  }
  ~Session() { shared_->service->metrics().connections(-1); }

  void start() { next_request(); }

 private:
  void next_request() {
    if (shared_->draining.load(std::memory_order_relaxed)) return close();
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(shared_->limits.max_header_bytes));
    parser_->body_limit(shared_->limits.max_body_bytes);
    if (buffer_.size() > 0) return read_request();  // a pipelined request is already here
    // Idle: wait for the first bytes of the next request.
    stream_.expires_after(shared_->limits.idle_timeout);
    const std::size_t room = std::min<std::size_t>(1024, buffer_.max_size() - buffer_.size());
    stream_.async_read_some(buffer_.prepare(room),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              if (ec) return self->close();
                              self->buffer_.commit(n);
                              self->read_request();
                            });
  }

  // POST /v1/simulate carries a trace: its body may be larger (max_simulate_body_bytes). The
  // limit is chosen from the request line, which is nearly always in the buffer already; if it is
  // not, the header is read first (one more step, for this rare case only).
  static bool is_simulate(std::string_view request_line) {
    constexpr std::string_view kPrefix = "POST /v1/simulate";
    return request_line.starts_with(kPrefix) && request_line.size() > kPrefix.size() &&
           (request_line[kPrefix.size()] == ' ' || request_line[kPrefix.size()] == '?');
  }

  // The header is read first (from the buffer when it is already there), then the body: a client
  // that sent `Expect: 100-continue` waits for the interim answer before sending its body.
  void read_request() {
    stream_.expires_after(shared_->limits.request_timeout);
    const auto data = buffer_.cdata();
    const std::string_view head(static_cast<const char*>(data.data()), data.size());
    const std::size_t eol = head.find('\n');
    // Beast checks Content-Length against the limit while parsing the header: when the target is
    // not known yet, allow the larger one there; on_header holds the request to its own limit.
    parser_->body_limit(eol == std::string_view::npos
                            ? std::max(shared_->limits.max_body_bytes, shared_->limits.max_simulate_body_bytes)
                            : body_limit_for(head.substr(0, eol)));
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_header(ec); });
  }

  std::size_t body_limit_for(std::string_view request_line) const {
    return is_simulate(request_line) ? shared_->limits.max_simulate_body_bytes : shared_->limits.max_body_bytes;
  }

  void on_header(beast::error_code ec) {
    if (ec) return on_read(ec);
    const auto& req = parser_->get();
    const std::size_t limit = req.method() == http::verb::post && is_simulate_target(req.target())
                                  ? shared_->limits.max_simulate_body_bytes
                                  : shared_->limits.max_body_bytes;
    parser_->body_limit(limit);  // chunked bodies count against it
    const auto field = req[http::field::content_length];
    std::uint64_t length = 0;
    std::from_chars(field.data(), field.data() + field.size(), length);
    if (length > limit) return on_read(http::error::body_limit);
    if (parser_->is_done()) return on_read(ec);
    auto read_body = [self = shared_from_this()] {
      http::async_read(self->stream_, self->buffer_, *self->parser_,
                       [self](beast::error_code ec2, std::size_t) { self->on_read(ec2); });
    };
    if (!expects_continue(req) || buffer_.size() > 0) return read_body();
    static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    asio::async_write(stream_, asio::buffer(kContinue.data(), kContinue.size()),
                      [self = shared_from_this(), read_body](beast::error_code ec2, std::size_t) {
                        if (ec2) return self->close();
                        read_body();
                      });
  }

  // RFC 9110 §10.1.1: an HTTP/1.1 request whose Expect is 100-continue (case-insensitive).
  static bool expects_continue(const http::request<http::string_body>& req) {
    const auto expect = req[http::field::expect];
    return req.version() >= 11 && beast::iequals(expect, "100-continue");
  }

  void on_read(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == asio::error::eof) return close();
    if (ec == http::error::header_limit) return fail(http::status::request_header_fields_too_large,
                                                     "the request headers are too large");
    if (ec == http::error::body_limit) return fail(http::status::payload_too_large,
                                                   "the request body is larger than the limit");
    if (ec == beast::error::timeout || ec == asio::error::operation_aborted) return close();
    if (ec.category() == http::make_error_code(http::error::bad_target).category()) {
      return fail(http::status::bad_request, fmt::format("malformed request: {}", ec.message()));
    }
    if (ec) return close();
    shared_->in_flight.fetch_add(1, std::memory_order_relaxed);
    res_ = {};
    Service& service = *shared_->service;
    if (parser_->get().method() == http::verb::post && is_simulate_target(parser_->get().target())) {
      return simulate_elsewhere(service);
    }
    if (!service.prepare(parser_->get(), res_, pending_)) return write();
    if (!service.batches()) {
      absl::StatusOr<Decision> d;
      Service::Pending* one = &pending_;
      service.decide(std::span<Service::Pending* const>(&one, 1), std::span<absl::StatusOr<Decision>>(&d, 1));
      service.finish(pending_, d, res_);
      return write();
    }
    batcher_.waiting.push_back(shared_from_this());
    if (batcher_.waiting.size() >= Batcher::kMax) return flush(batcher_);
    if (!batcher_.scheduled) {
      batcher_.scheduled = true;
      asio::post(stream_.get_executor(), [this_batcher = &batcher_] { flush(*this_batcher); });
    }
  }

  static bool is_simulate_target(beast::string_view target) {
    constexpr std::string_view kPath = "/v1/simulate";
    const std::string_view t(target.data(), target.size());
    return t.starts_with(kPath) && (t.size() == kPath.size() || t[kPath.size()] == '?');
  }

  // POST /v1/simulate on the simulation thread; the answer is written back on this session's I/O
  // thread. The session starts no other operation meanwhile, so the two threads never share it.
  void simulate_elsewhere(Service& service) {
    if (shared_->simulating.fetch_add(1) >= HttpServer::Shared::kMaxSimulations) {
      shared_->simulating.fetch_sub(1);
      res_.version(parser_->get().version());
      res_.keep_alive(parser_->get().keep_alive());
      respond_error(res_, http::status::service_unavailable,
                    fmt::format("{} simulations are running or queued: try again", HttpServer::Shared::kMaxSimulations));
      res_.set(http::field::retry_after, "1");
      service.metrics().http_status(503);
      return write();
    }
    asio::post(shared_->simulations, [self = shared_from_this(), &service] {
      service.handle(self->parser_->get(), self->res_);
      self->shared_->simulating.fetch_sub(1);
      asio::post(self->stream_.get_executor(), [self] { self->write(); });
    });
  }

  // I/O thread: hands the waiting requests to the coalescer.
  static void flush(Batcher& batcher) {
    batcher.scheduled = false;
    batcher.coalescer->submit(batcher.waiting);
  }

 public:
  // On a storage thread: decides a batch with one round trip, then answers the requests back on
  // their I/O thread.
  static void decide_batch(Batcher& batcher, Service& service, std::vector<std::shared_ptr<Session>>& batch) {
    std::vector<Service::Pending*> pending;
    pending.reserve(batch.size());
    for (auto& s : batch) pending.push_back(&s->pending_);
    auto decisions = std::make_shared<std::vector<absl::StatusOr<Decision>>>(batch.size());
    service.decide(pending, *decisions);
    asio::post(*batcher.io, [&service, sessions = std::move(batch), decisions] {
      for (std::size_t i = 0; i < sessions.size(); ++i) {
        service.finish(sessions[i]->pending_, (*decisions)[i], sessions[i]->res_);
        sessions[i]->write();
      }
    });
  }

 private:

  void fail(http::status status, std::string_view message) {
    shared_->in_flight.fetch_add(1, std::memory_order_relaxed);
    res_ = {};
    res_.version(11);
    res_.keep_alive(false);
    respond_error(res_, status, message);
    shared_->service->metrics().http_status(static_cast<int>(status));
    write();
  }

  // The response as one buffer, written with one call. (Beast's serializer walks the fields as a
  // chain of buffer views; for small responses flattening them first is cheaper.)
  void write() {
    if (shared_->draining.load(std::memory_order_relaxed)) res_.keep_alive(false);
    out_.clear();
    out_ += res_.version() == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
    out_ += std::to_string(res_.result_int());
    out_ += ' ';
    const auto reason = res_.reason();
    out_.append(reason.data(), reason.size());
    out_ += "\r\n";
    for (const auto& f : res_) {
      out_.append(f.name_string().data(), f.name_string().size());
      out_ += ": ";
      out_.append(f.value().data(), f.value().size());
      out_ += "\r\n";
    }
    out_ += "\r\n";
    out_ += res_.body();
    keep_alive_ = res_.keep_alive();
    stream_.expires_after(shared_->limits.write_timeout);
    asio::async_write(stream_, asio::buffer(out_), [self = shared_from_this()](beast::error_code ec, std::size_t) {
      self->shared_->in_flight.fetch_sub(1, std::memory_order_relaxed);
      if (ec || !self->keep_alive_) return self->close();
      self->next_request();
    });
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.socket().close(ignored);
  }

  beast::tcp_stream stream_;
  std::shared_ptr<HttpServer::Shared> shared_;
  Batcher& batcher_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Response res_;
  Service::Pending pending_;
  std::string out_;
  bool keep_alive_ = false;
};

void accept_loop(std::shared_ptr<HttpServer::Shared> shared, tcp::acceptor& acceptor, Batcher& batcher) {
  acceptor.async_accept([shared, &acceptor, &batcher](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
    if (!ec) {
      if (static_cast<std::size_t>(shared->service->metrics().open_connections()) >=
          shared->limits.max_connections) {
        beast::error_code ignored;
        socket.close(ignored);  // over the bound: refuse by closing at once
      } else {
        socket.set_option(tcp::no_delay(true), ec);
        std::make_shared<Session>(std::move(socket), shared, batcher)->start();
      }
    }
    accept_loop(shared, acceptor, batcher);
  });
}

}  // namespace

HttpServer::HttpServer(Service& service, const Config& config)
    : service_(service),
      host_(config.listen_host),
      port_(config.listen_port),
      threads_(config.threads > 0 ? config.threads : std::max(1u, std::thread::hardware_concurrency())),
      shared_(std::make_shared<Shared>()) {
  shared_->service = &service_;
  shared_->limits = config.http;
}

HttpServer::~HttpServer() {
  drain();
  join();
}

absl::Status HttpServer::start() {
  beast::error_code ec;
  const auto address = asio::ip::make_address(host_, ec);
  if (ec) return absl::InvalidArgumentError(fmt::format("listen address \"{}\": {}", host_, ec.message()));
  for (unsigned i = 0; i < threads_; ++i) {
    shared_->contexts.push_back(std::make_unique<asio::io_context>(1));
    shared_->batchers.push_back(std::make_unique<Batcher>());
    shared_->batchers.back()->io = shared_->contexts.back().get();
    auto acceptor = std::make_unique<tcp::acceptor>(*shared_->contexts.back());
    const tcp::endpoint endpoint(address, port_);
    acceptor->open(endpoint.protocol(), ec);
    if (!ec) acceptor->set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor->set_option(reuse_port(true), ec);
    if (!ec) acceptor->bind(endpoint, ec);
    if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return absl::UnavailableError(fmt::format("cannot listen on {}:{}: {}", host_, port_, ec.message()));
    }
    port_ = acceptor->local_endpoint().port();  // the first acceptor fixes an ephemeral port
    shared_->acceptors.push_back(std::move(acceptor));
  }
  for (unsigned i = 0; i < threads_; ++i) {
    if (service_.batches()) {
      Batcher& b = *shared_->batchers[i];
      b.coalescer = std::make_unique<Coalescer<std::shared_ptr<Session>>>(
          1, [&b, &service = service_](std::vector<std::shared_ptr<Session>>& batch) {
            Session::decide_batch(b, service, batch);
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
