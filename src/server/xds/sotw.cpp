// The xDS state-of-the-world protocol of one type: subscription, ACK and NACK.
#include "server/xds/sotw.hpp"

#include <algorithm>
#include <cmath>

namespace floodgate::server {

XdsSotw::XdsSotw(const XdsSettings& settings, std::string type_url) : type_url_(std::move(type_url)) {
  node_.set_id(settings.node_id);
  node_.set_user_agent_name("floodgate");
  auto& fields = *node_.mutable_metadata()->mutable_fields();
  for (const auto& [k, v] : settings.node_metadata) fields[k].set_string_value(v);
}

discoveryv3::DiscoveryRequest XdsSotw::request() const {
  discoveryv3::DiscoveryRequest r;
  *r.mutable_node() = node_;
  r.set_type_url(type_url_);
  r.set_version_info(version_);
  return r;
}

discoveryv3::DiscoveryRequest XdsSotw::subscribe() const { return request(); }

discoveryv3::DiscoveryRequest XdsSotw::on_response(const discoveryv3::DiscoveryResponse& response,
                                                   const Apply& apply, absl::Status* error) {
  absl::Status s;
  if (response.type_url() != type_url_) {
    s = absl::InvalidArgumentError("type " + response.type_url() + " was not subscribed to (only " + type_url_ + ")");
  } else {
    s = apply(response);
  }
  discoveryv3::DiscoveryRequest r = request();
  r.set_type_url(response.type_url());
  r.set_response_nonce(response.nonce());
  if (s.ok()) {
    version_ = response.version_info();
    r.set_version_info(version_);
  } else {
    r.mutable_error_detail()->set_code(static_cast<int>(s.code()));
    r.mutable_error_detail()->set_message(std::string(s.message()));
  }
  if (error != nullptr) *error = s;
  return r;
}

std::chrono::milliseconds xds_backoff(const XdsSettings& settings, unsigned failures, double random) {
  const double initial = static_cast<double>(settings.backoff_initial.count());
  const double max = static_cast<double>(settings.backoff_max.count());
  const double exponent = failures == 0 ? 0 : static_cast<double>(std::min(failures - 1, 64u));
  double d = std::min(max, initial * std::pow(settings.backoff_multiplier, exponent));
  d *= 1 + settings.backoff_jitter * (2 * std::clamp(random, 0.0, 1.0) - 1);
  return std::chrono::milliseconds(std::max<std::int64_t>(1, std::llround(d)));
}

}  // namespace floodgate::server
