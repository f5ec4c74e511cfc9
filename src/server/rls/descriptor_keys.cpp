#include "server/rls/descriptor_keys.hpp"

#include <iterator>

#include <fmt/format.h>

namespace floodgate::server {

std::string rls_storage_key(std::string_view domain,
                            const ::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor& d,
                            const std::vector<RlsStep>* steps) {
  std::string k = fmt::format("{}:{}", domain.size(), domain);
  for (int i = 0; i < d.entries_size(); ++i) {
    const auto& e = d.entries(i);
    const RlsStep* step = steps != nullptr ? &(*steps)[static_cast<std::size_t>(i)] : nullptr;
    if (step != nullptr && step->shares_wildcard()) {
      fmt::format_to(std::back_inserter(k), "|{}:{}*{}:{}", e.key().size(), e.key(), step->node->config_value.size(),
                     step->node->config_value);
    } else {
      fmt::format_to(std::back_inserter(k), "|{}:{}={}:{}", e.key().size(), e.key(), e.value().size(), e.value());
    }
  }
  return k;
}

std::string rls_envoyproxy_key(std::string_view domain,
                               const ::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor& d,
                               const std::vector<RlsStep>* steps) {
  std::string k(domain);
  k.push_back('_');
  for (int i = 0; i < d.entries_size(); ++i) {
    const auto& e = d.entries(i);
    const RlsStep* step = steps != nullptr ? &(*steps)[static_cast<std::size_t>(i)] : nullptr;
    const bool shared = step != nullptr && step->shares_wildcard();
    k.append(e.key()).append("_").append(shared ? step->node->config_value : e.value()).append("_");
  }
  return k;
}

std::string rls_metric_label(const ::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor& d,
                             const std::vector<RlsStep>* steps, bool detailed) {
  std::string label;
  for (int i = 0; i < d.entries_size(); ++i) {
    const auto& e = d.entries(i);
    if (!label.empty()) label.push_back('.');
    label.append(e.key());
    if (steps == nullptr) {
      label.append("_").append(e.value());
      continue;
    }
    const RlsStep& step = (*steps)[static_cast<std::size_t>(i)];
    const bool shared = step.shares_wildcard();
    std::string_view value = e.value();
    if (shared || (!detailed && step.how == RlsHow::kWildcard && !step.node->value_to_metric)) {
      value = step.node->config_value;
    } else if (!detailed && step.how == RlsHow::kDefault && !step.node->value_to_metric) {
      value = {};
    }
    if (!value.empty() || (detailed && !shared)) label.append("_").append(value);
  }
  return label;
}


}  // namespace floodgate::server
