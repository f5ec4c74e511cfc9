// floodgate/policy.hpp — a named strategy with its limits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "floodgate/algorithms.hpp"
#include "floodgate/budget.hpp"
#include "floodgate/rate.hpp"

namespace floodgate {

/// The most limits one policy may combine ("2/second; 10/minute; …").
inline constexpr std::size_t kMaxLimitsPerPolicy = 16;

/// Where fixed windows start.
enum class Anchor : std::uint8_t {
  kClock,     ///< epoch-aligned windows [k·P, (k+1)·P) (default)
  kFirstHit,  ///< a window opens at the key's first admitted request
};

/// Whose state a policy counts. Part of the policy's identity (and so of its fingerprint): two
/// policies of different kinds never share state, whatever their names.
enum class PolicyKind : std::uint8_t {
  kNamed,     ///< a policy named by its user (configured, or built in C++): identity {name}
  kOverride,  ///< a named policy's own limits for one key: identity {policy name, key}
  kInline,    ///< a limit given in a request: identity {} (the strategy and limits say it all)
  kRule,      ///< an envoyproxy rate-limit rule: identity {domain, then key and value per level}
  kRuleOverride,  ///< a rule's limit replaced by a request (Envoy's limit override): the rule's
                  ///< identity (RlsRule::identity)
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
  /// Limiter only: budget slices for a key hotter than one store (BudgetOptions; off by default).
  /// Not part of the fingerprint: turning slices on or off keeps the state.
  BudgetOptions budget = {};
};

/// An immutable, validated policy: a name, a strategy and one or more limits that a request must
/// all satisfy ("2/second; 10/minute"). Cheap to copy; safe to share between threads.
class Policy {
 public:
  /// Validates and builds a policy. Errors (InvalidArgument) name the problem: bad limit text,
  /// a burst or shape with a strategy that has none, an empty name, a burst out of range,
  /// more than kMaxLimitsPerPolicy limits, a calendar limit with a strategy other than the
  /// fixed window aligned to the clock (the only one that accepts calendar periods).
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

  /// The same policy with another identity (kind and parts), for policies whose name alone does
  /// not say whose state they count: overrides, inline limits, rate-limit rules. The name (for
  /// headers and messages) is unchanged.
  [[nodiscard]] Policy with_identity(PolicyKind kind, std::vector<std::string> parts) const;

  [[nodiscard]] PolicyKind kind() const noexcept { return kind_; }
  [[nodiscard]] const std::vector<std::string>& identity() const noexcept { return identity_; }

  /// An injective encoding of the policy's identity (kind and parts), strategy, options and
  /// limits: `<kind letter><count>` then `:<length>:<part>` per part, then `|strategy|anchor|shape`
  /// and `|amount/period/capacity` per limit (then `~<unit letter><anchor day>:<length>:<zone>` for
  /// a calendar limit). Every variable-length field is length-prefixed, so
  /// two policies share a fingerprint only if all of these are equal. Two policies decide alike
  /// only if their fingerprints are equal; storages key state by state_id() instead (below).
  [[nodiscard]] const std::string& fingerprint() const noexcept { return fingerprint_; }
  /// A hash of the fingerprint, computed once.
  [[nodiscard]] std::size_t fingerprint_hash() const noexcept { return fingerprint_hash_; }

  /// Whose state this policy reads and writes: the fingerprint without the limits' amounts and
  /// capacities (identity, strategy, anchor, then `|period` per limit and a calendar limit's
  /// calendar as in the fingerprint; length-prefixed parts, so
  /// injective like the fingerprint). Storages key their state by it, so a policy whose amounts or
  /// bursts change (a reload raising or lowering a limit) keeps its usage: the counted hits of the
  /// windows, the consumed level of the buckets (docs/algorithms.md, "When a limit changes"). A
  /// change of strategy, anchor, a period, a calendar (unit, zone, anchor day) or the number of
  /// limits is a new state id: afresh.
  /// Shaping is not part of it (it changes what a decision reports, not what is counted). An
  /// inline limit (PolicyKind::kInline) has no name, so its amounts stay in its state id.
  [[nodiscard]] const std::string& state_id() const noexcept { return state_id_; }
  /// A hash of the state id, computed once (storages use it to find their state quickly).
  [[nodiscard]] std::size_t state_id_hash() const noexcept { return state_id_hash_; }

  /// A number no other Policy object of this process has had, copies included (a copy or an
  /// assignment takes a new one). The state id says whose state a policy shares; this says
  /// which object it is, so that a storage can remember what it found for it.
  [[nodiscard]] std::uint64_t serial() const noexcept { return serial_.value; }

  /// "gcra 10/second; 100/minute" — for logs and error messages.
  [[nodiscard]] std::string describe() const;

 private:
  Policy() = default;
  void set_fingerprint();

  std::string name_;
  PolicyKind kind_ = PolicyKind::kNamed;
  std::vector<std::string> identity_;  // kNamed: {name_}
  Strategy strategy_ = Strategy::kFixedWindow;
  std::vector<Limit> limits_;
  PolicyOptions options_;
  std::string fingerprint_;
  std::size_t fingerprint_hash_ = 0;
  std::string state_id_;
  std::size_t state_id_hash_ = 0;
  struct Serial {  // a new value on construction, copy and assignment
    Serial() noexcept;
    Serial(const Serial&) noexcept : Serial() {}
    Serial& operator=(const Serial&) noexcept;
    std::uint64_t value;
  };
  Serial serial_;
};

}  // namespace floodgate
