#include "floodgate/limiter.hpp"

#include "absl/strings/str_cat.h"

namespace floodgate {

namespace {
absl::Status check_cost(std::int64_t cost) {
  if (cost < 0 || cost > kMaxAmount) {
    return absl::InvalidArgumentError(
        absl::StrCat("cost ", cost, " is out of range: expected 0 to 2^53"));
  }
  return absl::OkStatus();
}
}  // namespace

Limiter::Limiter(std::shared_ptr<Storage> storage, std::shared_ptr<const Clock> clock)
    : storage_(std::move(storage)), clock_(std::move(clock)) {}

absl::StatusOr<Decision> Limiter::hit(const Policy& policy, std::string_view key,
                                      std::int64_t cost) {
  if (auto s = check_cost(cost); !s.ok()) return s;
  return storage_->apply(policy, key, cost, Effect::kHit, clock_->now());
}

absl::StatusOr<Decision> Limiter::test(const Policy& policy, std::string_view key,
                                       std::int64_t cost) {
  if (auto s = check_cost(cost); !s.ok()) return s;
  return storage_->apply(policy, key, cost, Effect::kTest, clock_->now());
}

absl::StatusOr<Decision> Limiter::stats(const Policy& policy, std::string_view key) {
  return storage_->apply(policy, key, 0, Effect::kTest, clock_->now());
}

absl::Status Limiter::clear(const Policy& policy, std::string_view key) {
  return storage_->clear(policy, key);
}

}  // namespace floodgate
