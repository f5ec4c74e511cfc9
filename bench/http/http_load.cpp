// http_load: a lean HTTP/1.1 load generator for GET /v1/auth, plain or over TLS (GnuTLS), so that
// a benchmark of the service measures the service and not its load generator.
//
// Why not wrk alone: on this two-core machine wrk spends 7.3 µs of CPU per plain request and
// 11.0 µs per HTTPS request (it reads each TLS response with a socket read that finds nothing,
// and OpenSSL 3.0's per-record cost), so with wrk beside the server an HTTPS/HTTP rate ratio
// says more about wrk than about the server. This one reads each response with one recv(2)
// and keeps its own work per request small.
//
//   http_load --port P [--tls] [--connections 64] [--threads 1] [--seconds 10] [--path /v1/auth?policy=web]
// prints "requests/s: N p99_us: N non2xx: N" (any failure ends it with status 2). Each request carries X-Real-IP drawn
// from 10,000 addresses (bench/http/keys.lua's spread). Connections are kept alive, one request
// in flight on each; TLS certificates are not verified (a benchmark on loopback).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gnutls/gnutls.h>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int port = 0;
  bool tls = false;
  int connections = 64;
  int threads = 1;
  double seconds = 10;
  std::string path = "/v1/auth?policy=web";
};

struct Totals {
  std::uint64_t done = 0, non2xx = 0;
  std::vector<std::uint32_t> latency_us;  // one bucket per µs up to 100 ms, the last for beyond
};

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "http_load: %s: %s\n", what, std::strerror(errno));
  std::exit(2);
}

// One keep-alive connection with one request in flight.
struct Conn {
  int fd = -1;
  gnutls_session_t tls = nullptr;
  std::string in;       // bytes received from the socket not yet given to GnuTLS (TLS)
  std::size_t in_at = 0;
  std::string reply;    // the response so far (plain text)
  Clock::time_point sent;
};

ssize_t pull(gnutls_transport_ptr_t p, void* out, std::size_t len) {
  auto& c = *static_cast<Conn*>(p);
  if (c.in_at == c.in.size()) {
    gnutls_transport_set_errno(c.tls, EAGAIN);
    return -1;
  }
  const std::size_t n = std::min(len, c.in.size() - c.in_at);
  std::memcpy(out, c.in.data() + c.in_at, n);
  c.in_at += n;
  return static_cast<ssize_t>(n);
}

