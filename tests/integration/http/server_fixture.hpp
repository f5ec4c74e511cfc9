// Starts the real `floodgate serve` binary on a loopback port and talks HTTP to it.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <gtest/gtest.h>

namespace floodgate::testing {

namespace http = boost::beast::http;
using Response = http::response<http::string_body>;

/// The admin token every ServerProcess is started with (FLOODGATE_ADMIN_TOKEN); `request` sends
/// it unless the test gives an Authorization field of its own.
inline constexpr const char* kTestAdminToken = "e2e-test-admin-token-0123";

/// One `floodgate serve` process with a configuration file of the test's own.
class ServerProcess {
 public:
  /// Writes `yaml` to a fresh directory, starts the binary with it, waits for its port.
  /// `admin_env`: start it with FLOODGATE_ADMIN_TOKEN=kTestAdminToken.
  explicit ServerProcess(const std::string& yaml, std::vector<std::string> extra = {}, bool admin_env = true) {
    dir_ = std::filesystem::temp_directory_path() /
           ("floodgate-e2e-" + std::to_string(getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::create_directories(dir_);
    config_ = (dir_ / "floodgate.yaml").string();
    write_config(yaml);
    const std::string port_file = (dir_ / "port").string();
    const std::string log = (dir_ / "serve.log").string();
    std::vector<std::string> args = {FLOODGATE_BINARY, "serve", "--config", config_,
                                     "--listen", "127.0.0.1:0", "--port-file", port_file};
    if (std::find(extra.begin(), extra.end(), "--threads") == extra.end()) {
      args.insert(args.end(), {"--threads", "2"});
    }
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = fork();
    if (pid_ == 0) {
      FILE* out = freopen(log.c_str(), "w", stderr);
      (void)out;
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      if (admin_env) {
        setenv("FLOODGATE_ADMIN_TOKEN", kTestAdminToken, 1);
      } else {
        unsetenv("FLOODGATE_ADMIN_TOKEN");
      }
      execv(argv[0], argv.data());
      _exit(127);
    }
    for (int i = 0; i < 500 && port_ == 0; ++i) {
      std::ifstream in(port_file);
      if (!(in >> port_)) {
        port_ = 0;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    if (port_ == 0) ADD_FAILURE() << "floodgate serve did not start: " << log_text();
  }

  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // Through a rename: the server's file watcher never reads a half-written file.
  void write_config(const std::string& yaml) const {
    std::ofstream(config_ + ".tmp") << yaml;
    std::filesystem::rename(config_ + ".tmp", config_);
  }
  [[nodiscard]] unsigned short port() const { return port_; }
  [[nodiscard]] const std::filesystem::path& dir() const { return dir_; }
  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] std::string log_text() const {
    std::ifstream in(dir_ / "serve.log");
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  /// Sends SIGTERM and returns the exit status and how long the process took to exit.
  std::pair<int, std::chrono::milliseconds> terminate() {
    const auto start = std::chrono::steady_clock::now();
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return {status, std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start)};
  }

  /// One request on a new connection.
  Response request(http::verb method, const std::string& target, const std::string& body = "",
                   std::vector<std::pair<std::string, std::string>> headers = {}) const {
    boost::asio::io_context ioc;
    boost::beast::tcp_stream stream(ioc);
    stream.connect(boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port_));
    http::request<http::string_body> req{method, target, 11};
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::authorization, std::string("Bearer ") + kTestAdminToken);
    for (auto& [n, v] : headers) req.set(n, v);  // may replace the token (or clear it: "")
    if (!body.empty()) {
      req.set(http::field::content_type, "application/json");
      req.body() = body;
    }
    req.prepare_payload();
    http::write(stream, req);
    boost::beast::flat_buffer buffer;
    Response res;
    http::read(stream, buffer, res);
    boost::beast::error_code ec;
    stream.socket().shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
    return res;
  }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  std::filesystem::path dir_;
  std::string config_;
  pid_t pid_ = -1;
  unsigned short port_ = 0;
};

}  // namespace floodgate::testing
