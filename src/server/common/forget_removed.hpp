// What a reload frees: the stored state of policies that the new configuration no longer has.
// Both services (the HTTP API's policies, the gRPC service's rules) call it after installing.
#pragma once

#include <span>

#include "floodgate/policy.hpp"
#include "floodgate/storage.hpp"

namespace floodgate::server {

/// Frees what `storage` holds for each policy of `old` whose state id (Policy::state_id) no policy
/// of `now` has. Unchanged policies, and policies whose amounts changed, keep their state. Null
/// pointers are skipped. Thread-safety: as Storage::forget.
void forget_removed(Storage& storage, std::span<const Policy* const> old, std::span<const Policy* const> now);

}  // namespace floodgate::server
