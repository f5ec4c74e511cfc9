#include <atomic>
#include <map>
#include <new>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "server/api/live.hpp"
#include "server/common/top_keys.hpp"

namespace floodgate::server {
namespace {

std::uint64_t count_of(const std::vector<TopKeys::Item>& items, std::string_view key) {
  for (const auto& it : items) {
    if (it.key == key) return it.count;
  }
  return 0;
}

TEST(TopKeys, ExactWhileTheKeysFit) {
  TopKeys top(4);
  for (int i = 0; i < 5; ++i) top.add("a");
  for (int i = 0; i < 3; ++i) top.add("b");
  top.add("c");
  const auto items = top.top(10);
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[0].key, "a");
  EXPECT_EQ(items[0].count, 5u);
  EXPECT_EQ(items[0].error, 0u);
  EXPECT_EQ(items[1].key, "b");
  EXPECT_EQ(items[2].key, "c");
  EXPECT_EQ(top.total(), 9u);
  EXPECT_EQ(top.top(1).size(), 1u);
}

// A flood of distinct keys (an attacker rotating keys) cannot grow the summary, and cannot hide a
// key that takes more than total / capacity of the stream: Space-Saving's guarantee.
TEST(TopKeys, BoundedAndFindsHeavyHittersAmongAFlood) {
  TopKeys top(16);
  std::mt19937 rng(3);
  std::map<std::string, std::uint64_t> truth;
  for (int i = 0; i < 20000; ++i) {
    std::string key = (i % 5 == 0) ? "heavy" : (i % 11 == 0 ? "second" : "k" + std::to_string(rng()));
    top.add(key);
    ++truth[key];
  }
  EXPECT_EQ(top.size(), 16u);
  const auto items = top.top(16);
  EXPECT_EQ(items[0].key, "heavy");
  EXPECT_GE(count_of(items, "second"), truth["second"]);
  for (const auto& it : items) {
    const std::uint64_t real = truth[it.key];
    EXPECT_GE(it.count, real) << it.key;               // never an underestimate
    EXPECT_LE(it.count - it.error, real) << it.key;    // the lower bound holds
  }
}

TEST(TopKeys, LongKeysAreCut) {
  TopKeys top(2);
  const std::string long_key(5000, 'x');
  top.add(long_key);
  top.add(long_key);
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top.top(1)[0].key.size(), TopKeys::kMaxKeyBytes);
  EXPECT_EQ(top.top(1)[0].count, 2u);
}

TEST(TopKeys, MergeKeepsTheBounds) {
  TopKeys a(4), b(4);
  std::map<std::string, std::uint64_t> truth;
  auto feed = [&](TopKeys& t, std::string key, int n) {
    for (int i = 0; i < n; ++i) t.add(key);
    truth[key] += n;
  };
  feed(a, "x", 10);
  feed(a, "y", 3);
  feed(b, "x", 5);
  feed(b, "z", 8);
  for (int i = 0; i < 6; ++i) feed(b, "w" + std::to_string(i), 1);  // b overflows
  a.merge(b);
  EXPECT_EQ(a.total(), 10u + 3 + 5 + 8 + 6);
  const auto items = a.top(4);
  ASSERT_LE(items.size(), 4u);
  EXPECT_EQ(items[0].key, "x");
  EXPECT_EQ(items[0].count, 15u);
  for (const auto& it : items) {
    EXPECT_GE(it.count, truth[it.key]) << it.key;
    EXPECT_LE(it.count - it.error, truth[it.key]) << it.key;
  }
}

constexpr Micros kS = kMicrosPerSecond;

TEST(LiveStats, CountsPerSecond) {
  LiveStats live;
  const Micros t0 = 1'000'000 * kS;
  for (int i = 0; i < 3; ++i) live.count(1, LiveStats::kAllowed, "a", t0 + i);
  live.count(1, LiveStats::kDenied, "a", t0 + 1);
  live.count(1, LiveStats::kAllowed, "b", t0 + kS);
  live.count(1, LiveStats::kDegraded, "b", t0 + kS + 5);
  live.count(2, LiveStats::kAllowed, "c", t0);  // another policy
  const auto s = live.read(1, t0 + kS, 5);
  const std::size_t last = LiveStats::kSeconds - 1;
  EXPECT_EQ(s.per_second[LiveStats::kAllowed][last - 1], 3u);
  EXPECT_EQ(s.per_second[LiveStats::kDenied][last - 1], 1u);
  EXPECT_EQ(s.per_second[LiveStats::kAllowed][last], 1u);
  EXPECT_EQ(s.per_second[LiveStats::kDegraded][last], 1u);
  std::uint64_t all = 0;
  for (auto n : s.per_second[LiveStats::kAllowed]) all += n;
  EXPECT_EQ(all, 4u);
  ASSERT_EQ(s.top_denied.size(), 1u);
  EXPECT_EQ(s.top_denied[0].key, "a");
  // Three minutes later the seconds have left the ring and the denials the summary.
  const auto later = live.read(1, t0 + 181 * kS, 5);
  for (const auto& kind : later.per_second) {
    for (auto n : kind) EXPECT_EQ(n, 0u);
  }
  EXPECT_TRUE(later.top_denied.empty());
}

