// The Prometheus listener: Beast, one io thread, each connection read once and answered.
#include "server/http/metrics_listener.hpp"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

namespace floodgate::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;

struct MetricsListener::State {
  asio::io_context io{1};
  asio::ip::tcp::acceptor acceptor{io};
};

namespace {

struct Session : std::enable_shared_from_this<Session> {
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
  bhttp::request_parser<bhttp::empty_body> parser;
  bhttp::response<bhttp::string_body> res;
  const std::string& path;
  const std::function<std::string()>& text;

  Session(asio::ip::tcp::socket s, const std::string& p, const std::function<std::string()>& t)
      : stream(std::move(s)), path(p), text(t) {
    parser.header_limit(8 * 1024);
  }

  void run() {
    stream.expires_after(std::chrono::seconds(10));
    bhttp::async_read(stream, buffer, parser, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (!ec) self->answer();
    });
  }

  void answer() {
    const auto& req = parser.get();
    const std::string_view target(req.target().data(), req.target().size());
    const std::string_view p = target.substr(0, target.find('?'));
    res.version(req.version());
    res.keep_alive(false);
    if (req.method() == bhttp::verb::get && p == path) {
      res.result(bhttp::status::ok);
      res.set(bhttp::field::content_type, "text/plain; version=0.0.4");
      res.body() = text();
    } else {
      res.result(bhttp::status::not_found);
      res.set(bhttp::field::content_type, "text/plain");
      res.body() = fmt::format("not found: metrics are at GET {}\n", path);
    }
    res.prepare_payload();
    bhttp::async_write(stream, res, [self = shared_from_this()](beast::error_code, std::size_t) {
      beast::error_code ignored;
      self->stream.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
    });
  }
};

void accept(MetricsListener::State& st, const std::string& path, const std::function<std::string()>& text) {
  st.acceptor.async_accept([&st, &path, &text](beast::error_code ec, asio::ip::tcp::socket s) {
    if (ec == asio::error::operation_aborted) return;
    if (!ec) std::make_shared<Session>(std::move(s), path, text)->run();
    accept(st, path, text);
  });
}

}  // namespace

MetricsListener::MetricsListener(std::string host, std::uint16_t port, std::string path,
                                 std::function<std::string()> text)
    : host_(std::move(host)), port_(port), path_(std::move(path)), text_(std::move(text)) {}

MetricsListener::~MetricsListener() { stop(); }

absl::Status MetricsListener::start() {
  state_ = std::make_shared<State>();
  beast::error_code ec;
  const auto address = asio::ip::make_address(host_, ec);
  const asio::ip::tcp::endpoint endpoint(address, port_);
  if (!ec) state_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) state_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) state_->acceptor.bind(endpoint, ec);
  if (!ec) state_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(fmt::format("cannot listen for metrics on {}:{}: {}", host_, port_, ec.message()));
  }
  port_ = state_->acceptor.local_endpoint().port();
  accept(*state_, path_, text_);
  thread_ = std::thread([st = state_] { st->io.run(); });
  return absl::OkStatus();
}

void MetricsListener::stop() {
  if (!thread_.joinable()) return;
  asio::post(state_->io, [st = state_] {
    beast::error_code ignored;
    st->acceptor.close(ignored);
    st->io.stop();
  });
  thread_.join();
}

}  // namespace floodgate::server
