// Pushes read with the overlays in force; a reload's overlays applied to the push in force.
#include "server/xds/overlaid_rules.hpp"

#include <utility>

#include "server/xds/rules_resource.hpp"

namespace floodgate::server {

OverlaidRules::OverlaidRules(bool merge, std::vector<RlsOverlay> overlays, Publish publish)
    : merge_(merge), publish_(std::move(publish)), overlays_(std::move(overlays)) {}

absl::Status OverlaidRules::read_and_publish(const discoveryv3::DiscoveryResponse& response,
                                             const std::vector<RlsOverlay>& overlays) {
  std::vector<std::uint64_t> hits;
  auto rules = rules_from_resources(response.resources(), merge_, overlays, &hits);
  if (!rules.ok()) return rules.status();
  return publish_(*std::move(rules), response.version_info(),
                  report_unmatched_overlays(overlays, hits, response.version_info()));
}

absl::Status OverlaidRules::apply(const discoveryv3::DiscoveryResponse& response) {
  const std::lock_guard lock(mu_);
  if (auto s = read_and_publish(response, overlays_); !s.ok()) return s;
  last_ = response;
  return absl::OkStatus();
}

absl::Status OverlaidRules::set_overlays(std::vector<RlsOverlay> overlays) {
  const std::lock_guard lock(mu_);
  if (overlays == overlays_) return absl::OkStatus();
  if (last_) {
    if (auto s = read_and_publish(*last_, overlays); !s.ok()) return s;
  }
  overlays_ = std::move(overlays);
  return absl::OkStatus();
}

}  // namespace floodgate::server
