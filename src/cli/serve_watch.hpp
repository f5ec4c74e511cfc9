// floodgate serve: what makes it reload (SIGHUP, a changed configuration file or rules directory)
// and stop (SIGTERM, SIGINT). Internal to serve_command.cpp.
#pragma once

#include <sys/stat.h>

#include <csignal>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include <boost/asio.hpp>
#include <spdlog/spdlog.h>

namespace floodgate::cli {

inline std::int64_t mtime_of(const std::string& path) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

// A fingerprint of a directory of rate-limit files: the sum of the mtimes and names of its entries
// (a file added, removed or changed changes it).
inline std::int64_t dir_stamp(const std::string& dir) {
  if (dir.empty()) return 0;
  std::error_code ec;
  std::int64_t stamp = mtime_of(dir);
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    stamp += mtime_of(e.path().string()) + static_cast<std::int64_t>(std::hash<std::string>{}(e.path().string()) & 0xffff);
  }
  return stamp;
}

// Runs `control` until SIGTERM/SIGINT (then `drain`): SIGHUP and a change of the file or of the
// rules directory (polled each second) reload.
template <class Reload, class Drain>
void watch_and_wait(boost::asio::io_context& control, boost::asio::signal_set& signals,
                    const std::string& config_path, const std::string& rules_dir, Reload& reload, Drain drain,
                    const std::string& quota_dir = "") {
  boost::asio::steady_timer watch(control);
  std::int64_t seen = mtime_of(config_path);
  std::int64_t seen_rules = dir_stamp(rules_dir) + dir_stamp(quota_dir);
  std::function<void()> on_signal = [&] {
    signals.async_wait([&](const boost::system::error_code& ec, int signo) {
      if (ec) return;
      if (signo == SIGHUP) {
        reload("SIGHUP");
        on_signal();
        return;
      }
      spdlog::info("signal {}: draining", signo);
      watch.cancel();
      drain();
      control.stop();
    });
  };
  std::function<void()> on_tick = [&] {
    watch.expires_after(std::chrono::seconds(1));
    watch.async_wait([&](const boost::system::error_code& ec) {
      if (ec) return;
      const std::int64_t m = mtime_of(config_path);
      const std::int64_t r = dir_stamp(rules_dir) + dir_stamp(quota_dir);
      if (m != seen || r != seen_rules) {
        seen = m;
        seen_rules = r;
        reload("file changed");
      }
      on_tick();
    });
  };
  on_signal();
  if (!config_path.empty() || !rules_dir.empty()) on_tick();
  control.run();
}

}  // namespace floodgate::cli
