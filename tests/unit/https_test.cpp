// The HTTP server over TLS in process, on loopback: what its TLS stream does with peers that end
// early, truncate or corrupt a record, stall in the handshake, split a request over many records,
// or present a certificate of another issuer under mTLS; and its deadlines.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <gtest/gtest.h>

#include "floodgate/memory_storage.hpp"
#include "server/http/server.hpp"
#include "server/net/tls.hpp"

namespace floodgate::server {
namespace {

namespace fs = std::filesystem;
namespace asio = boost::asio;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

class Https : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("floodgate-https-test-" + std::to_string(getpid())));
    const std::string make = std::string(FLOODGATE_SOURCE_DIR) + "/tests/support/make_test_certs.sh ";
    ASSERT_EQ(std::system((make + dir_->string() + " >/dev/null 2>&1").c_str()), 0);
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static std::string file(const char* name) { return (*dir_ / name).string(); }

  void TearDown() override {
    if (server_) {
      server_->drain();
      server_->join();
    }
  }

  // An HTTPS server on an ephemeral port, one I/O thread, with `limits`; mTLS with `mutual`.
  void serve(HttpLimits limits = {}, bool mutual = false) {
    auto c = parse_config(
        "storage: memory\npolicies:\n  - {name: api, strategy: fixed-window, limit: 1000/second, key: {header: X-Real-IP}}\n",
        "test.yaml");
    ASSERT_TRUE(c.ok()) << c.status();
    c->listen_port = 0;
    c->threads = 1;
    c->http = limits;
    config_ = std::make_shared<const Config>(*c);
    auto material = load_tls({file("server.crt"), file("server.key"), mutual ? file("ca.crt") : ""});
    ASSERT_TRUE(material.ok()) << material.status();
    auto state = TlsState::create(*material, false);
    ASSERT_TRUE(state.ok()) << state.status();
    tls_ = *std::move(state);
    service_ = std::make_unique<Service>(config_, std::make_shared<MemoryStorage>());
    server_ = std::make_unique<HttpServer>(*service_, *config_, tls_.get());
    ASSERT_TRUE(server_->start().ok());
  }

  // A client context that trusts the test CA, presenting `cert`/`key` when given.
  static ssl::context client(const char* cert = nullptr, const char* key = nullptr) {
    ssl::context ctx(ssl::context::tls_client);
    ctx.load_verify_file(file("ca.crt"));
    ctx.set_verify_mode(ssl::verify_peer);
    if (cert != nullptr) {
      ctx.use_certificate_chain_file(file(cert));
      ctx.use_private_key_file(file(key), ssl::context::pem);
    }
    return ctx;
  }

  tcp::socket connect() {
    tcp::socket s(io_);
    s.connect({asio::ip::make_address("127.0.0.1"), server_->port()});
    return s;
  }

  // The status of `req` sent on `stream` (0: no answer, the connection failed).
  template <class Stream>
  static int ask(Stream& stream, const std::string& req) {
    boost::system::error_code ec;
    asio::write(stream, asio::buffer(req), ec);
    if (ec) return 0;
    boost::beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(stream, buffer, res, ec);
    return ec ? 0 : res.result_int();
  }

  // How long until the server ends `s` (the time of the read that sees the end; bytes before it,
  // e.g. TLS session tickets or an alert, are skipped); 10 s at most.
  static Clock::duration until_closed(tcp::socket& s) {
    const auto start = Clock::now();
    timeval tv{10, 0};
    setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char junk[4096];
    while (::read(s.native_handle(), junk, sizeof junk) > 0) {
    }
    return Clock::now() - start;
  }

  [[nodiscard]] std::uint64_t handshake_failures() const {
    Request req{http::verb::get, "/metrics", 11};
    Response res;
    service_->handle(req, res);
    const std::string name = "\nfloodgate_http_tls_handshake_failures_total ";
    const std::size_t at = res.body().find(name);
    EXPECT_NE(at, std::string::npos);
    return at == std::string::npos ? 0 : std::stoull(res.body().substr(at + name.size()));
  }

  // Waits (2 s at most) until the server has no connection open.
  [[nodiscard]] bool all_closed() const {
    for (int i = 0; i < 200 && service_->metrics().open_connections() != 0; ++i) std::this_thread::sleep_for(10ms);
    return service_->metrics().open_connections() == 0;
  }

