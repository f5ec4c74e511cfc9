// libFuzzer target for the HTTP API in process: the input is a stream of pipelined HTTP/1.1
// requests, read by Beast's parser with the server's limits and answered by Service::handle on the
// memory store and a manual clock, exactly as an I/O thread would. Never crashes, and every
// response keeps the promises the API makes whatever the request was:
//   - a status between 200 and 599, a Content-Length equal to the body's size;
//   - header values without CR, LF or NUL (no response splitting);
//   - a JSON body (every API answer but /metrics and the dashboard's files) that parses as JSON,
//     which Boost.JSON only does for valid UTF-8;
//   - remaining ≤ limit in the body and in X-RateLimit-*, and every integer header within RFC
//     8941's 15 digits.
// Then the same requests go to the real HTTP server (in process, on loopback), one after another
// on one keep-alive connection to one server and each on a connection of its own to a twin server
// with its own store on the same clock: every answer must be the same (nothing one request
// resolved may reach the next one of its connection), batched (coalesced) or not.
#include <sys/socket.h>
#include <sys/time.h>

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include <chrono>
#include <optional>
#include <sstream>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include "floodgate/memory_storage.hpp"
#include "server/api/service.hpp"
#include "server/http/server.hpp"

namespace {

namespace http = boost::beast::http;
namespace s = floodgate::server;

constexpr const char* kConfig = R"(
storage: memory
inline_limits: true
policies:
  - {name: api, strategy: gcra, limit: 5/minute, burst: 8, key: {header: X-Api-Key}, overrides: {vip: 100/minute}}
  - {name: web, strategy: fixed-window, limit: 2/minute; 3/hour, anchor: first-hit, key: {query: user}}
  - {name: tb, strategy: token-bucket, limit: 10/second, burst: 45000000000, allow: [trusted]}
  - {name: mw, strategy: moving-window, limit: 3/second, shadow: true}
  - {name: sw, strategy: sliding-window-counter, limit: 4/minute, fail: closed, blocked_cache: 10}
  - {name: lb, strategy: leaky-bucket, limit: 9007199254740992/day}
)";

const std::shared_ptr<floodgate::ManualClock>& clock() {
  static const auto instance = std::make_shared<floodgate::ManualClock>(1'700'000'000 * floodgate::kMicrosPerSecond);
  return instance;
}

std::shared_ptr<const s::Config> config(std::string_view batching) {
  auto config = s::parse_config(std::string(kConfig) + "threads: 1\nlisten: 127.0.0.1:0\nbatching: " +
                                    std::string(batching) + "\n",
                                "fuzz.yaml");
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().ToString().c_str());
    std::abort();
  }
  return std::make_shared<const s::Config>(*std::move(config));
}

