// The moving window's log (floodgate/entry_log.hpp) against std::deque as the model: pushes, pops
// from the front, removals from the middle, and capacity changes, in an order that wraps the ring
// around its buffer many times; copies and moves; the capacity kept as a power of two.
#include "floodgate/entry_log.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

namespace floodgate::moving_window {
namespace {

void expect_same(const EntryLog& log, const std::deque<Entry>& model) {
  ASSERT_EQ(log.size(), model.size());
  ASSERT_EQ(log.empty(), model.empty());
  std::size_t i = 0;
  for (const Entry& e : log) {  // forward iteration
    EXPECT_EQ(e.at, model[i].at);
    EXPECT_EQ(e.count, model[i].count);
    EXPECT_EQ(log[i].at, model[i].at);
    ++i;
  }
  EXPECT_EQ(i, model.size());
  std::vector<Micros> backwards;
  for (auto it = log.rbegin(); it != log.rend(); ++it) backwards.push_back(it->at);
  ASSERT_EQ(backwards.size(), model.size());
  for (std::size_t j = 0; j < backwards.size(); ++j) EXPECT_EQ(backwards[j], model[model.size() - 1 - j].at);
  if (!model.empty()) {
    EXPECT_EQ(log.front().at, model.front().at);
    EXPECT_EQ(log.back().at, model.back().at);
  }
  const std::size_t cap = log.capacity();
  EXPECT_GE(cap, log.size());
  if (cap != 0) {
    EXPECT_EQ(cap & (cap - 1), 0u) << "capacity " << cap << " is not a power of two";
  }
}

TEST(EntryLog, MatchesADequeThroughWrapsGrowthAndShrinks) {
  EntryLog log;
  std::deque<Entry> model;
  std::mt19937 rng(7);
  Micros t = 0;
  for (int step = 0; step < 20000; ++step) {
    const auto op = rng() % 10;
    if (op < 5) {  // append, growing when full as the moving window does
      if (log.full()) log.set_capacity(log.capacity() < 4 ? 4 : log.capacity() * 2);
      const Entry e{++t, static_cast<std::int64_t>(rng() % 9 + 1)};
      log.push_back(e);
      model.push_back(e);
    } else if (op < 8 && !model.empty()) {
      log.pop_front();
      model.pop_front();
    } else if (op == 8 && !model.empty()) {
      const std::size_t i = rng() % model.size();
      log.erase_at(i);
      model.erase(model.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (op == 9 && log.capacity() > 4 && log.size() * 4 < log.capacity()) {
      log.set_capacity(log.capacity() / 2);
    }
    if (!model.empty() && step % 7 == 0) {  // writes through front() and back() land in the entries
      log.back().count += 1;
      model.back().count += 1;
    }
    ASSERT_NO_FATAL_FAILURE(expect_same(log, model)) << "step " << step;
  }
}

TEST(EntryLog, CopiesAreDeepAndMovesEmptyTheSource) {
  EntryLog a;
  a.set_capacity(4);
  for (Micros t = 1; t <= 3; ++t) a.push_back({t, 1});
  a.pop_front();
  a.push_back({4, 2});
  a.push_back({5, 3});  // wrapped: slots 1, 2, 3, 0
  EntryLog b = a;
  b.back().count = 9;
  EXPECT_EQ(a.back().count, 3);
  EXPECT_EQ(b.size(), 4u);
  EXPECT_EQ(b.front().at, 2);
  EntryLog c = std::move(b);
  EXPECT_EQ(c.size(), 4u);
  EXPECT_EQ(c.back().count, 9);
  EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  EXPECT_EQ(b.capacity(), 0u);
  b = c;
  EXPECT_EQ(b.size(), 4u);
  c = std::move(a);
  EXPECT_EQ(c.back().count, 3);
}

TEST(EntryLog, CapacityIsAPowerOfTwoAndBounded) {
  EntryLog log;
  EXPECT_EQ(log.capacity(), 0u);
  EXPECT_TRUE(log.full());  // no room: the caller sets a capacity before the first append
  log.set_capacity(5);
  EXPECT_EQ(log.capacity(), 8u);
  log.set_capacity(1);
  EXPECT_EQ(log.capacity(), 1u);
  log.push_back({1, 1});
  EXPECT_TRUE(log.full());
  log.set_capacity(0);  // never below the size
  EXPECT_EQ(log.capacity(), 1u);
  log.pop_front();
  log.set_capacity(0);
  EXPECT_EQ(log.capacity(), 0u);
  EXPECT_THROW(log.set_capacity(EntryLog::kMaxCapacity + 1), std::length_error);
  EXPECT_EQ(log.capacity(), 0u);  // unchanged by the refusal
}

}  // namespace
}  // namespace floodgate::moving_window
