// The gRPC rate-limit service's per-rule counters (see rls/metrics.hpp).
#include "server/rls/metrics.hpp"

#include <fmt/format.h>

namespace floodgate::server {

namespace {

std::string id_of(const std::string& domain, const std::string& rule, const std::string& owner) {
  return fmt::format("{}:{}{}:{}{}:{}", domain.size(), domain, rule.size(), rule, owner.size(), owner);
}

}  // namespace

// mu_ held. A free slot of the pool [first, end), else a never-used one.
std::optional<std::size_t> RlsMetrics::add_series(Series s, std::size_t first, std::size_t end) {
  std::size_t slot = end;
  for (std::size_t f : free_) {
    if (f >= first && f < end) {
      slot = f;
      break;
    }
  }
  std::size_t& next = used_[first == 0 ? 0 : 1];
  if (slot != end) {
    free_.erase(slot);
  } else if (next < end) {
    slot = next++;
  } else {
    return std::nullopt;
  }
  for (auto& c : counters_[slot]) c.store(0, std::memory_order_relaxed);
  slots_.emplace(s.id, slot);
  names_[slot] = std::move(s);
  return slot;
}

std::optional<std::size_t> RlsMetrics::slot(const std::string& domain, const std::string& rule) {
  std::string id = id_of(domain, rule, "");
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = slots_.find(id); it != slots_.end()) return it->second;
  return add_series(Series{domain, rule, "", std::move(id)}, 0, kMaxRuleSeries);
}

std::optional<std::size_t> RlsMetrics::detailed_slot(const std::string& domain, const std::string& rule,
                                                     const std::string& label) {
  std::string id = id_of(domain, label, rule);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = slots_.find(id); it != slots_.end()) return it->second;
  auto s = add_series(Series{domain, label, rule, std::move(id)}, kMaxRuleSeries, kMaxSeries);
  if (!s) overflow_.fetch_add(1, std::memory_order_relaxed);
  return s;
}

void RlsMetrics::retain(const std::vector<std::pair<std::string, std::string>>& rules) {
  absl::flat_hash_set<std::string> keep;
  for (const auto& [domain, rule] : rules) keep.insert(id_of(domain, rule, ""));
  std::lock_guard<std::mutex> lock(mu_);
  for (std::size_t q : quarantine_) free_.insert(q);
  quarantine_.clear();
  for (std::size_t s = 0; s < kMaxSeries; ++s) {
    if (!names_[s]) continue;
    const Series& n = *names_[s];
    const std::string& rule = n.owner.empty() ? n.rule : n.owner;
    if (keep.contains(id_of(n.domain, rule, ""))) continue;
    slots_.erase(n.id);
    names_[s].reset();
    quarantine_.push_back(s);
  }
}

std::size_t RlsMetrics::series() const {
  std::lock_guard<std::mutex> lock(mu_);
  return slots_.size();
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
  out.single("floodgate_rls_abandoned_total", "counter",
             "Calls not decided (and not charged) because the caller had gone: cancelled or past its deadline.",
             abandoned_.load(std::memory_order_relaxed));
  out.single("floodgate_rls_detailed_series_overflow_total", "counter",
             "Hits of detailed_metric values counted under their rule's label: the detailed series bound was reached.",
             overflow_.load(std::memory_order_relaxed));
  std::lock_guard<std::mutex> lock(mu_);
  for (std::size_t c = 0; c < kCounters; ++c) {
    const std::string name = fmt::format("floodgate_rls_{}_total", kNames[c]);
    out.family(name, "counter", kHelp[c]);
    for (std::size_t s = 0; s < kMaxSeries; ++s) {
      if (!names_[s]) continue;
      out.sample(name, {{"domain", names_[s]->domain}, {"rule", names_[s]->rule}},
                 counters_[s][c].load(std::memory_order_relaxed));
    }
  }
}

}  // namespace floodgate::server
