// The cache of inline policies (see api/inline_policies.hpp).
#include "server/api/inline_policies.hpp"

#include <fmt/format.h>

namespace floodgate::server {

absl::StatusOr<std::shared_ptr<const Policy>> InlinePolicies::get(std::string_view limit,
                                                                  std::string_view strategy,
                                                                  std::int64_t burst, std::size_t max) {
  const std::string id = fmt::format("{}|{}|{}", strategy, limit, burst);
  if (auto cached = policies_.find(id)) return cached;
  auto s = parse_strategy(strategy);
  if (!s.ok()) return s.status();
  PolicyOptions o;
  o.burst = burst;
  auto limits = parse_limits(limit);
  if (!limits.ok()) return limits.status();
  std::string name = fmt::format("inline {} {}", to_string(*s), to_string(*limits));
  auto p = Policy::make(std::move(name), *s, *std::move(limits), o);
  if (!p.ok()) return p.status();
  // Its identity is of its own kind: no configured policy, whatever its name, shares its state.
  auto shared = std::make_shared<const Policy>(p->with_identity(PolicyKind::kInline, {}));
  return policies_.add(id, std::move(shared), max);
}

}  // namespace floodgate::server