  static constexpr const char* kAuth = "GET /v1/auth?policy=api HTTP/1.1\r\nHost: localhost\r\nX-Real-IP: 10.0.0.1\r\n\r\n";

  asio::io_context io_;
  std::shared_ptr<const Config> config_;
  std::unique_ptr<TlsState> tls_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<HttpServer> server_;
  static fs::path* dir_;
};
fs::path* Https::dir_ = nullptr;

TEST_F(Https, AnswersRequestsOnAKeptAliveConnectionAndEndsWithCloseNotify) {
  serve();
  ssl::context ctx = client();
  ssl::stream<tcp::socket> tls(connect(), ctx);
  tls.handshake(ssl::stream_base::client);
  EXPECT_EQ(ask(tls, kAuth), 204);
  EXPECT_EQ(ask(tls, kAuth), 204);
  EXPECT_EQ(ask(tls, "GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"), 200);
  char byte = 0;
  boost::system::error_code ec;
  tls.read_some(asio::buffer(&byte, 1), ec);
  EXPECT_EQ(ec, asio::error::eof) << ec.message();  // the server's close_notify, not a truncation
  EXPECT_EQ(handshake_failures(), 0u);
}

// A peer that ends its TCP connection in the middle of a request without close_notify: the server
// ends the connection at once (not at the request deadline).
TEST_F(Https, APeerThatEndsWithoutCloseNotifyIsDroppedAtOnce) {
  serve();  // request deadline 10 s
  ssl::context ctx = client();
  ssl::stream<tcp::socket> tls(connect(), ctx);
  tls.handshake(ssl::stream_base::client);
  asio::write(tls, asio::buffer(std::string_view("GET /v1/auth?policy=api HTTP/1.1\r\nHost: local")));
  const auto start = Clock::now();
  tls.next_layer().close();
  EXPECT_TRUE(all_closed());
  EXPECT_LT(Clock::now() - start, 2s);
  ssl::stream<tcp::socket> again(connect(), ctx);
  again.handshake(ssl::stream_base::client);
  EXPECT_EQ(ask(again, kAuth), 204);
}

// A record whose header announces more bytes than come before the peer's FIN: the server ends the
// connection without an answer, at once.
TEST_F(Https, ATruncatedRecordEndsTheConnection) {
  serve();
  ssl::context ctx = client();
  ssl::stream<tcp::socket> tls(connect(), ctx);
  tls.handshake(ssl::stream_base::client);
  EXPECT_EQ(ask(tls, kAuth), 204);
  const std::string partial = std::string("\x17\x03\x03\x01\x00", 5) + std::string(40, 'x');  // 256 announced
  asio::write(tls.next_layer(), asio::buffer(partial));
  tls.next_layer().shutdown(tcp::socket::shutdown_send);
  EXPECT_LT(until_closed(tls.next_layer()), 2s);
  EXPECT_TRUE(all_closed());
}

// A whole record that does not decrypt: refused (with an alert), the connection ended at once.
TEST_F(Https, ACorruptRecordEndsTheConnection) {
  serve();
  ssl::context ctx = client();
  ssl::stream<tcp::socket> tls(connect(), ctx);
  tls.handshake(ssl::stream_base::client);
  const std::string garbage = std::string("\x17\x03\x03\x00\x40", 5) + std::string(64, 'x');
  asio::write(tls.next_layer(), asio::buffer(garbage));
  EXPECT_LT(until_closed(tls.next_layer()), 2s);
  EXPECT_TRUE(all_closed());
}

// A client that sends the first bytes of a ClientHello and then nothing: the handshake is ended
// at the request deadline, and counted as a failed handshake.
TEST_F(Https, AClientThatStallsInTheHandshakeIsTimedOutAndCounted) {
  HttpLimits limits;
  limits.request_timeout = 300ms;
  serve(limits);
  tcp::socket s = connect();
  asio::write(s, asio::buffer(std::string_view("\x16\x03\x01\x02\x00\x01", 6)));
  const auto waited = until_closed(s);
  EXPECT_GE(waited, 250ms);
  EXPECT_LT(waited, 3s);
  EXPECT_TRUE(all_closed());
  EXPECT_EQ(handshake_failures(), 1u);
}

