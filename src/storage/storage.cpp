#include "floodgate/storage.hpp"

#include <vector>

namespace floodgate {

// Two calls: every item tested (nothing consumed), then, if no required item is denied, the kHit
// items applied in one batch. Not atomic on its own (see the header).
namespace {
absl::Status no_reservations() {
  return absl::UnimplementedError("this storage keeps no reservations");
}
}  // namespace

absl::StatusOr<Decision> Storage::reserve(const Policy&, std::string_view, std::int64_t, std::string_view, Micros,
                                          Effect, Micros) {
  return no_reservations();
}

absl::StatusOr<Decision> Storage::settle(const Policy&, std::string_view, std::string_view, std::int64_t, Micros) {
  return no_reservations();
}

absl::StatusOr<Decision> Storage::renew(const Policy&, std::string_view, std::string_view, Micros) {
  return no_reservations();
}

absl::StatusOr<bool> Storage::known(const Policy&, std::string_view, std::string_view, Micros) {
  return no_reservations();
}

absl::StatusOr<Decision> Storage::apply_item(const BatchItem& item, Micros now) {
  switch (item.effect) {
    case Effect::kHit:
    case Effect::kTest:
      break;
    case Effect::kReserve:
    case Effect::kReserveOrSettle:
      return reserve(*item.policy, item.key, item.cost, item.reservation, item.ttl, item.effect, now);
    case Effect::kSettle:
      return settle(*item.policy, item.key, item.reservation, item.cost, now);
    case Effect::kRenew:
      return renew(*item.policy, item.key, item.reservation, now);
  }
  return apply(*item.policy, item.key, item.cost, item.effect, now);
}

namespace {
// Settles and renewals are always applied and never deny a group.
bool always_applied(Effect e) noexcept { return e == Effect::kSettle || e == Effect::kRenew; }
}  // namespace

bool Storage::apply_group(std::span<const BatchItem> items, Micros now,
                          std::span<absl::StatusOr<Decision>> out) {
  std::vector<BatchItem> resolved(items.begin(), items.end());
  std::vector<bool> was_either(items.size(), false);  // resolved from kReserveOrSettle
  for (std::size_t i = 0; i < resolved.size(); ++i) {
    BatchItem& r = resolved[i];
    if (r.effect != Effect::kReserveOrSettle) continue;
    was_either[i] = true;
    const absl::StatusOr<bool> k = known(*r.policy, r.key, r.reservation, now);
    if (!k.ok()) {
      for (auto& o : out) o = k.status();
      return false;
    }
    r.effect = *k ? Effect::kSettle : Effect::kReserve;
  }
  items = resolved;
  std::vector<BatchItem> tests(items.begin(), items.end());
  for (BatchItem& t : tests) t.effect = Effect::kTest;
  apply_batch(tests, now, out);
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (!out[i].ok()) return false;
    if (!out[i]->allowed && !items[i].optional && !always_applied(items[i].effect)) return false;
  }
  std::vector<BatchItem> hits;
  std::vector<std::size_t> index;  // hits[j] is items[index[j]]
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (always_applied(items[i].effect) ||
        ((items[i].effect == Effect::kHit || items[i].effect == Effect::kReserve) && out[i]->allowed)) {
      hits.push_back(items[i]);
      index.push_back(i);
    }
  }
  std::vector<absl::StatusOr<Decision>> charged(hits.size());
  apply_batch(hits, now, charged);
  // A required hit refused now (a concurrent request came between the calls) leaves the others
  // charged: reported as not committed, so the caller denies.
  bool committed = true;
  for (std::size_t j = 0; j < hits.size(); ++j) {
    const std::size_t i = index[j];
    if (was_either[i] && charged[j].status().code() == absl::StatusCode::kNotFound) {
      // Envoy's second call of a lease already released (sent again): the state as it is, which
      // the test above read.
      continue;
    }
    if (!charged[j].ok() || (!charged[j]->allowed && !items[i].optional)) committed = false;
    out[i] = std::move(charged[j]);
  }
  return committed;
}

}  // namespace floodgate
