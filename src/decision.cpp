#include "floodgate/decision.hpp"

#include <algorithm>


namespace floodgate {


void combine(Decision& into, const Decision& one, bool first) noexcept {
  if (first) {
    into = one;
    return;
  }
  if (into.balance_count == 0) into.balances[into.balance_count++] = {into.remaining, into.reset_after};
  if (into.balance_count < kMaxLimitBalances) into.balances[into.balance_count++] = {one.remaining, one.reset_after};
  if (one.remaining < into.remaining) {
    into.limit = one.limit;
    into.period = one.period;
    into.remaining = one.remaining;
    into.limit_reset_after = one.reset_after;
  }
  // retry_after: the maximum over the limits that deny (0 for the ones that allow).
  into.retry_after = std::max(into.retry_after, one.retry_after);
  into.reset_after = std::max(into.reset_after, one.reset_after);
  into.delay = std::max(into.delay, one.delay);
  into.allowed = into.allowed && one.allowed;
  into.degraded = into.degraded || one.degraded;
}

}  // namespace floodgate