TEST(LiveStats, SumsThreadsExactly) {
  LiveStats live;
  constexpr Micros t0 = 2'000'000 * kS;
  std::vector<std::thread> threads;
  for (int th = 0; th < 4; ++th) {
    threads.emplace_back([&live, th] {
      for (int i = 0; i < 1000; ++i) {
        live.count(3, i % 4 == 0 ? LiveStats::kDenied : LiveStats::kAllowed,
                   th == 0 ? "attacker" : "user-" + std::to_string(i % 50), t0 + (i % 2) * kS);
      }
    });
  }
  for (auto& t : threads) t.join();
  const auto s = live.read(3, t0 + kS, 3);
  const std::size_t last = LiveStats::kSeconds - 1;
  EXPECT_EQ(s.per_second[LiveStats::kAllowed][last - 1] + s.per_second[LiveStats::kAllowed][last], 3000u);
  EXPECT_EQ(s.per_second[LiveStats::kDenied][last - 1] + s.per_second[LiveStats::kDenied][last], 1000u);
  ASSERT_FALSE(s.top_denied.empty());
  EXPECT_EQ(s.top_denied[0].key, "attacker");
  EXPECT_GE(s.top_denied[0].count, 250u);
}

// A thread that counted for a LiveStats that is gone must not find that one's entry when a new
// LiveStats takes the same address (the service's objects come and go in tests and embedders).
TEST(LiveStats, ANewObjectAtTheAddressOfADeadOneStartsEmpty) {
  const Micros t0 = 2'000'000 * kS;
  alignas(LiveStats) unsigned char storage[sizeof(LiveStats)];
  auto* first = new (storage) LiveStats;
  first->count(1, LiveStats::kAllowed, "k", t0);
  first->~LiveStats();
  auto* second = new (storage) LiveStats;
  second->count(1, LiveStats::kAllowed, "k", t0);
  EXPECT_EQ(second->read(1, t0, 1).per_second[LiveStats::kAllowed].back(), 1u);
  second->~LiveStats();
}

// The dashboard reads while the I/O threads count (run under TSan with the concurrency label):
// reads never see more than was counted, and the final read is exact.
TEST(LiveStats, ReadsWhileThreadsCountAcrossSecondsAndMinutes) {
  LiveStats live;
  constexpr Micros t0 = 2'000'000 * kS;
  constexpr int kThreads = 4;
  constexpr int kPerThread = 20'000;
  std::atomic<int> running{kThreads};
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; ++th) {
    threads.emplace_back([&live, &running, th] {
      for (int i = 0; i < kPerThread; ++i) {
        // 100 seconds in all: the rings wrap buckets and the top-N rotates its minutes.
        const Micros now = t0 + static_cast<Micros>(i / 200) * kS;
        live.count(1, i % 2 == 0 ? LiveStats::kDenied : LiveStats::kAllowed,
                   "k" + std::to_string((i + th) % 40), now);
      }
      running.fetch_sub(1);
    });
  }
  const Micros end = t0 + static_cast<Micros>((kPerThread - 1) / 200) * kS;
  int reads = 0;
  while (running.load() > 0 || reads == 0) {
    const auto s = live.read(1, end, 10);
    std::uint64_t allowed = 0;
    for (std::uint64_t n : s.per_second[LiveStats::kAllowed]) allowed += n;
    EXPECT_LE(allowed, static_cast<std::uint64_t>(kThreads * kPerThread / 2));
    for (const auto& item : s.top_denied) EXPECT_GE(item.count, item.error);
    ++reads;
  }
  for (auto& t : threads) t.join();
  const auto s = live.read(1, end, 10);
  std::uint64_t allowed = 0, denied = 0;
  for (std::uint64_t n : s.per_second[LiveStats::kAllowed]) allowed += n;
  for (std::uint64_t n : s.per_second[LiveStats::kDenied]) denied += n;
  EXPECT_EQ(allowed, static_cast<std::uint64_t>(kThreads * kPerThread / 2));
  EXPECT_EQ(denied, static_cast<std::uint64_t>(kThreads * kPerThread / 2));
  EXPECT_EQ(s.per_second[LiveStats::kAllowed].back(), static_cast<std::uint64_t>(kThreads * 100));
  EXPECT_FALSE(s.top_denied.empty());
  EXPECT_GT(reads, 0);
}

}  // namespace
}  // namespace floodgate::server
