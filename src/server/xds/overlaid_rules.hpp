// The rules over xDS with the configuration's overlays on them: each push is read with the
// overlays in force, and a reload that changes the overlays reads the last push again with them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/config/overlays.hpp"
#include "server/rls/rules.hpp"
#include "server/xds/sotw.hpp"

namespace floodgate::server {

/// Reads each DiscoveryResponse into rules (rules_from_resources with the overlays) and hands them
/// to `publish` with the response's version and how many overlays matched no rule (each is logged
/// as a warning); keeps the response, so that `set_overlays` can read it again.
///
/// Thread-safety: every member from any thread (one mutex: a push and a reload do not interleave).
class OverlaidRules {
 public:
  /// Checks and installs the rules (an error refuses them: the rules in force stay).
  using Publish = std::function<absl::Status(std::shared_ptr<const RlsConfig> rules, const std::string& version,
                                             std::uint64_t unmatched_overlays)>;

  OverlaidRules(bool merge, std::vector<RlsOverlay> overlays, Publish publish);

  /// A push: read, published, kept. Errors: those of rules_from_resources and of `publish`.
  absl::Status apply(const discoveryv3::DiscoveryResponse& response);

  /// New overlays (a reload): the last push is read again with them and published. On an error
  /// the old overlays and rules stay. Before any push, only kept.
  absl::Status set_overlays(std::vector<RlsOverlay> overlays);

 private:
  absl::Status read_and_publish(const discoveryv3::DiscoveryResponse& response,
                                const std::vector<RlsOverlay>& overlays);

  const bool merge_;
  const Publish publish_;
  std::mutex mu_;
  std::vector<RlsOverlay> overlays_;                        // guarded by mu_
  std::optional<discoveryv3::DiscoveryResponse> last_;      // guarded by mu_: the push in force
};

}  // namespace floodgate::server
