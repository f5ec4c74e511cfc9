// floodgate/policy.hpp — a named strategy with its limits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "floodgate/algorithms.hpp"
#include "floodgate/rate.hpp"

namespace floodgate {

/// The most limits one policy may combine ("2/second; 10/minute; …").
inline constexpr std::size_t kMaxLimitsPerPolicy = 16;

/// Where fixed windows start.
enum class Anchor : std::uint8_t {
  kClock,     ///< epoch-aligned windows [k·P, (k+1)·P) (default)
  kFirstHit,  ///< a window opens at the key's first admitted request
};

/// What a decision is when the storage fails (unreachable, timed out, out of memory, an error
/// reply): the request is let through (`kOpen`, the default) or denied (`kClosed`). Either way the
/// decision is marked `degraded`; an error is never a plain "allowed".
enum class FailMode : std::uint8_t { kOpen, kClosed };

/// Options of a policy beyond its strategy and limits. Defaults are the common case.
struct PolicyOptions {
  /// Fixed window only: where windows start.
  Anchor anchor = Anchor::kClock;
  /// Leaky bucket only: act as a shaper (decisions carry `delay`).
  bool shape = false;
  /// Bucket strategies only: capacity for every limit that does not set its own `burst`
  /// (0 = the limit's amount).
  std::int64_t burst = 0;
  /// What to decide when the storage fails. Not part of the fingerprint: changing it keeps state.
  FailMode fail = FailMode::kOpen;
  /// Limiter only: how many denied keys of this policy a Limiter remembers, so that a key denied
  /// until T is denied again locally until T without a storage round trip (0 = off, the default).
  /// Bounded: a full cache drops expired entries, else the one whose block ends first. A request
  /// is answered locally only if its cost is at least the denied one's. Not part of the
  /// fingerprint. Clears from other processes are not seen until T.
  std::size_t blocked_cache = 0;
};

/// An immutable, validated policy: a name, a strategy and one or more limits that a request must
/// all satisfy ("2/second; 10/minute"). Cheap to copy; safe to share between threads.
class Policy {
 public:
  /// Validates and builds a policy. Errors (InvalidArgument) name the problem: bad limit text,
  /// a burst or shape with a strategy that has none, an empty name, a burst out of range,
  /// more than kMaxLimitsPerPolicy limits.
  static absl::StatusOr<Policy> make(std::string name, Strategy strategy, std::string_view limits,
                                     PolicyOptions options = {});
  static absl::StatusOr<Policy> make(std::string name, Strategy strategy,
                                     std::vector<Limit> limits, PolicyOptions options = {});

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] Strategy strategy() const noexcept { return strategy_; }
  [[nodiscard]] const std::vector<Limit>& limits() const noexcept { return limits_; }
  [[nodiscard]] Anchor anchor() const noexcept { return options_.anchor; }
  [[nodiscard]] bool shape() const noexcept { return options_.shape; }
  [[nodiscard]] FailMode fail_mode() const noexcept { return options_.fail; }
  [[nodiscard]] const PolicyOptions& options() const noexcept { return options_; }

  /// A string that identifies the policy's name, strategy, options and limits. Storages key their
  /// state by it, so a policy whose limits change never reads state written under the old ones.
  [[nodiscard]] const std::string& fingerprint() const noexcept { return fingerprint_; }
  /// A hash of the fingerprint, computed once (storages use it to find their state quickly).
  [[nodiscard]] std::size_t fingerprint_hash() const noexcept { return fingerprint_hash_; }

  /// "gcra 10/second; 100/minute" — for logs and error messages.
  [[nodiscard]] std::string describe() const;

 private:
  Policy() = default;
  std::string name_;
  Strategy strategy_ = Strategy::kFixedWindow;
  std::vector<Limit> limits_;
  PolicyOptions options_;
  std::string fingerprint_;
  std::size_t fingerprint_hash_ = 0;
};

}  // namespace floodgate
