// Lease load for bench/concurrency/run.sh, the cheap client: C clients (one thread and one
// keep-alive HTTP/1.1 connection each, split round-robin over the ports) each make R lease
// attempts with a unique reservation id: POST /v1/hit; on 200 hold the lease 0–2 ms (uniform) and
// POST /v1/release; on 429 count the denial and make the next attempt at once. A sampler thread
// polls GET /v1/stats on every port in a tight loop and keeps the largest `limit − remaining` (the
// store's view); the clients count the leases between their 200 and the sending of their release
// (each is still held by the store, so that count can never pass the limit either).
// Prints one JSON line, the same fields as client.py's `run`.
//   lease_load --storage S --ports P1[,P2…] --policy P --key K --limit N --clients C --requests R
//              [--server-pids PID,…]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, ',');) {
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

// One blocking keep-alive connection to 127.0.0.1:port; one request at a time.
class Conn {
 public:
  explicit Conn(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      throw std::runtime_error("cannot connect to port " + std::to_string(port));
    }
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  ~Conn() { ::close(fd_); }

  // Sends the request and returns the status; the body is left in `body`.
  int request(const std::string& method, const std::string& target, const std::string& payload, std::string& body) {
    std::string req = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
                      "Content-Length: " + std::to_string(payload.size()) + "\r\n\r\n" + payload;
    for (size_t sent = 0; sent < req.size();) {
      const ssize_t n = ::send(fd_, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) throw std::runtime_error("send failed");
      sent += static_cast<size_t>(n);
    }
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) fill();
    const int status = std::atoi(buf_.c_str() + 9);
    size_t length = 0;
    for (size_t pos = buf_.find("\r\n"); pos < end; pos = buf_.find("\r\n", pos + 2)) {
      if (strncasecmp(buf_.c_str() + pos + 2, "content-length:", 15) == 0) {
        length = std::strtoul(buf_.c_str() + pos + 17, nullptr, 10);
        break;
      }
    }
    while (buf_.size() < end + 4 + length) fill();
    body.assign(buf_, end + 4, length);
    buf_.erase(0, end + 4 + length);
    return status;
  }

 private:
  void fill() {
    char chunk[4096];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0) throw std::runtime_error("connection closed");
    buf_.append(chunk, static_cast<size_t>(n));
  }
  int fd_;
  std::string buf_;
};

long json_int(const std::string& body, const std::string& field) {
  const size_t at = body.find("\"" + field + "\":");
  if (at == std::string::npos) throw std::runtime_error("no " + field + " in " + body);
  return std::strtol(body.c_str() + at + field.size() + 3, nullptr, 10);
}

