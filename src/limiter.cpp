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

Decision degraded_decision(const Policy& policy) noexcept {
  Decision d;
  d.degraded = true;
  d.allowed = policy.fail_mode() == FailMode::kOpen;
  d.limit = policy.limits().front().amount;
  d.period = policy.limits().front().period;
  d.remaining = 0;
  d.reset_after = 0;
  d.retry_after = d.allowed ? 0 : kMicrosPerSecond;
  return d;
}

absl::StatusOr<Decision> Limiter::decide(const Policy& policy, std::string_view key,
                                         std::int64_t cost, Effect effect) {
  if (auto s = check_cost(cost); !s.ok()) return s;
  auto d = storage_->apply(policy, key, cost, effect, clock_->now());
  if (d.ok() || d.status().code() == absl::StatusCode::kInvalidArgument) return d;
  degraded_.fetch_add(1, std::memory_order_relaxed);
  return degraded_decision(policy);
}

absl::StatusOr<Decision> Limiter::hit(const Policy& policy, std::string_view key,
                                      std::int64_t cost) {
  return decide(policy, key, cost, Effect::kHit);
}

absl::StatusOr<Decision> Limiter::test(const Policy& policy, std::string_view key,
                                       std::int64_t cost) {
  return decide(policy, key, cost, Effect::kTest);
}

absl::StatusOr<Decision> Limiter::stats(const Policy& policy, std::string_view key) {
  return decide(policy, key, 0, Effect::kTest);
}

absl::Status Limiter::clear(const Policy& policy, std::string_view key) {
  return storage_->clear(policy, key);
}

}  // namespace floodgate
