// Slow clients against `floodgate serve`: opens N connections that trickle a request header a byte
// at a time (slowloris), measures the latency of normal requests meanwhile, then closes the slow
// ones and reports the server's open file descriptors and resident memory before, during and
// after (from /proc/PID). Loopback only.
//
//   slow_clients PORT SERVER_PID [SLOW_CONNECTIONS=10000] [SECONDS=5]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio.hpp>

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

std::size_t open_fds(int pid) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    ++n;
  }
  return n;
}

std::size_t rss_kib(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoul(line.substr(6));
  }
  return 0;
}

// One slow client: sends "GET /healthz HTTP/1.1\r\nX-Slow: aaaa…" one byte every `gap`.
struct Slow : std::enable_shared_from_this<Slow> {
  Slow(asio::io_context& ioc, tcp::endpoint ep) : socket(ioc), timer(ioc), endpoint(ep) {}
  void start() {
    socket.async_connect(endpoint, [self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->connected = true;
      self->drip();
    });
  }
  void drip() {
    if (!connected || stopped) return;
    timer.expires_after(std::chrono::milliseconds(500));
    timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec || self->stopped) return;
      static const std::string head = "GET /healthz HTTP/1.1\r\nX-Slow: ";
      const char c = self->sent < head.size() ? head[self->sent] : 'a';
      ++self->sent;
      asio::async_write(self->socket, asio::buffer(&self->byte, 1),
                        [self](boost::system::error_code e, std::size_t) {
                          if (e) {
                            self->closed_by_server = true;
                            return;
                          }
                          self->drip();
                        });
      self->byte = c;
    });
  }
  tcp::socket socket;
  asio::steady_timer timer;
  tcp::endpoint endpoint;
  std::size_t sent = 0;
  char byte = 'G';
  bool connected = false;
  bool stopped = false;
  bool closed_by_server = false;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: slow_clients PORT SERVER_PID [SLOW_CONNECTIONS] [SECONDS]\n");
    return 2;
  }
  const auto port = static_cast<unsigned short>(std::stoi(argv[1]));
  const int pid = std::stoi(argv[2]);
  const int slow_count = argc > 3 ? std::stoi(argv[3]) : 10'000;
  const int seconds = argc > 4 ? std::stoi(argv[4]) : 5;
  const tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), port);

  const std::size_t fds_before = open_fds(pid);
  const std::size_t rss_before = rss_kib(pid);

  asio::io_context ioc;
  std::vector<std::shared_ptr<Slow>> slow;
  for (int i = 0; i < slow_count; ++i) {
    slow.push_back(std::make_shared<Slow>(ioc, ep));
    slow.back()->start();
  }
  std::thread io([&] { ioc.run(); });
  std::this_thread::sleep_for(std::chrono::seconds(2));  // let them connect
  const std::size_t fds_during = open_fds(pid);
  const std::size_t rss_during = rss_kib(pid);

  // Normal requests on one keep-alive connection, one at a time.
  std::vector<double> latencies_ms;
  asio::io_context client_ctx;
  tcp::socket client(client_ctx);
  client.connect(ep);
  const std::string request =
      "POST /v1/hit HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 55\r\n\r\n"
      "{\"limit\": \"1000000/second\", \"key\": \"normal-client-key\"}";
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  std::string response;
  int errors = 0;
  while (std::chrono::steady_clock::now() < end) {
    const auto t0 = std::chrono::steady_clock::now();
    boost::system::error_code ec;
    asio::write(client, asio::buffer(request), ec);
    response.clear();
    // Read until the JSON body's closing brace and newline.
    while (!ec && response.find("}\n") == std::string::npos) {
      char buf[4096];
      const std::size_t n = client.read_some(asio::buffer(buf), ec);
      response.append(buf, n);
    }
    if (ec || response.rfind("HTTP/1.1 200", 0) != 0) {
      ++errors;
      client = tcp::socket(client_ctx);
      client.connect(ep);
      continue;
    }
    latencies_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::size_t dropped = 0;
  for (auto& s : slow) dropped += s->closed_by_server ? 1 : 0;
  asio::post(ioc, [&] {
    for (auto& s : slow) {
      s->stopped = true;
      boost::system::error_code ignored;
      s->timer.cancel();
      s->socket.close(ignored);
    }
  });
  io.join();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const std::size_t fds_after = open_fds(pid);
  const std::size_t rss_after = rss_kib(pid);

  std::sort(latencies_ms.begin(), latencies_ms.end());
  auto pct = [&](double p) {
    return latencies_ms.empty() ? 0.0 : latencies_ms[static_cast<std::size_t>(p * static_cast<double>(latencies_ms.size() - 1))];
  };
  std::printf("slow connections: %d (%zu closed by the server while trickling)\n", slow_count, dropped);
  std::printf("normal requests: %zu ok, %d errors; latency p50 %.3f ms, p99 %.3f ms, max %.3f ms\n",
              latencies_ms.size(), errors, pct(0.50), pct(0.99),
              latencies_ms.empty() ? 0.0 : latencies_ms.back());
  std::printf("server fds: before %zu, during %zu, after %zu\n", fds_before, fds_during, fds_after);
  std::printf("server RSS KiB: before %zu, during %zu, after %zu\n", rss_before, rss_during, rss_after);
  return errors == 0 ? 0 : 1;
}
