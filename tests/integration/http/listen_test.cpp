// One address, one process: a second `floodgate serve` on an address another process listens on is
// refused at start (exit 2, a message naming the address), for HTTP and for gRPC, even when the
// first listener allows SO_REUSEPORT — which would otherwise let the kernel split the connections
// between two processes, each with its own counts.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "server_fixture.hpp"

namespace floodgate::testing {
namespace {

// Runs `command` (stderr joined to stdout) and returns its output; `code` is its exit code.
std::string run_command(const std::string& command, int& code) {
  std::string out;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  char buf[4096];
  std::size_t n = 0;
  while (p != nullptr && (n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = p != nullptr ? pclose(p) : -1;
  code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

// A listening socket on 127.0.0.1 that lets others share its port (SO_REUSEPORT), as a server
// that binds with it does; closed when the test ends.
class ReusePortListener {
 public:
  ReusePortListener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    const int on = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    setsockopt(fd_, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd_, 16) != 0) ADD_FAILURE() << "listen";
    socklen_t len = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~ReusePortListener() { close(fd_); }
  [[nodiscard]] unsigned short port() const { return port_; }

 private:
  int fd_ = -1;
  unsigned short port_ = 0;
};

// `timeout` ends a second server that started after all (the defect): exit 124, not 2.
std::string serve(const std::string& args, int& code) {
  return run_command("timeout 20 " + std::string(FLOODGATE_BINARY) + " serve --threads 2 " + args, code);
}

TEST(Listen, ASecondServeOnTheSamePortIsRefused) {
  ServerProcess first("policies:\n  - {name: a, limit: 10/minute}\n");
  ASSERT_NE(first.port(), 0);
  int code = 0;
  const std::string out = serve("--listen 127.0.0.1:" + std::to_string(first.port()), code);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("127.0.0.1:" + std::to_string(first.port())), std::string::npos) << out;
  EXPECT_NE(out.find("another process is listening there"), std::string::npos) << out;
  // The first one still answers, alone.
  EXPECT_EQ(first.request(http::verb::get, "/healthz").result_int(), 200);
}

TEST(Listen, AnHttpPortSharedWithReusePortIsRefused) {
  ReusePortListener other;
  int code = 0;
  const std::string out = serve("--listen 127.0.0.1:" + std::to_string(other.port()), code);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("another process is listening there"), std::string::npos) << out;
}

TEST(Listen, AGrpcPortSharedWithReusePortIsRefused) {
  ReusePortListener other;
  int code = 0;
  const std::string out = serve("--listen 127.0.0.1:0 --rls-config " + std::string(FLOODGATE_SOURCE_DIR) +
                                    "/examples/envoy/rules --grpc-listen 127.0.0.1:" + std::to_string(other.port()),
                                code);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("cannot listen for gRPC on 127.0.0.1:" + std::to_string(other.port())), std::string::npos) << out;
}

}  // namespace
}  // namespace floodgate::testing
