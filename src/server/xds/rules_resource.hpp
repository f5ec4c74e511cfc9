// Rate-limit rules pushed over xDS: the RateLimitConfig resources of one state-of-the-world
// response, read into an RlsConfig by the same parser as a rules directory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <google/protobuf/any.pb.h>
#include <google/protobuf/repeated_ptr_field.h>

#include "absl/status/statusor.h"
#include "server/config/overlays.hpp"
#include "server/rls/rules.hpp"

namespace floodgate::server {

/// The type URL of the resource: type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig.
extern const char* const kRateLimitConfigTypeUrl;

/// Reads every resource of a response (the whole set of domains: state of the world) into one
/// RlsConfig, each RateLimitConfig as one rules file named `resource "NAME"`, through
/// parse_rls_document: the same checks and messages as a rules directory (units, names, replaces,
/// a domain defined twice unless `merge`, …). floodgate's additions to a rule travel in the
/// descriptor's `metadata` under the key "floodgate" (a Struct with `algorithm`, `burst`, `fail`,
/// `calendar` {time_zone, anchor_day}, `reservation` {id_key, ttl_ms}, `share_threshold`,
/// `value_to_metric`); that key is not returned to Envoy as metadata.
///
/// Errors (InvalidArgument) name the resource and the field: `resource "foo": the rate_limit of
/// "k1_v1": invalid unit "UNKNOWN" (…)`; a resource of another type, one that does not parse, two
/// resources of one name. Pure: no I/O.
///
/// `overlays` (rls.overlays): the first that matches a rule with a rate sets its algorithm, burst,
/// fail, calendar and reservation where metadata.floodgate does not (xds/overlay_apply.hpp: a rule
/// whose own key is the reservation's id moves onto the descriptor above); the rate stays the
/// pushed one. An overlay that the rule does not allow is an error naming the overlay's field. `overlay_hits`
/// (optional) receives how many rules each overlay matched, in order (0: a typo, or a policy
/// that Envoy Gateway does not push now).
absl::StatusOr<std::shared_ptr<const RlsConfig>> rules_from_resources(
    const google::protobuf::RepeatedPtrField<google::protobuf::Any>& resources, bool merge,
    const std::vector<RlsOverlay>& overlays = {}, std::vector<std::uint64_t>* overlay_hits = nullptr);

}  // namespace floodgate::server
