// Max-min fair split of a bucket's tokens by demand, with a dead band.
#include "server/rlqs/fair_split.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace floodgate::server::rlqs {

namespace {

constexpr std::uint64_t kMaxWire = 0xFFFFFFFFULL;  // uint32 fields of TokenBucket

}  // namespace

Shape shape_of(const Rule& rule) noexcept {
  Shape s;
  const double per_second = rule.per_second();
  // The smallest whole interval that holds kTargetTokens, within [1, kMaxFillSeconds].
  const double want = std::ceil(static_cast<double>(kTargetTokens) / per_second);
  s.fill_seconds = static_cast<std::uint32_t>(std::clamp(want, 1.0, static_cast<double>(kMaxFillSeconds)));
  const double total = std::floor(per_second * s.fill_seconds);
  s.total = static_cast<std::uint64_t>(std::clamp(total, 1.0, static_cast<double>(kMaxWire)));
  s.burst = static_cast<std::uint64_t>(std::clamp<std::int64_t>(rule.burst, 1, static_cast<std::int64_t>(kMaxWire)));
  return s;
}

std::vector<std::uint64_t> fair_split(const Shape& shape, std::span<const Claim> claims, const SplitOptions& options) {
  const std::size_t n = claims.size();
  std::vector<std::uint64_t> out(n, 0);
  if (n == 0) return out;
  const double total = static_cast<double>(shape.total);
  const double equal = total / static_cast<double>(n);
  std::vector<double> want(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double d = claims[i].demand;
    if (std::isnan(d) || d < 0) {
      want[i] = equal;
    } else {
      const double w = d * shape.fill_seconds * (1 + std::max(0.0, options.headroom));
      want[i] = std::isfinite(w) ? std::min(w, total) : total;
    }
  }
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return want[a] < want[b]; });
  std::vector<double> give(n, 0);
  double left = total;
  for (std::size_t k = 0; k < n; ++k) {  // water-filling, lowest want first
    const std::size_t i = order[k];
    const double share = left / static_cast<double>(n - k);
    give[i] = std::min(want[i], share);
    left -= give[i];
  }
  const double spread = std::max(0.0, left) / static_cast<double>(n);
  std::uint64_t sum = 0;
  std::vector<std::uint64_t> target(n);
  for (std::size_t i = 0; i < n; ++i) {
    target[i] = static_cast<std::uint64_t>(std::floor(give[i] + spread));
    sum += target[i];
  }
  // Floating error can never lift the floors' sum over the total; if it did, take it back.
  for (std::size_t i = 0; sum > shape.total && i < n; ++i) {
    const std::uint64_t cut = std::min(target[i], sum - shape.total);
    target[i] -= cut;
    sum -= cut;
  }
  std::uint64_t kept_sum = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t held = claims[i].held;
    const double band = std::max(1.0, options.dead_band * static_cast<double>(held));
    const double diff = std::fabs(static_cast<double>(held) - static_cast<double>(target[i]));
    out[i] = held > 0 && diff <= band ? held : target[i];
    kept_sum += out[i];
  }
  if (kept_sum > shape.total) {  // a kept assignment above its target broke the sum: drop those
    for (std::size_t i = 0; i < n; ++i) out[i] = std::min(out[i], target[i]);
  }
  return out;
}

std::uint32_t max_tokens_for(const Shape& shape, std::uint64_t tokens_per_fill) noexcept {
  const long double part = static_cast<long double>(shape.burst) * static_cast<long double>(tokens_per_fill) /
                           static_cast<long double>(std::max<std::uint64_t>(shape.total, 1));
  const long double clamped = std::clamp<long double>(std::floor(part), 1.0L, static_cast<long double>(kMaxWire));
  return static_cast<std::uint32_t>(clamped);
}

}  // namespace floodgate::server::rlqs
