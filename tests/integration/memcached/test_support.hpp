// Helpers of the memcached integration tests: the fixture's port, storages with a unique key
// prefix, a server of a test's own (to kill, pause or starve), and raw text-protocol commands.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <system_error>

#include <gtest/gtest.h>

#include "storage/memcached/memcached_storage.hpp"
#include "storage/url.hpp"

namespace floodgate::memcached::testing {

inline std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

inline int single_port() {
  return std::stoi(first_line(std::string(FLOODGATE_MEMCACHED_SINGLE_DIR) + "/port"));
}

/// A key prefix no other test (or run) uses.
inline std::string unique_prefix(const std::string& what) {
  static int counter = 0;
  return "t" + std::to_string(getpid()) + "." +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count() % 1000000007) +
         "." + std::to_string(counter++) + "." + what + ":";
}

inline std::string url_for(int port, const std::string& query) {
  return "memcached://127.0.0.1:" + std::to_string(port) + "?" + query;
}

inline std::string single_url(const std::string& query) { return url_for(single_port(), query); }

inline MemcachedOptions options_of(const std::string& url) {
  auto parsed = parse_storage_url(url);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  auto options = parse_memcached_url(*parsed);
  EXPECT_TRUE(options && options->ok()) << url;
  return options && options->ok() ? **options : MemcachedOptions{};
}

inline std::shared_ptr<MemcachedStorage> open_url(const std::string& url) {
  auto storage = MemcachedStorage::open(options_of(url));
  EXPECT_TRUE(storage.ok()) << storage.status();
  return storage.ok() ? *storage : nullptr;
}

/// One text-protocol exchange with a server: sends `request` (with "\r\n"), returns the reply up
/// to and including the line that starts with one of `ends` (or what came before a timeout).
inline std::string raw(int port, const std::string& request, std::initializer_list<const char*> ends) {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{2, 0};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string reply;
  if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const std::string line = request + "\r\n";
    if (write(s, line.data(), line.size()) == static_cast<ssize_t>(line.size())) {
      char buf[4096];
      for (bool done = false; !done;) {
        const ssize_t n = read(s, buf, sizeof buf);
        if (n <= 0) break;
        reply.append(buf, static_cast<std::size_t>(n));
        for (const char* e : ends) {
          const std::string end = e;
          const std::size_t at = reply.rfind("\r\n", reply.size() - 3);
          const std::size_t start = at == std::string::npos ? 0 : at + 2;
          if (reply.size() >= 2 && reply.ends_with("\r\n") && reply.compare(start, end.size(), end) == 0) done = true;
        }
      }
    }
  }
  close(s);
  return reply;
}

/// The remaining TTL of a key in seconds (-1: never expires), or nullopt if it is absent.
inline std::optional<long> ttl_of(int port, const std::string& key) {
  const std::string r = raw(port, "mg " + key + " t", {"HD", "EN", "CLIENT_ERROR", "ERROR"});
  if (!r.starts_with("HD")) return std::nullopt;
  const std::size_t t = r.find(" t");
  return t == std::string::npos ? std::nullopt : std::optional<long>(std::stol(r.substr(t + 2)));
}

/// The CAS of a key (nullopt: absent): changes whenever the value is written.
inline std::optional<std::string> cas_of(int port, const std::string& key) {
  const std::string r = raw(port, "mg " + key + " c", {"HD", "EN", "CLIENT_ERROR", "ERROR"});
  if (!r.starts_with("HD")) return std::nullopt;
  return r;
}

/// A statistic of `stats` ("evictions", "curr_items", …); -1 if missing.
inline long stat(int port, const std::string& name) {
  const std::string r = raw(port, "stats", {"END"});
  const std::string needle = "STAT " + name + " ";
  const std::size_t at = r.find(needle);
  return at == std::string::npos ? -1 : std::stol(r.substr(at + needle.size()));
}

/// A memcached of the test's own (it may kill or pause it); stopped by the destructor and, should
/// the test crash, by the fixture's cleanup.
// Whether every thread under /proc/PID/task is stopped (state T): the field after the name, which
// is in parentheses and may hold spaces. False if the process is gone.
inline bool all_threads_stopped(const std::string& task_dir) {
  int threads = 0;
  std::error_code error;
  for (const auto& t : std::filesystem::directory_iterator(task_dir, error)) {
    const std::string stat = first_line(t.path().string() + "/stat");
    const std::size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] != 'T') return false;
    ++threads;
  }
  return threads > 0;
}

class PrivateServer {
 public:
  explicit PrivateServer(const std::string& args = "") {
    const std::string cmd = std::string(FLOODGATE_MEMCACHED_FIXTURE) + " start-server " +
                            FLOODGATE_MEMCACHED_PRIVATE_DIR + " " + args;
    FILE* p = popen(cmd.c_str(), "r");
    char buf[4096] = {0};
    if (p != nullptr && fgets(buf, sizeof buf, p) != nullptr) {
      std::string line(buf);
      while (!line.empty() && line.back() == '\n') line.pop_back();
      const std::size_t space = line.find(' ');
      port_ = std::atoi(line.substr(0, space).c_str());
      if (space != std::string::npos) dir_ = line.substr(space + 1);
    }
    if (p != nullptr) pclose(p);
  }
  ~PrivateServer() {
    if (!dir_.empty()) {
      const std::string cmd = std::string(FLOODGATE_MEMCACHED_FIXTURE) + " stop " + dir_;
      if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not stop %s\n", dir_.c_str());
    }
  }
  PrivateServer(const PrivateServer&) = delete;
  PrivateServer& operator=(const PrivateServer&) = delete;

  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] std::string url(const std::string& query) const { return url_for(port_, query); }
  void signal(int sig) const {
    const int pid = std::atoi(first_line(dir_ + "/pid").c_str());
    if (pid > 0) ::kill(pid, sig);
  }
  /// SIGSTOP, then waits until every thread of the server has stopped: kill() returns before the
  /// stop takes effect, and a thread still running meanwhile (on another core, or a vCPU the host
  /// has not run yet) could answer one more request. True once all are stopped (within 2 s).
  [[nodiscard]] bool stop() const {
    const std::string pid = first_line(dir_ + "/pid");
    if (std::atoi(pid.c_str()) <= 0) return false;
    signal(SIGSTOP);
    for (int i = 0; i < 200; ++i) {
      if (all_threads_stopped("/proc/" + pid + "/task")) return true;
      usleep(10000);
    }
    return false;
  }
  /// SIGKILL, then waits until the port refuses connections.
  void kill9() const {
    signal(SIGKILL);
    for (int i = 0; i < 500 && !raw(port_, "version", {"VERSION"}).empty(); ++i) usleep(10000);
  }
  /// Starts it again on the same port, same arguments (after kill9); true once it answers.
  [[nodiscard]] bool restart() const {
    const std::string cmd = std::string(FLOODGATE_MEMCACHED_FIXTURE) + " restart " + dir_;
    return std::system(cmd.c_str()) == 0;
  }

 private:
  int port_ = 0;
  std::string dir_;
};

}  // namespace floodgate::memcached::testing
