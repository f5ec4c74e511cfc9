// The split of one bucket's global rate across the clients that report it: max-min fair by each
// client's demand, in the whole units Envoy's token bucket reads. Pure functions, no clock.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "server/rlqs/rules.hpp"

namespace floodgate::server::rlqs {

/// A rule's token bucket in Envoy's units. Envoy reads `fill_interval` as whole seconds and refills
/// `tokens_per_fill / fill_interval` tokens per second, so the global rate is `total` tokens per
/// `fill_seconds`, and each client's assignment is a whole number of tokens of that one interval.
/// `fill_seconds` is fixed per rule (Envoy does not see a change of the seconds alone) and chosen
/// so that `total` is about kTargetTokens: the split's granularity is about 1% of the rate. Envoy
/// refills continuously (tokens_per_fill / fill_interval per second, up to max_tokens), so a long
/// interval changes the granularity only, never the burst.
struct Shape {
  std::uint32_t fill_seconds = 1;  ///< 1 to kMaxFillSeconds
  std::uint64_t total = 0;         ///< ⌊rate × fill_seconds⌋, at least 1, at most 2^32 − 1
  std::uint64_t burst = 1;         ///< the rule's burst: the sum of the clients' max_tokens (≥ 1)

  friend bool operator==(const Shape&, const Shape&) = default;
};

inline constexpr std::uint64_t kTargetTokens = 100;

/// The shape of a kLimit rule (whose rate is at least one request a day: rules.cpp refuses less).
Shape shape_of(const Rule& rule) noexcept;

/// What the split knows of one client of a bucket.
struct Claim {
  /// Requests per second the client last reported (allowed + denied); < 0: no history yet.
  double demand = -1;
  /// tokens_per_fill it holds now; 0: none (a new client, or a zero share).
  std::uint64_t held = 0;
};

struct SplitOptions {
  /// A client is given up to its demand × (1 + headroom) before the rest is shared out, so that a
  /// client whose demand grows is seen growing (its denials count as demand too).
  double headroom = 0.1;
  /// A held assignment within max(1 token, dead_band × held) of the new fair share is kept, so
  /// steady clients keep their token bucket (each new one may start full in Envoy).
  double dead_band = 0.1;
};

/// tokens_per_fill for each claim (same order), such that:
/// - the sum is at most `total`, always (a kept assignment that would break it is not kept);
/// - water-filling on wants: a client's want is its demand × fill_seconds × (1 + headroom), or an
///   equal share (total / n) without history; clients wanting less than an equal share of what
///   is left get their want, the others split the rest equally; what no client wants is then
///   spread equally over all;
/// - the dead band of SplitOptions keeps steady assignments unchanged.
/// Hostile demands (huge, infinite) are clamped; a NaN is no history.
std::vector<std::uint64_t> fair_split(const Shape& shape, std::span<const Claim> claims, const SplitOptions& options);

/// max_tokens of a client assigned `tokens_per_fill`: its part of the burst in proportion,
/// ⌊burst × tokens_per_fill / total⌋, at least 1 (Envoy needs > 0) and at most 2^32 − 1. The sum
/// over clients is thus at most burst + the number of clients.
std::uint32_t max_tokens_for(const Shape& shape, std::uint64_t tokens_per_fill) noexcept;

}  // namespace floodgate::server::rlqs
