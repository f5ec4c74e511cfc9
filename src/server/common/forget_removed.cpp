// Freeing the stored state of the policies a reload removed.
#include "server/common/forget_removed.hpp"

#include <string>

#include "absl/container/flat_hash_set.h"

namespace floodgate::server {

void forget_removed(Storage& storage, std::span<const Policy* const> old, std::span<const Policy* const> now) {
  absl::flat_hash_set<std::string> kept;
  for (const Policy* p : now) {
    if (p != nullptr) kept.insert(p->state_id());
  }
  for (const Policy* p : old) {
    if (p != nullptr && !kept.contains(p->state_id())) storage.forget(*p);
  }
}

}  // namespace floodgate::server
