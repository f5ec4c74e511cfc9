// A tiny RESP server on loopback for tests that need a server to say something a real one cannot
// be made to say on cue (two sentinels that disagree, a deposed master that still says "master").
// Each command (an array of bulk strings, as hiredis sends them) is answered with the raw RESP
// that `answer` returns. One thread accepts and serves the connections, polling every 20 ms.
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace floodgate::redis::testing {

class FakeResp {
 public:
  using Answer = std::function<std::string(const std::vector<std::string>& command)>;

  explicit FakeResp(Answer answer) : answer_(std::move(answer)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listener_, 16) != 0 || ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      std::abort();
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~FakeResp() {
    stop_.store(true);
    thread_.join();
    for (const Conn& c : conns_) ::close(c.fd);
    ::close(listener_);
  }
  FakeResp(const FakeResp&) = delete;
  FakeResp& operator=(const FakeResp&) = delete;

  [[nodiscard]] int port() const { return port_; }

 private:
  struct Conn {
    int fd;
    std::string in;
  };

  void run() {
    while (!stop_.load()) {
      std::vector<pollfd> fds{{listener_, POLLIN, 0}};
      for (const Conn& c : conns_) fds.push_back({c.fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), 20) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        if (const int fd = ::accept(listener_, nullptr, nullptr); fd >= 0) conns_.push_back({fd, {}});
      }
      for (std::size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        Conn& c = conns_[i - 1];
        char buf[4096];
        const ssize_t n = ::read(c.fd, buf, sizeof buf);
        if (n <= 0) {
          ::close(c.fd);
          c.fd = -1;
          continue;
        }
        c.in.append(buf, static_cast<std::size_t>(n));
        std::vector<std::string> command;
        while (take(c.in, command)) {
          const std::string out = answer_(command);
          if (::write(c.fd, out.data(), out.size()) != static_cast<ssize_t>(out.size())) break;
        }
      }
      std::erase_if(conns_, [](const Conn& c) { return c.fd < 0; });
    }
  }

  // Takes one whole command off the front of `in`; false when it is not all there yet.
  static bool take(std::string& in, std::vector<std::string>& command) {
    command.clear();
    if (in.empty() || in[0] != '*') return false;
    std::size_t at = in.find("\r\n");
    if (at == std::string::npos) return false;
    const long count = std::strtol(in.c_str() + 1, nullptr, 10);
    at += 2;
    for (long i = 0; i < count; ++i) {
      const std::size_t eol = in.find("\r\n", at);
      if (eol == std::string::npos || in[at] != '$') return false;
      const auto len = static_cast<std::size_t>(std::strtol(in.c_str() + at + 1, nullptr, 10));
      if (in.size() < eol + 2 + len + 2) return false;
      command.push_back(in.substr(eol + 2, len));
      at = eol + 2 + len + 2;
    }
    in.erase(0, at);
    return true;
  }

  Answer answer_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::vector<Conn> conns_;  // the serving thread only (and the destructor, after it)
  std::thread thread_;
};

/// RESP for a bulk string.
inline std::string bulk(const std::string& s) { return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n"; }

}  // namespace floodgate::redis::testing