s::Service& service() {
  static s::Service instance(config("auto"), std::make_shared<floodgate::MemoryStorage>(), clock());
  clock()->advance(250'000);  // time moves between inputs: windows end, buckets refill
  return instance;
}

// A service with its own memory store on the shared clock, behind the real HTTP server.
struct Served {
  explicit Served(std::string_view batching)
      : service(config(batching), std::make_shared<floodgate::MemoryStorage>(), clock()),
        server(service, *service.config()) {
    if (!server.start().ok()) std::abort();
  }
  s::Service service;
  s::HttpServer server;
};

// One client connection; opened again when the server ended the previous one.
class Client {
 public:
  explicit Client(std::uint16_t port) : port_(port) {}
  // The answer without its Date field, or "" when the server answered nothing.
  std::string exchange(const std::string& request) {
    if (!stream_) {
      stream_.emplace(ioc_);
      boost::beast::error_code ec;
      stream_->connect({boost::asio::ip::make_address("127.0.0.1"), port_}, ec);
      if (ec) std::abort();
      // A read that waits 10 s for an answer fails (then the answers differ): a hang is a finding,
      // not a stall. (The stream's own expiry applies to asynchronous operations only.)
      const timeval limit{10, 0};
      setsockopt(stream_->socket().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    }
    boost::beast::error_code ec;
    boost::asio::write(stream_->socket(), boost::asio::buffer(request), ec);
    http::response_parser<http::string_body> parser;
    parser.skip(request.starts_with("HEAD "));  // the answer to HEAD has a Content-Length, no body
    if (!ec) http::read(*stream_, buffer_, parser, ec);
    http::response<http::string_body> res = parser.release();
    if (ec || !res.keep_alive()) {
      stream_.reset();
      buffer_.clear();
    }
    if (ec) return {};
    std::string out = std::to_string(res.result_int()) + "\n";
    // The counters of /metrics and /v1/live count connections, which differ by design: their
    // status only.
    if (res[http::field::content_type].starts_with("text/plain; version=0.0.4") ||
        res.body().find("\"connections\"") != std::string::npos) {
      return out;
    }
    res.erase(http::field::date);
    for (const auto& f : res) out += std::string(f.name_string()) + ": " + std::string(f.value()) + "\n";
    return out + res.body();
  }

 private:
  boost::asio::io_context ioc_;
  std::optional<boost::beast::tcp_stream> stream_;
  boost::beast::flat_buffer buffer_;
  std::uint16_t port_;
};

// The requests of one input on one keep-alive connection to `one`, and each alone to `twin`.
void same_answers(Served& one, Served& twin, const std::vector<std::string>& requests) {
  Client kept(one.server.port());
  for (const std::string& request : requests) {
    Client fresh(twin.server.port());
    const std::string a = kept.exchange(request);
    const std::string b = fresh.exchange(request);
    if (a != b) {
      std::fprintf(stderr, "one connection answered\n%s\n\nfresh connections answered\n%s\n", a.c_str(), b.c_str());
      std::abort();
    }
  }
}

std::int64_t header_int(const s::Response& res, std::string_view name) {
  const auto v = res[boost::beast::string_view(name.data(), name.size())];
  std::int64_t n = -1;
  if (v.empty()) return n;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size() || v.size() > 15) std::abort();
  return n;
}

void check(const s::Request& req, const s::Response& res) {
  if (res.result_int() < 200 || res.result_int() > 599) std::abort();
  for (const auto& field : res) {
    const auto v = field.value();
    if (v.find_first_of(std::string_view("\r\n\0", 3)) != boost::beast::string_view::npos) std::abort();
  }
  if (req.method() == http::verb::head) {  // the GET's Content-Length, no body
    if (!res.body().empty()) std::abort();
  } else if (res.result_int() == 204) {
    if (!res.body().empty()) std::abort();
  } else if (res[http::field::content_length] != std::to_string(res.body().size())) {
    std::abort();
  }
  const std::int64_t limit = header_int(res, "X-RateLimit-Limit");
  const std::int64_t remaining = header_int(res, "X-RateLimit-Remaining");
  (void)header_int(res, "Retry-After");
  if (remaining > limit) std::abort();
  if (res[http::field::content_type] != "application/json" || req.method() == http::verb::head) return;
  boost::system::error_code ec;
  const boost::json::value v = boost::json::parse(res.body(), ec);
  if (ec) std::abort();
  const auto* o = v.if_object();
  if (o == nullptr) std::abort();
  const auto* l = o->if_contains("limit");
  const auto* r = o->if_contains("remaining");
  if (l != nullptr && r != nullptr && l->is_int64() && r->is_int64() && r->as_int64() > l->as_int64()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  s::Service& svc = service();
  boost::beast::flat_buffer buffer;
  if (size == 0) return 0;
  auto in = buffer.prepare(size);
  std::memcpy(in.data(), data, size);
  buffer.commit(size);
  std::vector<std::string> requests;  // as parsed, written again for the servers below
  for (int n = 0; n < 8 && buffer.size() > 0; ++n) {  // pipelined requests, as the server reads them
    http::request_parser<http::string_body> parser;
    parser.header_limit(8192);
    parser.body_limit(64 * 1024);
    parser.eager(true);
    boost::beast::error_code ec;
    const std::size_t used = parser.put(buffer.cdata(), ec);
    if (ec || !parser.is_done()) return 0;
    buffer.consume(used);
    s::Response res;
    svc.handle(parser.get(), res);
    check(parser.get(), res);
    auto& req = parser.get();
    if (req.method() == http::verb::post && req.target() == "/v1/simulate") continue;  // off-thread, slow
    req.set(http::field::host, "127.0.0.1");
    req.erase(http::field::expect);  // no interim 100 answers: one answer per request
    req.prepare_payload();
    std::ostringstream text;
    text << req;
    requests.push_back(text.str());
  }
  static Served plain_one("auto"), plain_twin("auto"), batched_one("on"), batched_twin("on");
  if ((data[0] & 1) != 0) {
    same_answers(batched_one, batched_twin, requests);
  } else {
    same_answers(plain_one, plain_twin, requests);
  }
  return 0;
}
