#include "floodgate/storage.hpp"

#include <vector>

namespace floodgate {

// Two calls: every item tested (nothing consumed), then, if no required item is denied, the kHit
// items applied in one batch. Not atomic on its own (see the header).
bool Storage::apply_group(std::span<const BatchItem> items, Micros now,
                          std::span<absl::StatusOr<Decision>> out) {
  std::vector<BatchItem> tests(items.begin(), items.end());
  for (BatchItem& t : tests) t.effect = Effect::kTest;
  apply_batch(tests, now, out);
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (!out[i].ok()) return false;
    if (!out[i]->allowed && !items[i].optional) return false;
  }
  std::vector<BatchItem> hits;
  std::vector<std::size_t> index;  // hits[j] is items[index[j]]
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (items[i].effect == Effect::kHit && out[i]->allowed) {
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
    if (!charged[j].ok() || (!charged[j]->allowed && !items[index[j]].optional)) committed = false;
    out[index[j]] = std::move(charged[j]);
  }
  return committed;
}

}  // namespace floodgate
