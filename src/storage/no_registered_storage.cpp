// Built when no other storage kind is compiled in: only memory is known.
#include "storage/url.hpp"

namespace floodgate {

std::optional<absl::StatusOr<std::shared_ptr<Storage>>> open_registered_storage(const StorageUrl&, StorageStart) {
  return std::nullopt;
}

std::optional<absl::StatusOr<PolicyCheck>> check_registered_storage(const StorageUrl&) {
  return std::nullopt;
}

}  // namespace floodgate
