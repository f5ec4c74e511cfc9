#include "server/metrics.hpp"

#include <fmt/format.h>

namespace floodgate::server {

std::string prometheus_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void ReloadCounters::succeeded() noexcept {
  ok_.fetch_add(1, std::memory_order_relaxed);
  last_ok_.store(true, std::memory_order_relaxed);
}

void ReloadCounters::failed() noexcept {
  failed_.fetch_add(1, std::memory_order_relaxed);
  last_ok_.store(false, std::memory_order_relaxed);
}

std::string ReloadCounters::render() const {
  return fmt::format(
      "# HELP floodgate_config_reloads_total Configuration reloads, installed or refused (the old one kept).\n"
      "# TYPE floodgate_config_reloads_total counter\n"
      "floodgate_config_reloads_total{{result=\"ok\"}} {}\n"
      "floodgate_config_reloads_total{{result=\"failed\"}} {}\n"
      "# HELP floodgate_config_last_reload_ok 1 if the last reload was installed (or none was tried), 0 if refused.\n"
      "# TYPE floodgate_config_last_reload_ok gauge\n"
      "floodgate_config_last_reload_ok {}\n",
      ok_.load(std::memory_order_relaxed), failed_.load(std::memory_order_relaxed),
      last_ok_.load(std::memory_order_relaxed) ? 1 : 0);
}

std::size_t Metrics::slot(const std::string& policy_name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = slots_.find(policy_name); it != slots_.end()) return it->second;
  if (names_.empty()) names_.push_back("other");  // slot 0
  if (names_.size() >= kMaxPolicies) return 0;
  names_.push_back(policy_name);
  slots_.emplace(policy_name, names_.size() - 1);
  return names_.size() - 1;
}

Metrics::PerThread& Metrics::local() { return per_thread_entry(id_, mu_, threads_); }

void Metrics::count(std::size_t slot, Result r) noexcept {
  if (slot >= kMaxPolicies) slot = 0;
  local().decisions[slot][r].fetch_add(1, std::memory_order_relaxed);
}

void Metrics::storage_latency(Micros us) noexcept {
  PerThread& t = local();
  std::size_t b = 0;
  while (b < kLatencyBuckets.size() && us > kLatencyBuckets[b]) ++b;
  t.latency[b].fetch_add(1, std::memory_order_relaxed);
  t.latency_sum_us.fetch_add(static_cast<std::uint64_t>(us < 0 ? 0 : us), std::memory_order_relaxed);
}

void Metrics::http_status(int status) noexcept {
  const int c = status / 100;
  local().status_class[c >= 1 && c <= 5 ? c - 1 : 5].fetch_add(1, std::memory_order_relaxed);
}

std::uint64_t Metrics::total(std::size_t slot, Result r) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::uint64_t n = 0;
  for (const auto& t : threads_) n += t->decisions[slot][r].load(std::memory_order_relaxed);
  return n;
}

std::string Metrics::render(const std::string& extra) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  out += "# HELP floodgate_decisions_total Decisions per policy and result.\n"
         "# TYPE floodgate_decisions_total counter\n";
  static constexpr const char* kResultNames[] = {"allowed", "denied", "shadow_denied", "degraded"};
  for (std::size_t s = 0; s < names_.size(); ++s) {
    for (std::size_t r = 0; r < kResults; ++r) {
      std::uint64_t n = 0;
      for (const auto& t : threads_) n += t->decisions[s][r].load(std::memory_order_relaxed);
      out += fmt::format("floodgate_decisions_total{{policy=\"{}\",result=\"{}\"}} {}\n", prometheus_escape(names_[s]),
                         kResultNames[r], n);
    }
  }
  out += "# HELP floodgate_storage_latency_seconds Time the storage took per decision.\n"
         "# TYPE floodgate_storage_latency_seconds histogram\n";
  std::uint64_t cumulative = 0;
  std::uint64_t sum_us = 0;
  for (std::size_t b = 0; b <= kLatencyBuckets.size(); ++b) {
    for (const auto& t : threads_) cumulative += t->latency[b].load(std::memory_order_relaxed);
    const std::string le = b < kLatencyBuckets.size()
                               ? fmt::format("{:g}", static_cast<double>(kLatencyBuckets[b]) / 1e6)
                               : "+Inf";
    out += fmt::format("floodgate_storage_latency_seconds_bucket{{le=\"{}\"}} {}\n", le, cumulative);
  }
  for (const auto& t : threads_) sum_us += t->latency_sum_us.load(std::memory_order_relaxed);
  out += fmt::format("floodgate_storage_latency_seconds_sum {:g}\n", static_cast<double>(sum_us) / 1e6);
  out += fmt::format("floodgate_storage_latency_seconds_count {}\n", cumulative);
  out += "# HELP floodgate_http_responses_total HTTP responses by status class.\n"
         "# TYPE floodgate_http_responses_total counter\n";
  static constexpr const char* kClasses[] = {"1xx", "2xx", "3xx", "4xx", "5xx", "other"};
  for (std::size_t c = 0; c < 6; ++c) {
    std::uint64_t n = 0;
    for (const auto& t : threads_) n += t->status_class[c].load(std::memory_order_relaxed);
    out += fmt::format("floodgate_http_responses_total{{code=\"{}\"}} {}\n", kClasses[c], n);
  }
  out += "# HELP floodgate_http_connections Open client connections.\n"
         "# TYPE floodgate_http_connections gauge\n";
  out += fmt::format("floodgate_http_connections {}\n", connections_.load(std::memory_order_relaxed));
  out += extra;
  return out;
}

}  // namespace floodgate::server
