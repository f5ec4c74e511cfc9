// Building RateLimitRequests for the gRPC service's tests: a domain and descriptors, each a list of
// (key, value) entries, in order.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.pb.h"

namespace floodgate::testing {

using RlsEntries = std::vector<std::pair<std::string, std::string>>;

inline envoy::service::ratelimit::v3::RateLimitRequest rls_request(const std::string& domain,
                                                                   const std::vector<RlsEntries>& descriptors,
                                                                   std::uint32_t hits_addend = 0) {
  envoy::service::ratelimit::v3::RateLimitRequest r;
  r.set_domain(domain);
  r.set_hits_addend(hits_addend);
  for (const RlsEntries& d : descriptors) {
    auto* desc = r.add_descriptors();
    for (const auto& [k, v] : d) {
      auto* e = desc->add_entries();
      e->set_key(k);
      e->set_value(v);
    }
  }
  return r;
}

}  // namespace floodgate::testing
