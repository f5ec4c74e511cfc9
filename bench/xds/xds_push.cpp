// Rules changed over xDS under load, measured against the real `floodgate serve`:
//   xds_push FLOODGATE_BINARY [PUSHES=100] [RSS_PUSHES=1000]
// A control plane (tests/integration/xds/control_plane.hpp) pushes PUSHES versions of a domain
// while one client calls ShouldRateLimit 1,000 times a second, each call with two descriptors
// whose limits both encode the version (1e6 + v and 2e6 + v): a call answered from a mix of two
// versions would show two different v. Prints the failed calls, the mixed answers, the time from a
// push to the first call answered by it (median, max), a NACKed update's error text and what
// serves after it, and the server's RSS before and after RSS_PUSHES pushes of changing rules.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

#include "../../tests/integration/xds/control_plane.hpp"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"

namespace {

using namespace floodgate::testing;
namespace rlsv3 = ::envoy::service::ratelimit::v3;
using Clock = std::chrono::steady_clock;

rlconf::RateLimitDescriptor rule(const std::string& key, const std::string& value, std::uint32_t rpu) {
  rlconf::RateLimitDescriptor d;
  d.set_key(key);
  d.set_value(value);
  d.mutable_rate_limit()->set_unit(rlconf::HOUR);
  d.mutable_rate_limit()->set_requests_per_unit(rpu);
  return d;
}

// The load domain at version v, and `extra` domains of 20 rules whose values change with v.
std::vector<rlconf::RateLimitConfig> rules(int v, int extra = 0) {
  std::vector<rlconf::RateLimitConfig> out;
  rlconf::RateLimitConfig load;
  load.set_name("load");
  load.set_domain("load");
  *load.add_descriptors() = rule("a", "", 1'000'000 + v);
  *load.add_descriptors() = rule("b", "", 2'000'000 + v);
  out.push_back(load);
  for (int d = 0; d < extra; ++d) {
    rlconf::RateLimitConfig c;
    c.set_name("d" + std::to_string(d));
    c.set_domain("domain" + std::to_string(d));
    for (int r = 0; r < 20; ++r) *c.add_descriptors() = rule("k" + std::to_string(r), "v" + std::to_string((v + r) % 97), 100 + v);
    out.push_back(c);
  }
  return out;
}

long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: xds_push FLOODGATE_BINARY [PUSHES=100] [RSS_PUSHES=1000]\n";
    return 2;
  }
  const int pushes = argc > 2 ? std::atoi(argv[2]) : 100;
  const int rss_pushes = argc > 3 ? std::atoi(argv[3]) : 1000;
  ControlPlane cp;
  cp.push("1", rules(1));
  const auto dir = std::filesystem::temp_directory_path() / ("xds-push-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string config = (dir / "f.yaml").string(), port_file = (dir / "grpc-port").string();
  std::ofstream(config) << "rls:\n  listen: 127.0.0.1:0\n  xds:\n    server: " << cp.address()
                        << "\n    backoff: {initial_ms: 100, max_ms: 1000}\n";
  const pid_t pid = fork();
  if (pid == 0) {
    std::freopen((dir / "serve.log").c_str(), "w", stderr);
    execl(argv[1], argv[1], "serve", "--config", config.c_str(), "--listen", "127.0.0.1:0", "--grpc-port-file",
          port_file.c_str(), "--threads", "1", static_cast<char*>(nullptr));
    _exit(127);
  }
  int port = 0;
  for (int i = 0; i < 1000 && port == 0; ++i) {
    std::ifstream in(port_file);
    if (!(in >> port)) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (port == 0) {
    std::cerr << "floodgate serve did not start (" << (dir / "serve.log").string() << ")\n";
    return 1;
  }
  auto stub = rlsv3::RateLimitService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));

  // The load: 1,000 calls a second, each with two descriptors.
  std::atomic<bool> stop{false};
  std::atomic<long> calls{0}, failed{0}, mixed{0};
  std::mutex seen_mu;
  std::map<int, Clock::time_point> first_seen;
  std::atomic<int> latest{0};
  std::thread load([&] {
    rlsv3::RateLimitRequest req;
    req.set_domain("load");
    for (const char* k : {"a", "b"}) {
      auto* e = req.add_descriptors()->add_entries();
      e->set_key(k);
      e->set_value("x");
    }
    auto next = Clock::now();
    while (!stop.load()) {
      next += std::chrono::microseconds(1000);
      std::this_thread::sleep_until(next);
      rlsv3::RateLimitResponse res;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
      const grpc::Status s = stub->ShouldRateLimit(&ctx, req, &res);
      calls.fetch_add(1);
      if (!s.ok() || res.statuses_size() != 2 || res.overall_code() != rlsv3::RateLimitResponse::OK) {
        failed.fetch_add(1);
        continue;
      }
      const int va = static_cast<int>(res.statuses(0).current_limit().requests_per_unit()) - 1'000'000;
      const int vb = static_cast<int>(res.statuses(1).current_limit().requests_per_unit()) - 2'000'000;
      if (va != vb) {
        mixed.fetch_add(1);
        continue;
      }
      const auto now = Clock::now();
      std::lock_guard<std::mutex> lock(seen_mu);
      first_seen.emplace(va, now);
      latest.store(va);
    }
  });

  // Pushes under the load.
  std::vector<double> to_use_ms, to_ack_ms;
  const auto t_start = Clock::now();
  for (int v = 2; v <= pushes + 1; ++v) {
    const auto t0 = Clock::now();
    const std::string nonce = cp.push(std::to_string(v), rules(v));
    cp.answer_to(nonce);
    to_ack_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    for (int i = 0; i < 2000 && latest.load() != v; ++i) std::this_thread::sleep_for(std::chrono::microseconds(200));
    std::lock_guard<std::mutex> lock(seen_mu);
    if (first_seen.contains(v)) to_use_ms.push_back(std::chrono::duration<double, std::milli>(first_seen[v] - t0).count());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // A NACKed update: the error text the control plane receives, and what serves after it.
  auto bad = rules(999);
  bad[0].mutable_descriptors(0)->mutable_rate_limit()->set_unit(rlconf::UNKNOWN);
  const std::string nack_nonce = cp.push("bad", bad);
  const auto nack = cp.answer_to(nack_nonce);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const int after_nack = latest.load();
  stop.store(true);
  load.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - t_start).count();

  auto stats = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    char buf[128];
    std::snprintf(buf, sizeof buf, "median %.2f ms, p90 %.2f ms, max %.2f ms (n=%zu)", v[v.size() / 2],
                  v[v.size() * 9 / 10], v.back(), v.size());
    return std::string(buf);
  };
  std::cout << "pushes under load: " << pushes << " in " << seconds << " s; calls " << calls.load() << " ("
            << static_cast<double>(calls.load()) / seconds << "/s), failed " << failed.load() << ", mixed versions " << mixed.load() << "\n";
  std::cout << "push -> ACK received: " << stats(to_ack_ms) << "\n";
  std::cout << "push -> first call answered by the new rules: " << stats(to_use_ms) << "\n";
  std::cout << "NACK: version_info \"" << nack.request.version_info() << "\", nonce " << nack.request.response_nonce()
            << ", error_detail code " << nack.request.error_detail().code() << ": \""
            << nack.request.error_detail().message() << "\"\n";
  std::cout << "after the NACK the calls are answered by version " << after_nack << " (the last applied: "
            << pushes + 1 << ")\n";

  // Memory: pushes of changing rules (1 + 50 domains, 1,001 rules each time).
  const long before = rss_kib(pid);
  for (int i = 0; i < rss_pushes; ++i) {
    const std::string nonce = cp.push("m" + std::to_string(i), rules(10'000 + i, 50));
    cp.answer_to(nonce);
  }
  const long after = rss_kib(pid);
  for (int i = 0; i < rss_pushes; ++i) {
    const std::string nonce = cp.push("n" + std::to_string(i), rules(20'000 + i, 50));
    cp.answer_to(nonce);
  }
  const long after2 = rss_kib(pid);
  std::cout << "RSS: " << before << " KiB before, " << after << " KiB after " << rss_pushes << " pushes of 1,001 changing rules, "
            << after2 << " KiB after " << 2 * rss_pushes << "\n";
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  std::filesystem::remove_all(dir);
  return failed.load() == 0 && mixed.load() == 0 ? 0 : 1;
}