ssize_t push(gnutls_transport_ptr_t p, const void* data, std::size_t len) {
  auto& c = *static_cast<Conn*>(p);
  for (;;) {  // requests are small: a full socket buffer is waited out here
    const ssize_t n = ::send(c.fd, data, len, MSG_NOSIGNAL);
    if (n >= 0 || errno != EAGAIN) return n;
    std::this_thread::yield();
  }
}

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) die("socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("connect");
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

// A TLS client session over `c.fd`, its handshake done (blocking), then switched to the
// connection's own buffer (pull) so that one recv(2) feeds a whole response.
void start_tls(Conn& c, gnutls_certificate_credentials_t creds) {
  if (gnutls_init(&c.tls, GNUTLS_CLIENT) < 0 || gnutls_set_default_priority(c.tls) < 0 ||
      gnutls_credentials_set(c.tls, GNUTLS_CRD_CERTIFICATE, creds) < 0) {
    die("gnutls_init");
  }
  gnutls_transport_set_int(c.tls, c.fd);
  int r;
  do {
    r = gnutls_handshake(c.tls);
  } while (r < 0 && gnutls_error_is_fatal(r) == 0);
  if (r < 0) {
    std::fprintf(stderr, "http_load: handshake: %s\n", gnutls_strerror(r));
    std::exit(2);
  }
  gnutls_transport_set_ptr(c.tls, &c);
  gnutls_transport_set_pull_function(c.tls, pull);
  gnutls_transport_set_push_function(c.tls, push);
}

// Where the response in `r` ends (0: not complete yet).
std::size_t response_end(const std::string& r) {
  const std::size_t head = r.find("\r\n\r\n");
  if (head == std::string::npos) return 0;
  std::size_t length = 0;
  for (std::size_t at = r.find('\n'); at < head; at = r.find('\n', at + 1)) {
    if (strncasecmp(r.c_str() + at + 1, "content-length:", 15) == 0) length = std::strtoul(r.c_str() + at + 16, nullptr, 10);
  }
  return r.size() >= head + 4 + length ? head + 4 + length : 0;
}

class Worker {
 public:
  Worker(const Options& o, int connections, gnutls_certificate_credentials_t creds, std::uint64_t seed)
      : o_(o), conns_(static_cast<std::size_t>(connections)), rng_(seed) {
    epoll_ = ::epoll_create1(0);
    if (epoll_ < 0) die("epoll_create1");
    for (Conn& c : conns_) {
      c.fd = connect_to(o.port);
      if (o.tls) start_tls(c, creds);
      epoll_event ev{EPOLLIN, {.ptr = &c}};
      if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, c.fd, &ev) != 0) die("epoll_ctl");
    }
    totals_.latency_us.assign(100'001, 0);
  }

  void run(Clock::time_point until) {
    for (Conn& c : conns_) send_request(c);
    epoll_event events[64];
    while (Clock::now() < until) {
      const int n = ::epoll_wait(epoll_, events, 64, 100);
      for (int i = 0; i < n; ++i) on_readable(*static_cast<Conn*>(events[i].data.ptr));
    }
  }
  const Totals& totals() const { return totals_; }

 private:
  void send_request(Conn& c) {
    std::uniform_int_distribution<int> a(0, 39), b(0, 249);
    const std::string req = "GET " + o_.path + " HTTP/1.1\r\nHost: localhost\r\nX-Real-IP: 10.0." +
                            std::to_string(a(rng_)) + "." + std::to_string(b(rng_)) + "\r\n\r\n";
    c.reply.clear();
    c.sent = Clock::now();
    const ssize_t n = c.tls != nullptr ? gnutls_record_send(c.tls, req.data(), req.size())
                                       : push(&c, req.data(), req.size());
    if (n != static_cast<ssize_t>(req.size())) fail("send");
  }

  void on_readable(Conn& c) {
    char buf[16 * 1024 + 512];
    const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
    if (n <= 0) {
      if (n < 0 && errno == EAGAIN) return;
      fail("the server closed a connection");
    }
    if (c.tls == nullptr) {
      c.reply.append(buf, static_cast<std::size_t>(n));
    } else {
      c.in.erase(0, c.in_at);
      c.in.append(buf, static_cast<std::size_t>(n));
      c.in_at = 0;
      for (;;) {
        const ssize_t got = gnutls_record_recv(c.tls, buf, sizeof buf);
        if (got > 0) {
          c.reply.append(buf, static_cast<std::size_t>(got));
        } else if (got == GNUTLS_E_AGAIN) {
          // Also after a record without data (a session ticket): go on while bytes are left.
          if (c.in_at == c.in.size()) break;
        } else {
          fail(gnutls_strerror(static_cast<int>(got)));
        }
      }
    }
    if (response_end(c.reply) == 0) return;
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - c.sent).count();
    ++totals_.latency_us[static_cast<std::size_t>(std::min<long long>(us, 100'000))];
    ++totals_.done;
    if (c.reply.compare(0, 10, "HTTP/1.1 2") != 0) ++totals_.non2xx;
    send_request(c);
  }

  [[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "http_load: %s\n", what);
    std::exit(2);
  }

  const Options& o_;
  std::vector<Conn> conns_;
  std::mt19937_64 rng_;
  int epoll_ = -1;
  Totals totals_;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--tls") { o.tls = true; continue; }
    if (a == "--port") o.port = std::atoi(v);
    else if (a == "--connections") o.connections = std::atoi(v);
    else if (a == "--threads") o.threads = std::max(1, std::atoi(v));
    else if (a == "--seconds") o.seconds = std::atof(v);
    else if (a == "--path") o.path = v;
    else { std::fprintf(stderr, "http_load: unknown option %s\n", a.c_str()); std::exit(2); }
    ++i;
  }
  if (o.port <= 0) { std::fprintf(stderr, "http_load: --port is required\n"); std::exit(2); }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  gnutls_certificate_credentials_t creds = nullptr;
  if (gnutls_certificate_allocate_credentials(&creds) < 0) die("gnutls credentials");
  std::vector<std::unique_ptr<Worker>> workers;
  for (int t = 0; t < o.threads; ++t) {
    const int share = o.connections / o.threads + (t < o.connections % o.threads ? 1 : 0);
    workers.push_back(std::make_unique<Worker>(o, share, creds, 42 + static_cast<std::uint64_t>(t)));
  }
  const auto start = Clock::now();
  const auto until = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  std::vector<std::thread> threads;
  for (auto& w : workers) threads.emplace_back([&w, until] { w->run(until); });
  for (auto& t : threads) t.join();
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  Totals all;
  all.latency_us.assign(100'001, 0);
  for (auto& w : workers) {
    all.done += w->totals().done;
    all.non2xx += w->totals().non2xx;
    for (std::size_t i = 0; i < all.latency_us.size(); ++i) all.latency_us[i] += w->totals().latency_us[i];
  }
  std::uint64_t seen = 0, p99 = 0;
  for (std::size_t i = 0; i < all.latency_us.size(); ++i) {
    seen += all.latency_us[i];
    if (seen * 100 >= all.done * 99) { p99 = i; break; }
  }
  std::printf("requests/s: %.0f p99_us: %llu non2xx: %llu\n", static_cast<double>(all.done) / took,
              static_cast<unsigned long long>(p99), static_cast<unsigned long long>(all.non2xx));
}
