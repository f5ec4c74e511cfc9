// Starts the real `floodgate serve` binary on a loopback port and talks HTTP to it.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
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
    drop_connections();
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
    drop_connections();
    const auto start = std::chrono::steady_clock::now();
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return {status, std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start)};
  }

  /// One request: on a new connection, or — with FLOODGATE_TEST_KEEP_ALIVE=1 in the environment,
  /// as CTest runs the suites a second time — on a connection kept alive from an earlier request
  /// of this process (one per thread in use at once; opened again when the server ended it), so
  /// that every test's requests also run one after another on one keep-alive connection and must
  /// get the same answers.
  Response request(http::verb method, const std::string& target, const std::string& body = "",
                   std::vector<std::pair<std::string, std::string>> headers = {}) const {
    auto req = make_request(method, target, body, std::move(headers));
    if (!keep_alive()) {
      Connection c(port_);
      Response res = c.exchange(req);
      c.close();
      return res;
    }
    std::unique_ptr<Connection> c = take_connection();
    Response res;
    if (!c->exchange(req, res)) {  // the server had ended the kept connection: once more, anew
      c = std::make_unique<Connection>(port_);
      res = c->exchange(req);
    }
    if (res.keep_alive()) give_back(std::move(c));
    return res;
  }

  /// A client connection to the server, kept open across requests (`request(c, …)`).
  struct Connection {
    explicit Connection(unsigned short port) : stream(ioc) {
      stream.connect(boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port));
    }
    Response exchange(http::request<http::string_body>& req) {
      http::write(stream, req);
      Response res;
      http::read(stream, buffer, res);
      return res;
    }
    // False when the server had closed the connection before reading `req` (nothing answered).
    bool exchange(http::request<http::string_body>& req, Response& res) {
      boost::beast::error_code ec;
      http::write(stream, req, ec);
      if (ec) return false;
      http::read(stream, buffer, res, ec);
      if (ec == http::error::end_of_stream || ec == boost::asio::error::connection_reset) return false;
      if (ec) throw boost::system::system_error(ec);
      return true;
    }
    void close() {
      boost::beast::error_code ec;
      stream.socket().shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
    }
    boost::asio::io_context ioc;
    boost::beast::tcp_stream stream;
    boost::beast::flat_buffer buffer;
  };
  /// One request on the connection `c` (which the server may end after it: see the answer's
  /// keep_alive()).
  Response request(Connection& c, http::verb method, const std::string& target, const std::string& body = "",
                   std::vector<std::pair<std::string, std::string>> headers = {}) const {
    auto req = make_request(method, target, body, std::move(headers));
    return c.exchange(req);
  }
  [[nodiscard]] Connection connect() const { return Connection(port_); }

  /// Whether `request` keeps connections alive (FLOODGATE_TEST_KEEP_ALIVE=1).
  static bool keep_alive() {
    const char* env = std::getenv("FLOODGATE_TEST_KEEP_ALIVE");
    return env != nullptr && std::string_view(env) == "1";
  }

 private:
  static http::request<http::string_body> make_request(http::verb method, const std::string& target,
                                                       const std::string& body,
                                                       std::vector<std::pair<std::string, std::string>> headers) {
    http::request<http::string_body> req{method, target, 11};
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::authorization, std::string("Bearer ") + kTestAdminToken);
    for (auto& [n, v] : headers) req.set(n, v);  // may replace the token (or clear it: "")
    if (!body.empty()) {
      req.set(http::field::content_type, "application/json");
      req.body() = body;
    }
    req.prepare_payload();
    return req;
  }
  std::unique_ptr<Connection> take_connection() const {
    {
      std::lock_guard<std::mutex> lock(kept_mu_);
      if (!kept_.empty()) {
        std::unique_ptr<Connection> c = std::move(kept_.back());
        kept_.pop_back();
        return c;
      }
    }
    return std::make_unique<Connection>(port_);
  }
  void give_back(std::unique_ptr<Connection> c) const {
    std::lock_guard<std::mutex> lock(kept_mu_);
    kept_.push_back(std::move(c));
  }
  void drop_connections() const {
    std::lock_guard<std::mutex> lock(kept_mu_);
    for (auto& c : kept_) c->close();
    kept_.clear();
  }
  mutable std::mutex kept_mu_;
  mutable std::vector<std::unique_ptr<Connection>> kept_;

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
