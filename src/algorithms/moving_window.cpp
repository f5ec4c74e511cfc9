// Moving window: the exact log of admitted units in the last period.
// An entry exactly P old still counts: in the window at t means `at ≥ t − P`.
#include <algorithm>

#include "algorithms/arith.hpp"
#include "floodgate/algorithms.hpp"

namespace floodgate::moving_window {

namespace {

// Units in the window at `now`: the total less the entries that have left it (oldest first).
std::int64_t in_window(const State& s, const Limit& l, Micros now) noexcept {
  std::int64_t n = s.total;
  if (s.log.empty() || s.front_at >= now - l.period) return n;  // nothing has left it
  for (auto it = s.log.begin(); it != s.log.end() && it->at < now - l.period; ++it) n -= it->count;
  return n;
}

// The time of the k-th most recent admitted unit, 1 ≤ k ≤ `in_window` units in the window: walks
// from whichever end of the window is nearer.
Micros kth_most_recent(const State& s, std::int64_t k, std::int64_t in_window) noexcept {
  // The newest unit is the newest entry's; with nothing out of the window, the oldest the first's.
  if (k == 1) return s.back_at;
  if (k == in_window && in_window == s.total) return s.front_at;
  std::int64_t seen = 0;
  if (k <= in_window / 2) {
    for (auto it = s.log.rbegin(); it != s.log.rend(); ++it) {
      seen += it->count;
      if (seen >= k) return it->at;
    }
  } else {
    // The k-th most recent is the (in_window − k + 1)-th oldest of the window's units; the units
    // before the window come first in the log.
    const std::int64_t target = s.total - in_window + (in_window - k + 1);
    for (auto it = s.log.begin(); it != s.log.end(); ++it) {
      seen += it->count;
      if (seen >= target) return it->at;
    }
  }
  return s.back_at;
}

// The log's buffer after it fills up.
constexpr std::size_t grown_capacity(std::size_t capacity) noexcept {
  return std::max<std::size_t>(4, capacity * 2);
}

}  // namespace

Decision evaluate(const State& s, const Limit& l, Micros now, std::int64_t cost) noexcept {
  const std::int64_t count = in_window(s, l, now);
  Decision d;
  d.limit = l.amount;
  d.period = l.period;
  d.allowed = cost == 0 || cost <= l.amount - count;  // cost 0: even after a clock step back
  const std::int64_t after = d.allowed ? count + cost : count;
  d.remaining = std::max<std::int64_t>(0, l.amount - after);
  // The newest unit stops counting one microsecond after it is P old.
  if (d.allowed && cost > 0) {
    const Micros newest = s.log.empty() ? now : std::max(now, s.back_at);
    d.reset_after = newest + l.period + 1 - now;
  } else {
    d.reset_after = count > 0 ? s.back_at + l.period + 1 - now : 0;
  }
  if (d.allowed) {
    d.retry_after = 0;
  } else if (cost > l.amount) {
    d.retry_after = kNever;
  } else {
    // Room for `cost` units once the (N − c + 1)-th most recent unit has left the window.
    const Micros e = kth_most_recent(s, l.amount - cost + 1, count);
    d.retry_after = e + l.period + 1 - now;
  }
  return d;
}

void commit(State& s, const Limit& l, Micros now, std::int64_t cost) {
  if (cost == 0) return;
  if (!s.log.empty() && s.front_at < now - l.period) {
    while (!s.log.empty() && s.log.front().at < now - l.period) {
      s.total -= s.log.front().count;
      s.log.pop_front();
    }
    s.front_at = s.log.empty() ? 0 : s.log.front().at;
    if (s.log.empty()) s.back_at = 0;
  }
  s.total += cost;
  if (!s.log.empty() && s.back_at >= now) {
    s.log.back().count += cost;  // same instant (or a clock that stepped back): merge
    return;
  }
  if (s.log.full()) {
    s.log.set_capacity(grown_capacity(s.log.capacity()));
  } else if (shrinks(s.log.size(), s.log.capacity())) {
    s.log.set_capacity(s.log.capacity() / 2);
  }
  if (s.log.empty()) s.front_at = now;
  s.log.push_back(Entry{now, cost});
  s.back_at = now;
}

std::ptrdiff_t commit_resize(const State& s, const Limit& l, Micros now, std::int64_t cost) noexcept {
  if (cost == 0) return 0;
  // What commit does, without doing it: the entries that stay, then a merge, a growth or a shrink.
  std::size_t stay = s.log.size();
  for (auto it = s.log.begin(); stay > 0 && it->at < now - l.period; ++it) --stay;
  if (stay > 0 && s.back_at >= now) return 0;  // merged into the newest
  const std::size_t capacity = s.log.capacity();
  if (stay == capacity) return static_cast<std::ptrdiff_t>(grown_capacity(capacity) - capacity);
  if (shrinks(stay, capacity)) return -static_cast<std::ptrdiff_t>(capacity - capacity / 2);
  return 0;
}

Micros expires_at(const State& s, const Limit& l) noexcept {
  return s.log.empty() ? 0 : s.back_at + l.period + 1;
}

namespace {
// The index in the log of its entry at `at` while `at` is in the window at `now`; -1 otherwise.
std::ptrdiff_t entry_at(const State& s, const Limit& l, Micros now, Micros at) noexcept {
  if (at < now - l.period) return -1;
  // Entries are oldest first, one per instant: the newest ones are the likeliest.
  for (auto i = static_cast<std::ptrdiff_t>(s.log.size()) - 1; i >= 0; --i) {
    const Micros t = s.log[static_cast<std::size_t>(i)].at;
    if (t == at) return i;
    if (t < at) break;
  }
  return -1;
}
}  // namespace

void settle(State& s, const Limit& l, Micros now, Micros at, Micros mark, std::int64_t delta) {
  // The log's total saturates at kMaxCount: a charge adds at most what fits (it is past every
  // amount, so the key stays denied until its units leave the window), and the total stays the
  // sum of the entries. The total still counts entries that have left the window until a commit
  // drops them; the Redis script reads the same total.
  if (delta > 0) delta = std::min(delta, std::max<std::int64_t>(0, detail::kMaxCount - s.total));
  if (delta == 0) return;
  const std::ptrdiff_t i = entry_at(s, l, now, mark > 0 ? mark : at);
  if (i < 0) {
    if (delta > 0) commit(s, l, now, delta);
    return;
  }
  Entry& e = s.log[static_cast<std::size_t>(i)];
  const std::int64_t after = std::max<std::int64_t>(0, e.count + delta);
  s.total += after - e.count;
  if (after > 0) {
    e.count = after;
  } else {
    s.log.erase_at(static_cast<std::size_t>(i));
    s.front_at = s.log.empty() ? 0 : s.log.front().at;  // the first and last times stay in step
    s.back_at = s.log.empty() ? 0 : s.log.back().at;
  }
}

std::size_t settle_capacity(const State& s, const Limit& l, Micros now, Micros at, std::int64_t delta) noexcept {
  // In place, or nothing to add (a saturated total: settle).
  if (delta <= 0 || s.total >= detail::kMaxCount || entry_at(s, l, now, at) >= 0) return s.log.capacity();
  return static_cast<std::size_t>(static_cast<std::ptrdiff_t>(s.log.capacity()) + commit_resize(s, l, now, delta));
}

}  // namespace floodgate::moving_window