// A request of 60 kB sent as records of 100 bytes (many per socket read, records across reads).
TEST_F(Https, ALargeRequestSplitOverManyRecordsIsAnswered) {
  HttpLimits limits;
  limits.max_body_bytes = 128 * 1024;
  serve(limits);
  ssl::context ctx = client();
  ssl::stream<tcp::socket> tls(connect(), ctx);
  tls.handshake(ssl::stream_base::client);
  const std::string body = R"({"policy": "api", "key": "big")" + std::string(60 * 1024, ' ') + "}";
  const std::string req = "POST /v1/hit HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                          "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  for (std::size_t at = 0; at < req.size(); at += 100) {
    asio::write(tls, asio::buffer(req.data() + at, std::min<std::size_t>(100, req.size() - at)));
  }
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(tls, buffer, res);
  EXPECT_EQ(res.result_int(), 200) << res.body();
  EXPECT_NE(res.body().find("\"allowed\": true"), std::string::npos) << res.body();
  EXPECT_EQ(ask(tls, kAuth), 204);  // the connection goes on
}

// Under mTLS: a certificate of another issuer, or none, is refused and counted; the CA's client
// certificate is answered.
TEST_F(Https, MutualTlsRefusesAForeignCertificateAndCountsIt) {
  serve({}, true);
  for (auto [cert, key] : {std::pair{"other-ca.crt", "other-ca.key"}, std::pair<const char*, const char*>{nullptr, nullptr}}) {
    ssl::context ctx = client(cert, key);
    ssl::stream<tcp::socket> tls(connect(), ctx);
    boost::system::error_code ec;
    tls.handshake(ssl::stream_base::client, ec);  // TLS 1.3: the server's verdict comes after
    EXPECT_EQ(ec ? 0 : ask(tls, kAuth), 0) << (cert ? cert : "no certificate");
  }
  for (int i = 0; i < 100 && handshake_failures() < 2; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(handshake_failures(), 2u);
  ssl::context ctx = client("client.crt", "client.key");
  ssl::stream<tcp::socket> tls(connect(), ctx);
  tls.handshake(ssl::stream_base::client);
  EXPECT_EQ(ask(tls, kAuth), 204);
  EXPECT_EQ(handshake_failures(), 2u);
}

// 2,000 pipelined requests for /metrics (a few kB each) from a client that reads nothing at first,
// with a 4 kB receive buffer: the server's sends fill the socket and wait for room (send(2) gives
// EAGAIN, seen under strace), and every answer arrives once the client reads.
TEST_F(Https, AnswersWaitForRoomWhenTheClientReadsSlowly) {
  serve();
  ssl::context ctx = client();
  tcp::socket s(io_);
  s.open(tcp::v4());
  s.set_option(asio::socket_base::receive_buffer_size(4096));
  s.connect({asio::ip::make_address("127.0.0.1"), server_->port()});
  timeval tv{5, 0};  // a failure, not a hang, should the requests not fit in the buffers
  setsockopt(s.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ssl::stream<tcp::socket> tls(std::move(s), ctx);
  tls.handshake(ssl::stream_base::client);
  constexpr int kRequests = 2000;
  std::string all;
  for (int i = 0; i < kRequests; ++i) all += "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n";
  asio::write(tls, asio::buffer(all));
  std::this_thread::sleep_for(200ms);
  boost::beast::flat_buffer buffer;
  int answered = 0;
  for (boost::system::error_code ec; answered < kRequests; ++answered) {
    http::response<http::string_body> res;
    http::read(tls, buffer, res, ec);
    if (ec || res.result_int() != 200) break;
  }
  EXPECT_EQ(answered, kRequests);
}

// The idle deadline, longer than the request deadline set before it, is the one that ends a
// kept-alive connection. (Of a second: counted from the coarse clock, StreamDeadline.)
TEST_F(Https, AnIdleConnectionIsEndedAtTheIdleDeadline) {
  HttpLimits limits;
  limits.request_timeout = 100ms;
  limits.write_timeout = 100ms;
  limits.idle_timeout = 1000ms;
  serve(limits);
  ssl::context ctx = client();
  ssl::stream<tcp::socket> tls(connect(), ctx);
  tls.handshake(ssl::stream_base::client);
  EXPECT_EQ(ask(tls, kAuth), 204);
  const auto waited = until_closed(tls.next_layer());
  EXPECT_GE(waited, 900ms);
  EXPECT_LT(waited, 3s);
}

}  // namespace
}  // namespace floodgate::server
