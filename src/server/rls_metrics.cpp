// The gRPC rate-limit service's per-rule counters (see rls_metrics.hpp).
#include "server/rls_metrics.hpp"

#include <fmt/format.h>

namespace floodgate::server {

std::optional<std::size_t> RlsMetrics::slot(const std::string& domain, const std::string& rule) {
  std::string id = domain;
  id.push_back('\0');
  id += rule;
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = slots_.find(id); it != slots_.end()) return it->second;
  if (names_.size() >= kMaxSeries) return std::nullopt;
  names_.emplace_back(domain, rule);
  slots_.emplace(std::move(id), names_.size() - 1);
  return names_.size() - 1;
}

void RlsMetrics::render(PromText& out) const {
  static constexpr const char* kNames[] = {"total_hits", "over_limit", "near_limit", "within_limit",
                                           "shadow_mode", "degraded"};
  static constexpr const char* kHelp[] = {
      "Hits (hits_addend) per rate-limit rule.",
      "Hits over the limit (including shadow-mode rules, which answer OK).",
      "Hits allowed with less than 20% of the limit left.",
      "Hits within the limit.",
      "Hits over the limit of a shadow-mode rule (answered OK).",
      "Hits decided by the rule's fail mode because the storage failed."};
  std::lock_guard<std::mutex> lock(mu_);
  for (std::size_t c = 0; c < kCounters; ++c) {
    const std::string name = fmt::format("floodgate_rls_{}_total", kNames[c]);
    out.family(name, "counter", kHelp[c]);
    for (std::size_t s = 0; s < names_.size(); ++s) {
      out.sample(name, {{"domain", names_[s].first}, {"rule", names_[s].second}},
                 counters_[s][c].load(std::memory_order_relaxed));
    }
  }
}

}  // namespace floodgate::server
