// Deterministic concurrency: threads race on a frozen (or jointly advanced) clock and the totals
// admitted are exact — neither over- nor under-admission. Run under ThreadSanitizer (tsan preset).
#include <atomic>
#include <barrier>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "floodgate/algorithms.hpp"
#include "floodgate/limiter.hpp"
#include "floodgate/memory_storage.hpp"
#include "support/lease_model.hpp"
#include "support/variants.hpp"

namespace floodgate {
namespace {

constexpr int kThreads = 8;

using Case = testing::Variant;
constexpr const Case* kCases = testing::kVariants;

Policy make(const Case& c, std::string_view limits) { return c.policy(limits); }

// Every thread hits one key `per_thread` times on a frozen clock; returns the total admitted.
std::int64_t race_one_key(const Policy& p, int per_thread) {
  auto clock = std::make_shared<ManualClock>(1'700'000'000'000'000);
  Limiter limiter(std::make_shared<MemoryStorage>(), clock);
  std::atomic<std::int64_t> admitted{0};
  std::barrier start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      start.arrive_and_wait();
      std::int64_t mine = 0;
      for (int i = 0; i < per_thread; ++i) mine += limiter.hit(p, "hot").value().allowed ? 1 : 0;
      admitted.fetch_add(mine);
    });
  }
  for (auto& th : threads) th.join();
  return admitted.load();
}

