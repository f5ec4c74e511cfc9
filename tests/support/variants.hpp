// Every algorithm variant (strategy × fixed-window anchor), for tests and benchmarks that run
// something once per algorithm.
#pragma once

#include <string_view>

#include "floodgate/policy.hpp"

namespace floodgate::testing {

struct Variant {
  const char* name;
  Strategy strategy;
  Anchor anchor;

  /// A policy of this variant (named after it unless `policy_name` is given).
  [[nodiscard]] Policy policy(std::string_view limits, std::string_view policy_name = {}) const {
    PolicyOptions o;
    o.anchor = anchor;
    return Policy::make(std::string(policy_name.empty() ? std::string_view(name) : policy_name),
                        strategy, limits, o)
        .value();
  }
};

inline constexpr Variant kVariants[] = {
    {"fixed-window", Strategy::kFixedWindow, Anchor::kClock},
    {"fixed-window-first-hit", Strategy::kFixedWindow, Anchor::kFirstHit},
    {"moving-window", Strategy::kMovingWindow, Anchor::kClock},
    {"sliding-window-counter", Strategy::kSlidingWindowCounter, Anchor::kClock},
    {"token-bucket", Strategy::kTokenBucket, Anchor::kClock},
    {"leaky-bucket", Strategy::kLeakyBucket, Anchor::kClock},
    {"gcra", Strategy::kGcra, Anchor::kClock},
};

}  // namespace floodgate::testing