double cpu_seconds(const std::vector<std::string>& pids) {
  double ticks = 0;
  for (const auto& pid : pids) {
    std::ifstream f("/proc/" + pid + "/stat");
    std::string stat((std::istreambuf_iterator<char>(f)), {});
    std::istringstream rest(stat.substr(stat.rfind(')') + 2));
    std::string field;
    for (int i = 0; i < 11; ++i) rest >> field;  // state … cmajflt
    long utime = 0, stime = 0;
    rest >> utime >> stime;
    ticks += static_cast<double>(utime + stime);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double own_cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

void update_max(std::atomic<long>& max, long value) {
  long seen = max.load();
  while (value > seen && !max.compare_exchange_weak(seen, value)) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> arg;
  for (int i = 1; i + 1 < argc; i += 2) arg[std::string(argv[i]).substr(2)] = argv[i + 1];
  for (const char* required : {"storage", "ports", "policy", "key", "limit"}) {
    if (!arg.count(required)) {
      std::fprintf(stderr, "lease_load: --%s is required\n", required);
      return 2;
    }
  }
  const auto ports = split(arg["ports"]);
  if (ports.empty()) {
    std::fprintf(stderr, "lease_load: --ports names no port\n");
    return 2;
  }
  const long limit = std::stol(arg["limit"]);
  const int clients = arg.count("clients") ? std::stoi(arg["clients"]) : 64;
  const int requests = arg.count("requests") ? std::stoi(arg["requests"]) : 1000;
  const auto server_pids = split(arg["server-pids"]);
  const std::string& policy = arg["policy"];
  const std::string& key = arg["key"];
  const auto lease_body = [&](const std::string& id) {
    return R"({"policy":")" + policy + R"(","key":")" + key + R"(","reservation":")" + id + "\"}";
  };

  std::atomic<long> held{0}, max_held{0}, max_store{0}, admitted{0}, denied{0}, http{0}, samples{0};
  std::atomic<bool> done{false}, failed{false};
  std::vector<std::unique_ptr<Conn>> conns;
  for (int i = 0; i < clients; ++i) conns.push_back(std::make_unique<Conn>(std::stoi(ports[i % ports.size()])));

  std::thread sampler([&] {
    try {
      std::vector<std::unique_ptr<Conn>> probes;
      for (const auto& p : ports) probes.push_back(std::make_unique<Conn>(std::stoi(p)));
      std::string body;
      const std::string target = "/v1/stats?policy=" + policy + "&key=" + key;
      while (!done.load()) {
        for (auto& probe : probes) {
          if (probe->request("GET", target, "", body) != 200) throw std::runtime_error("/v1/stats: " + body);
          update_max(max_store, limit - json_int(body, "remaining"));
          ++samples;
        }
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "lease_load: sampler: %s\n", e.what());
      failed = true;
    }
  });

  const double servers_cpu0 = cpu_seconds(server_pids);
  const double own_cpu0 = own_cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      try {
        std::mt19937 rng(static_cast<unsigned>(c));
        std::uniform_int_distribution<int> hold_us(0, 2000);
        std::string body;
        for (int a = 0; a < requests; ++a) {
          const std::string lease = "c" + std::to_string(c) + "-" + std::to_string(a);
          const int status = conns[c]->request("POST", "/v1/hit", lease_body(lease), body);
          ++http;
          if (status == 429) {
            ++denied;
            continue;
          }
          if (status != 200) throw std::runtime_error("/v1/hit answered " + std::to_string(status) + ": " + body);
          ++admitted;
          update_max(max_held, ++held);
          std::this_thread::sleep_for(std::chrono::microseconds(hold_us(rng)));
          --held;  // before sending: the store may free it from now on
          const int released = conns[c]->request("POST", "/v1/release", lease_body(lease), body);
          ++http;
          if (released != 200) throw std::runtime_error("/v1/release answered " + std::to_string(released) + ": " + body);
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "lease_load: client %d: %s\n", c, e.what());
        failed = true;
      }
    });
  }
  for (auto& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double own_cpu = own_cpu_seconds() - own_cpu0;
  const double servers_cpu = cpu_seconds(server_pids) - servers_cpu0;
  done = true;
  sampler.join();
  if (failed) return 1;
  std::printf(
      "{\"storage\": \"%s\", \"instances\": %zu, \"clients\": %d, \"limit\": %ld, \"requests\": %ld, "
      "\"admitted\": %ld, \"denied\": %ld, \"denied_then\": \"counted, next attempt at once\", "
      "\"max_outstanding\": %ld, \"max_outstanding_client\": %ld, \"stats_samples\": %ld, \"http_requests\": %ld, "
      "\"seconds\": %.3f, \"ops_per_s\": %.0f, \"attempts_per_s\": %.0f, \"client\": \"c++\", "
      "\"client_cpu_s\": %.2f, \"servers_cpu_s\": %.2f}\n",
      arg["storage"].c_str(), ports.size(), clients, limit, static_cast<long>(clients) * requests, admitted.load(),
      denied.load(), max_store.load(), max_held.load(), samples.load(), http.load(), seconds,
      static_cast<double>(http.load()) / seconds, static_cast<double>(clients) * requests / seconds, own_cpu,
      servers_cpu);
  return 0;
}