TEST(Concurrency, EightThreadsTimesAMillionHitsOnOneKeyAdmitExactlyTheLimit) {
  const Policy p = make(kCases[0], "123457/hour");
  EXPECT_EQ(race_one_key(p, 1'000'000), 123'457);
}

TEST(Concurrency, EveryAlgorithmAdmitsExactlyTheLimitOnOneKey) {
  for (const Case& c : testing::kVariants) {
    EXPECT_EQ(race_one_key(make(c, "5000/hour"), 20'000), 5'000) << c.name;
    EXPECT_EQ(race_one_key(make(c, "300/second; 1000/hour"), 5'000), 300) << c.name;
  }
}

// 8 threads over 10,000 keys: each key admits exactly its limit.
TEST(Concurrency, PerKeyTotalsAreExactOverTenThousandKeys) {
  constexpr int kKeys = 10'000;
  constexpr int kPasses = 10;  // each thread visits every key 10 times: 80 attempts per key
  for (const Case& c : {kCases[0], kCases[3], kCases[6]}) {
    auto clock = std::make_shared<ManualClock>(1'700'000'000'000'000);
    Limiter limiter(std::make_shared<MemoryStorage>(), clock);
    const Policy p = make(c, "37/minute");
    std::vector<std::string> keys;
    for (int k = 0; k < kKeys; ++k) keys.push_back("user-" + std::to_string(k));
    std::vector<std::vector<int>> per_thread(kThreads, std::vector<int>(kKeys));
    std::barrier start(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        start.arrive_and_wait();
        for (int pass = 0; pass < kPasses; ++pass) {
          for (int k = 0; k < kKeys; ++k) {
            const int key = (k * 7919 + t * 1009) % kKeys;  // threads walk in different orders
            per_thread[t][key] += limiter.hit(p, keys[key]).value().allowed ? 1 : 0;
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    int wrong = 0;
    for (int k = 0; k < kKeys; ++k) {
      int total = 0;
      for (int t = 0; t < kThreads; ++t) total += per_thread[t][k];
      wrong += total == 37 ? 0 : 1;
    }
    EXPECT_EQ(wrong, 0) << c.name;
  }
}

// Threads and a ticking clock: a bucket of 100/s over 2 simulated seconds admits 100 + 200.
TEST(Concurrency, AdvancingClockAdmitsExactlyTheRefills) {
  auto clock = std::make_shared<ManualClock>(1'700'000'000'000'000);
  Limiter limiter(std::make_shared<MemoryStorage>(), clock);
  const Policy p = Policy::make("tick", Strategy::kTokenBucket, "100/second").value();
  std::atomic<std::int64_t> admitted{0};
  std::barrier tick(kThreads + 1);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int step = 0; step <= 200; ++step) {
        tick.arrive_and_wait();  // the clock is set for this step
        for (int i = 0; i < 20; ++i) admitted.fetch_add(limiter.hit(p, "k").value().allowed ? 1 : 0);
        tick.arrive_and_wait();  // everyone done before the clock moves
      }
    });
  }
  for (int step = 0; step <= 200; ++step) {
    clock->set(1'700'000'000'000'000 + step * 10'000);  // 10 ms steps: one token each
    tick.arrive_and_wait();
    tick.arrive_and_wait();
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(admitted.load(), 100 + 200);
}

// A thread that keeps deciding on one key goes straight to the record it remembers, while other
// threads evict and reuse records (8 keys at most, a stream of new keys) and clear the key: no
// decision may land on a record that now holds another key. Every new key, hit once, reports a
// fresh state; the hot key's remaining only falls, or starts again after it was evicted or cleared.
TEST(Concurrency, ARememberedRecordReusedForAnotherKeyNeverMixesTwoKeys) {
  for (const Case& c : testing::kVariants) {
    auto clock = std::make_shared<ManualClock>(1'700'000'000'000'000);
    MemoryStorageOptions small;
    small.max_keys = 8;
    small.shards = 1;
    Limiter limiter(std::make_shared<MemoryStorage>(small), clock);
    const Policy p = make(c, "1000000/hour");
    const std::int64_t fresh = limiter.test(p, "nobody", 1).value().remaining - 1;
    std::atomic<bool> done{false};
    std::atomic<int> new_keys{0}, clears{0};
    int hot_rises = 0, new_keys_not_fresh = 0;
    std::thread hot([&] {
      std::int64_t last = fresh + 1;
      // Until the others have run alongside for a while, however the threads are scheduled.
      for (int i = 0; i < 40'000 || clears.load() < 100 || new_keys.load() < 1'000; ++i) {
        const std::int64_t r = limiter.hit(p, "hot").value().remaining;
        hot_rises += (r > last && r != fresh) ? 1 : 0;
        last = r;
      }
      done = true;
    });
    std::thread churn([&] {
      for (int k = 0; !done; k = ++new_keys) {
        new_keys_not_fresh += limiter.hit(p, "new-" + std::to_string(k)).value().remaining == fresh ? 0 : 1;
      }
    });
    std::thread clearer([&] {
      for (; !done; ++clears) {
        ASSERT_TRUE(limiter.clear(p, "hot").ok());
        std::this_thread::yield();
      }
    });
    hot.join();
    churn.join();
    clearer.join();
    EXPECT_EQ(new_keys_not_fresh, 0) << c.name;
    EXPECT_EQ(hot_rises, 0) << c.name;
    EXPECT_GE(clears.load(), 100) << c.name;
  }
}


// Threads growing and dropping moving-window logs at once: the bytes they hold never
// pass the bound, and the accounting of every buffer's growth and release adds up to nothing
// once the keys are gone (a lost update would leave bytes held, or let the logs pass the bound).
TEST(Concurrency, MovingWindowLogsKeepTheirBoundAndTheirCount) {
  MemoryStorageOptions o;
  o.max_log_bytes = 2048 * sizeof(moving_window::Entry);
  MemoryStorage storage(o);
  const Policy p = Policy::make("log", Strategy::kMovingWindow, "1000000/second").value();
  std::atomic<std::int64_t> refused{0};
  std::atomic<std::size_t> most{0};
  std::barrier start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int i = 0; i < 20'000; ++i) {
        const std::string key = "k" + std::to_string(t) + "-" + std::to_string(i % 16);
        const Micros now = Micros{i} * 10;  // a new instant each time: every hit is an entry
        const auto d = storage.apply(p, key, 1, Effect::kHit, now);
        if (!d.ok()) {
          ASSERT_EQ(d.status().code(), absl::StatusCode::kResourceExhausted) << d.status();
          refused.fetch_add(1);
        }
        if (i % 997 == 0) {
          ASSERT_TRUE(storage.clear(p, key).ok());
        }
        // A key made and dropped at once: many concurrent growths and releases.
        const std::string churn = "c" + std::to_string(t);
        if (storage.apply(p, churn, 1, Effect::kHit, now).ok()) {
          ASSERT_TRUE(storage.clear(p, churn).ok());
        } else {
          refused.fetch_add(1);
        }
        std::size_t seen = storage.log_bytes();
        std::size_t was = most.load();
        while (seen > was && !most.compare_exchange_weak(was, seen)) {
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(most.load(), o.max_log_bytes);
  EXPECT_GT(refused.load(), 0) << "the bound was reached";
  EXPECT_EQ(static_cast<std::uint64_t>(refused.load()), storage.log_refusals());
  storage.forget(p);
  EXPECT_EQ(storage.log_bytes(), 0u);
}

}  // namespace
}  // namespace floodgate

namespace floodgate {
namespace {

// 1,000 requests reserve an estimate and settle their actual usage at once from 8 threads, while
// 2 more threads settle the same ids again (late duplicates) and 4 hit the key: every algorithm
// counts each unit of actual usage once, and each hit once — nothing lost, nothing twice.
TEST(Concurrency, ThousandReservationsSettledAtOnceCountEveryUnitOnce) {
  for (const auto& v : testing::kVariants) {
    auto storage = std::make_shared<MemoryStorage>();
    auto clock = std::make_shared<ManualClock>(Micros{1'700'000'040} * kMicrosPerSecond);
    Limiter limiter(storage, clock);
    const Policy p = v.policy("1000000000/hour");
    std::atomic<std::int64_t> used{0};
    std::vector<std::string> ids(1000);
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = "r" + std::to_string(i);
    std::vector<std::atomic<bool>> done(ids.size());
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        for (std::size_t i = static_cast<std::size_t>(t); i < ids.size(); i += 8) {
          auto r = limiter.reserve(p, "tenant", 100, ids[i]);
          ASSERT_TRUE(r.ok() && r->reserved());
          const std::int64_t actual = static_cast<std::int64_t>((i * 37) % 250);
          ASSERT_TRUE(limiter.settle(p, "tenant", ids[i], actual).ok());
          used.fetch_add(actual);
          done[i].store(true, std::memory_order_release);
        }
      });
    }
    for (int t = 0; t < 2; ++t) {
      threads.emplace_back([&] {
        for (int round = 0; round < 3; ++round) {
          for (std::size_t i = 0; i < ids.size(); i += 7) {
            // A late duplicate of a settle already made (of one not yet made it would be the
            // settle itself).
            if (done[i].load(std::memory_order_acquire)) {
              EXPECT_TRUE(limiter.settle(p, "tenant", ids[i], 999).ok());
            }
          }
        }
      });
    }
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 250; ++i) {
          if (limiter.hit(p, "tenant", 1)->allowed) used.fetch_add(1);
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(1'000'000'000 - limiter.stats(p, "tenant")->remaining, used.load()) << v.name;
  }
}

// Leases: 8 threads acquire, renew and release leases of one key (a concurrency policy of 5) as
// fast as they can, on a frozen clock (no lease expires). Each thread counts the slots it holds
// after its acquisition and before its release: the sum never exceeds 5, and the slots end free.
// Tried by all at once with every lease held, exactly 5 are taken.
TEST(Concurrency, LeasesNeverExceedTheLimit) {
  auto clock = std::make_shared<ManualClock>(1'700'000'000'000'000);
  Limiter limiter(std::make_shared<MemoryStorage>(), clock);
  const Policy p = Policy::make("slots", Strategy::kConcurrency, "5 concurrent for 1 minute").value();
  std::atomic<int> held{0};
  std::atomic<int> most{0};
  std::atomic<int> taken{0};
  std::atomic<int> first{0};
  std::barrier start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // First all at once, each holding its lease until every thread has tried: exactly 5 win.
      start.arrive_and_wait();
      {
        auto lease = limiter.acquire(p, "hot", 1, "first-" + std::to_string(t));
        EXPECT_TRUE(lease.ok()) << lease.status();  // no ASSERT: every thread must reach the barriers
        first.fetch_add(lease.ok() && lease->held() ? 1 : 0);
        start.arrive_and_wait();
      }
      start.arrive_and_wait();  // every first lease released
      testing::churn_leases(limiter, p, "hot", "t" + std::to_string(t), 400, held, most, &taken);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(first.load(), 5);
  EXPECT_LE(most.load(), 5);
  EXPECT_GT(taken.load(), 5);
  EXPECT_EQ(limiter.stats(p, "hot")->remaining, 5);
}

}  // namespace
}  // namespace floodgate
