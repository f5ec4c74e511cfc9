// One HTTP/1.1 connection of the service: plain or TLS (http/session.hpp, Stream).
#include "server/http/session.hpp"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <iterator>
#include <optional>
#include <string_view>

#include <boost/beast/http.hpp>
#include <boost/url/parse.hpp>
#include <fmt/format.h>

#include "server/http/request_target.hpp"
#include "server/net/tls.hpp"

namespace floodgate::server::detail {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<ServerState> shared, Batcher& batcher,
          std::shared_ptr<const TlsMaterial> tls)
      : stream_(std::move(socket), tls ? tls->http.get() : nullptr),
        tls_(std::move(tls)),
        shared_(std::move(shared)),
        batcher_(batcher),
        buffer_(shared_->limits.max_pipelined * (shared_->limits.max_header_bytes + shared_->limits.max_body_bytes)) {
    shared_->service->metrics().connections(1);
  }
  ~Session() { shared_->service->metrics().connections(-1); }

  // A TLS connection first completes its handshake, within the request timeout.
  void start() {
    if (!stream_.is_tls()) return next_request();
    stream_.expires_after(shared_->limits.request_timeout);
    stream_.handshake([self = shared_from_this()](beast::error_code ec) {
      if (ec) {
        self->shared_->service->metrics().tls_handshake_failed();
        return self->close();
      }
      self->handshaken_ = true;
      self->next_request();
    });
  }

 private:
  void next_request() {
    if (shared_->draining.load(std::memory_order_relaxed)) return close(kOrderly);
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(shared_->limits.max_header_bytes));
    parser_->body_limit(shared_->limits.max_body_bytes);
    if (buffer_.size() > 0) return read_request();  // a pipelined request is already here
    // Idle: wait for the first bytes of the next request.
    stream_.expires_after(shared_->limits.idle_timeout);
    const std::size_t room = std::min<std::size_t>(1024, buffer_.max_size() - buffer_.size());
    stream_.async_read_some(buffer_.prepare(room),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              if (ec) return self->close(ec == asio::error::eof);  // TLS: their close_notify
                              self->buffer_.commit(n);
                              self->read_request();
                            });
  }

  // The header is read first (from the buffer when it is already there), then the body: a client
  // that sent `Expect: 100-continue` waits for the interim answer before sending its body.
  void read_request() {
    stream_.expires_after(shared_->limits.request_timeout);
    const auto data = buffer_.cdata();
    const std::string_view head(static_cast<const char*>(data.data()), data.size());
    const std::size_t eol = head.find('\n');
    // Beast checks Content-Length against the limit while parsing the header, so the route's own
    // limit is chosen from the request line, which is nearly always in the buffer already; when it
    // is not, the larger limit holds there and on_header holds the request to its route's.
    parser_->body_limit(eol == std::string_view::npos
                            ? std::max(shared_->limits.max_body_bytes, shared_->limits.max_simulate_body_bytes)
                            : body_limit_for(head.substr(0, eol)));
    // A whole header already in the buffer (nearly always: a request arrives in one segment) is
    // parsed here, not through async_read_header, whose completion would be one more trip through
    // the thread's queue; so is a header the parser refuses (over the limit, malformed), with the
    // same error. Only a partial header goes the asynchronous way, which reads on from there.
    if (buffer_.size() > 0) {
      beast::error_code ec;
      const std::size_t used = parser_->put(buffer_.data(), ec);
      buffer_.consume(used);
      if (ec ? ec != http::error::need_more : parser_->is_header_done()) return on_header(ec);
    }
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_header(ec); });
  }

  std::size_t body_limit_for(std::string_view request_line) const {
    const std::optional<RequestLine> line = parse_request_line(request_line);
    const RouteNeeds needs = line ? Service::needs(line->method, line->path) : RouteNeeds{};
    return Service::body_limit(needs, shared_->limits);
  }

  // What the route of the request being read needs (the service's route table says).
  RouteNeeds route_needs() const {
    const auto& req = parser_->get();
    return Service::needs(req.method(), target_path(std::string_view(req.target().data(), req.target().size())));
  }

  void on_header(beast::error_code ec) {
    if (ec) return on_read(ec);
    const auto& req = parser_->get();
    needs_ = route_needs();
    const std::size_t limit = Service::body_limit(needs_, shared_->limits);
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
    if (ec == http::error::end_of_stream || ec == asio::error::eof) return close(kOrderly);
    if (ec == http::error::header_limit) return fail(http::status::request_header_fields_too_large,
                                                     "the request headers are too large");
    if (ec == http::error::body_limit) return fail(http::status::payload_too_large,
                                                   "the request body is larger than the limit");
    if (ec == beast::error::timeout || ec == asio::error::operation_aborted) return close();
    if (ec.category() == http::make_error_code(http::error::bad_target).category()) {
      return fail(http::status::bad_request, fmt::format("malformed request: {}", ec.message()));
    }
    if (ec) return close();
    if (const char* problem = host_problem(parser_->get())) return fail(http::status::bad_request, problem);
    to_origin_form(parser_->get());
    shared_->in_flight.fetch_add(1, std::memory_order_relaxed);
    res_ = {};
    header_lines_.clear();
    Service& service = *shared_->service;
    if (needs_.off_thread) {
      return run_elsewhere(service);
    }
    pending_ = service.prepare(parser_->get(), res_);  // a value of this request alone
    if (!pending_) return write();
    if (!service.batches()) {
      absl::StatusOr<Decision> d;
      Service::Pending* one = &*pending_;
      service.decide(std::span<Service::Pending* const>(&one, 1), std::span<absl::StatusOr<Decision>>(&d, 1));
      service.finish(*pending_, d, res_, &header_lines_);
      return write();
    }
    if (service.decide_locally(*pending_, res_, &header_lines_)) return write();  // a budget slice holds it
    batcher_.waiting.push_back(shared_from_this());
    if (batcher_.waiting.size() >= Batcher::kMax) return flush(batcher_);
    if (!batcher_.scheduled) {
      batcher_.scheduled = true;
      asio::post(stream_.get_executor(), [this_batcher = &batcher_] { flush(*this_batcher); });
    }
  }

  // RFC 9112 §3.2: a server must answer 400 to an HTTP/1.1 request without a Host field, and to
  // any request with more than one or with an invalid value: Host = uri-host [":" port] (RFC 9110
  // §7.2), an authority without userinfo, checked by Boost.URL's grammar. A client sends the same
  // Host on every request of a connection: the value last found valid here is not parsed again.
  const char* host_problem(const http::request<http::string_body>& req) {
    const auto [first, last] = req.equal_range(http::field::host);
    if (first == last) return req.version() >= 11 ? "an HTTP/1.1 request needs a Host field" : nullptr;
    if (std::next(first) != last) return "more than one Host field";
    const std::string_view value(first->value().data(), first->value().size());
    if (!value.empty() && value == valid_host_) return nullptr;
    const auto host = boost::urls::parse_authority(value);
    if (!host || host->has_userinfo()) return "the Host field is not a host";
    valid_host_.assign(value);
    return nullptr;
  }

  // The service reads a target in origin form: an absolute one is rewritten so.
  static void to_origin_form(http::request<http::string_body>& req) {
    if (auto origin = origin_of_absolute(std::string_view(req.target().data(), req.target().size()))) {
      req.target(*origin);
    }
  }

  // A route that runs off the I/O threads (RouteNeeds::off_thread: a simulation) on the
  // simulation pool; the answer is written back on this session's I/O thread. The session starts
  // no other operation meanwhile, so the two threads never share it.
  void run_elsewhere(Service& service) {
    if (shared_->simulating.fetch_add(1) >= ServerState::kMaxSimulations) {
      shared_->simulating.fetch_sub(1);
      res_.version(parser_->get().version());
      res_.keep_alive(parser_->get().keep_alive());
      respond_error(res_, http::status::service_unavailable,
                    fmt::format("{} simulations are running or queued: try again", ServerState::kMaxSimulations));
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

  friend void decide_batch(Batcher&, Service&, std::vector<std::shared_ptr<Session>>&);

 private:

  void fail(http::status status, std::string_view message) {
    shared_->in_flight.fetch_add(1, std::memory_order_relaxed);
    res_ = {};
    header_lines_.clear();
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
    out_ += "\r\nDate: ";
    out_ += http_date_now();
    out_ += "\r\n";
    for (const auto& f : res_) {
      out_.append(f.name_string().data(), f.name_string().size());
      out_ += ": ";
      out_.append(f.value().data(), f.value().size());
      out_ += "\r\n";
    }
    out_ += header_lines_;
    out_ += "\r\n";
    out_ += res_.body();
    keep_alive_ = res_.keep_alive();
    stream_.expires_after(shared_->limits.write_timeout);
    // A plain connection's socket nearly always takes the whole answer at once: written here,
    // without an asynchronous write's operation and its trip through the reactor. What the socket
    // does not take (and a TLS connection's answer) is written asynchronously. The next request is
    // read from the thread's queue, not at once: by then the client has usually sent it, and the
    // one read finds it (read at once, it would nearly always find nothing and read twice).
    give_way();
    const std::size_t sent = stream_.try_write_some(asio::buffer(out_));
    if (sent == out_.size()) {
      return asio::post(stream_.get_executor(), [self = shared_from_this()] { self->written({}); });
    }
    asio::async_write(stream_, asio::buffer(out_) + sent,
                      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->written(ec); });
  }

  // At the end of a round of its queue in which it answered something, the I/O thread offers its
  // CPU to the threads waiting for it (sched_yield), at most once per kGiveWayEvery, as a server
  // whose threads sleep when they find nothing to do gives it up between bursts. A thread that
  // always finds the next request ready (the clients' next ones arrive while it answers) would
  // otherwise run until the scheduler's tick takes it off, and the answers it sent wait that long
  // for their clients to run: on two cores shared with the load generator, a tenth of the answers
  // took 4-8 ms and the p99 was 7.9 ms; with this, about 1 ms (measured with
  // bench/http/compare_nginx.sh). The cost is the switches, a few percent of the rate there; with nothing
  // else waiting for the CPU the call returns at once.
  static constexpr std::chrono::microseconds kGiveWayEvery{250};
  void give_way() {
    if (batcher_.yield_due) return;
    batcher_.yield_due = true;
    asio::post(stream_.get_executor(), [&batcher = batcher_] {
      batcher.yield_due = false;
      const auto now = std::chrono::steady_clock::now();
      if (now - batcher.gave_way < kGiveWayEvery) return;
      sched_yield();
      batcher.gave_way = now;
    });
  }

  void written(beast::error_code ec) {
    shared_->in_flight.fetch_sub(1, std::memory_order_relaxed);
    if (ec) return close();
    if (!keep_alive_) return close(kOrderly);
    next_request();
  }

  // Ends the connection. After an orderly end (an answer without keep-alive, the client's own
  // end, draining) a TLS connection first sends close_notify, so that the client can tell the end
  // from a truncation; within kCloseNotifyTimeout (a peer that reads nothing cannot hold it longer).
  static constexpr bool kOrderly = true;
  static constexpr std::chrono::milliseconds kCloseNotifyTimeout{1000};
  void close(bool orderly = false) {
    if (orderly && handshaken_) {
      handshaken_ = false;
      stream_.expires_after(kCloseNotifyTimeout);
      return stream_.send_close_notify([self = shared_from_this()](beast::error_code) { self->close(); });
    }
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.socket().close(ignored);
  }

  Stream stream_;
  std::shared_ptr<const TlsMaterial> tls_;  // keeps the context of this connection's handshake
  std::shared_ptr<ServerState> shared_;
  Batcher& batcher_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  RouteNeeds needs_{};  // of the request being read, from its header (on_header)
  Response res_;
  std::optional<Service::Pending> pending_;  // the request being decided, built by Service::prepare
  std::string header_lines_;  // the rate-limit headers of the answer being built (Service::finish)
  std::string out_;
  std::string valid_host_;  // the Host value this connection last sent that host_problem accepted
  bool keep_alive_ = false;
  bool handshaken_ = false;  // TLS, until close_notify is sent
};

// On a storage thread: decides a batch with one round trip, then answers the requests back on
// their I/O thread.
void decide_batch(Batcher& batcher, Service& service, std::vector<std::shared_ptr<Session>>& batch) {
  std::vector<Service::Pending*> pending;
  pending.reserve(batch.size());
  for (auto& s : batch) pending.push_back(&*s->pending_);
  auto decisions = std::make_shared<std::vector<absl::StatusOr<Decision>>>(batch.size());
  service.decide(pending, *decisions);
  asio::post(*batcher.io, [&service, sessions = std::move(batch), decisions] {
    for (std::size_t i = 0; i < sessions.size(); ++i) {
      service.finish(*sessions[i]->pending_, (*decisions)[i], sessions[i]->res_, &sessions[i]->header_lines_);
      sessions[i]->write();
    }
  });
}

void start_session(tcp::socket socket, const std::shared_ptr<ServerState>& shared, Batcher& batcher) {
  std::shared_ptr<const TlsMaterial> tls = shared->tls != nullptr ? shared->tls->current() : nullptr;
  std::make_shared<Session>(std::move(socket), shared, batcher, std::move(tls))->start();
}

}  // namespace floodgate::server::detail
