// The HTTP API's counters and their Prometheus families.
#include "server/api/metrics.hpp"

#include <fmt/format.h>

#include "absl/container/flat_hash_set.h"

namespace floodgate::server {

void ReloadCounters::succeeded() noexcept {
  ok_.fetch_add(1, std::memory_order_relaxed);
  last_ok_.store(true, std::memory_order_relaxed);
}

void ReloadCounters::failed() noexcept {
  failed_.fetch_add(1, std::memory_order_relaxed);
  last_ok_.store(false, std::memory_order_relaxed);
}

void ReloadCounters::render(PromText& out) const {
  out.family("floodgate_config_reloads_total", "counter",
             "Configuration reloads, installed or refused (the old one kept).");
  out.sample("floodgate_config_reloads_total", {{"result", "ok"}}, ok_.load(std::memory_order_relaxed));
  out.sample("floodgate_config_reloads_total", {{"result", "failed"}}, failed_.load(std::memory_order_relaxed));
  out.single("floodgate_config_last_reload_ok", "gauge",
             "1 if the last reload was installed (or none was tried), 0 if refused.",
             std::uint64_t{last_ok_.load(std::memory_order_relaxed) ? 1u : 0u});
}

std::size_t Metrics::slot(const std::string& policy_name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = slots_.find(policy_name); it != slots_.end()) return it->second;
  if (names_.empty()) names_.push_back("other");  // slot 0
  std::size_t s = names_.size();
  if (!free_.empty()) {
    s = free_.back();
    free_.pop_back();
    for (const auto& t : threads_) {
      for (auto& c : t->decisions[s]) c.store(0, std::memory_order_relaxed);
    }
    names_[s] = policy_name;
  } else if (s < kMaxPolicies) {
    names_.push_back(policy_name);
  } else {
    return 0;
  }
  slots_.emplace(policy_name, s);
  return s;
}

void Metrics::retain(const std::vector<std::string>& keep) {
  const absl::flat_hash_set<std::string> kept(keep.begin(), keep.end());
  std::lock_guard<std::mutex> lock(mu_);
  free_.insert(free_.end(), quarantine_.begin(), quarantine_.end());
  quarantine_.clear();
  for (std::size_t s = 1; s < names_.size(); ++s) {  // slot 0, "other", stays
    if (names_[s].empty() || kept.contains(names_[s])) continue;
    slots_.erase(names_[s]);
    names_[s].clear();
    quarantine_.push_back(s);
  }
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

void Metrics::unauthorized(AdminAuth why) noexcept {
  const std::size_t i = why == AdminAuth::kMissing ? 0 : why == AdminAuth::kWrong ? 1 : 2;
  unauthorized_[i].fetch_add(1, std::memory_order_relaxed);
}

void Metrics::render(PromText& out) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto sum = [&](auto field) {
    std::uint64_t n = 0;
    for (const auto& t : threads_) n += field(*t).load(std::memory_order_relaxed);
    return n;
  };
  out.family("floodgate_decisions_total", "counter", "Decisions per policy and result.");
  static constexpr const char* kResultNames[] = {"allowed", "denied", "shadow_denied", "degraded"};
  for (std::size_t s = 0; s < names_.size(); ++s) {
    if (names_[s].empty()) continue;  // dropped by a reload
    for (std::size_t r = 0; r < kResults; ++r) {
      out.sample("floodgate_decisions_total", {{"policy", names_[s]}, {"result", kResultNames[r]}},
                 sum([&](PerThread& t) -> auto& { return t.decisions[s][r]; }));
    }
  }
  out.family("floodgate_storage_latency_seconds", "histogram", "Time the storage took per call.");
  std::uint64_t cumulative = 0;
  for (std::size_t b = 0; b <= kLatencyBuckets.size(); ++b) {
    cumulative += sum([&](PerThread& t) -> auto& { return t.latency[b]; });
    const std::string le = b < kLatencyBuckets.size()
                               ? fmt::format("{:g}", static_cast<double>(kLatencyBuckets[b]) / 1e6)
                               : "+Inf";
    out.sample("floodgate_storage_latency_seconds_bucket", {{"le", le}}, cumulative);
  }
  const auto sum_us = sum([](PerThread& t) -> auto& { return t.latency_sum_us; });
  out.sample("floodgate_storage_latency_seconds_sum", {}, static_cast<double>(sum_us) / 1e6);
  out.sample("floodgate_storage_latency_seconds_count", {}, cumulative);
  out.family("floodgate_http_responses_total", "counter", "HTTP responses by status class.");
  static constexpr const char* kClasses[] = {"1xx", "2xx", "3xx", "4xx", "5xx", "other"};
  for (std::size_t c = 0; c < 6; ++c) {
    out.sample("floodgate_http_responses_total", {{"code", kClasses[c]}},
               sum([&](PerThread& t) -> auto& { return t.status_class[c]; }));
  }
  out.family("floodgate_http_unauthorized_total", "counter",
             "Admin requests refused: no bearer token, a wrong one, or none configured.");
  static constexpr const char* kReasons[] = {"missing", "wrong", "not_configured"};
  for (std::size_t i = 0; i < unauthorized_.size(); ++i) {
    out.sample("floodgate_http_unauthorized_total", {{"reason", kReasons[i]}},
               unauthorized_[i].load(std::memory_order_relaxed));
  }
  out.single("floodgate_http_connections", "gauge", "Open client connections.",
             connections_.load(std::memory_order_relaxed));
  out.single("floodgate_http_tls_handshake_failures_total", "counter",
             "TLS handshakes on the HTTP listener that failed (mTLS refusals among them).",
             tls_failures_.load(std::memory_order_relaxed));
}

}  // namespace floodgate::server
