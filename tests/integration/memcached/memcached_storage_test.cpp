// The memcached storage against Debian's memcached (the memcached_single fixture, plus private
// servers that a test kills, pauses or starves): conformance and seeded random traces against the
// memory store, the value's expiry, no write for a denial, keys, contention, failures.
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <ctime>
#include <random>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "conformance_support.hpp"
#include "floodgate/limiter.hpp"
#include "floodgate/memory_storage.hpp"
#include "support/limit_change.hpp"
#include "support/lease_model.hpp"
#include "support/reservation_clock.hpp"
#include "support/reservation_model.hpp"
#include "support/variants.hpp"
#include "test_support.hpp"

namespace floodgate::memcached {
namespace {

using namespace floodgate::memcached::testing;
using floodgate::redis::testing::all_cases;
using floodgate::redis::testing::Case;
using floodgate::redis::testing::describe;
using floodgate::redis::testing::replay_cli;
using floodgate::redis::testing::replay_through;
using floodgate::redis::testing::same;

constexpr Micros kT0 = 1'800'000'000'000'000;  // a client-clock instant (2027)

// ---- conformance: memory and memcached give byte-identical replay output --------------------
class MemcachedConformance : public ::testing::TestWithParam<Case> {};

TEST_P(MemcachedConformance, SameOutputAsMemory) {
  const Case& c = GetParam();
  MemoryStorage memory;
  const std::string expected = replay_through(c, memory);
  auto mc = open_url(single_url("timeout_ms=2000&prefix=" + unique_prefix(c.name)));
  ASSERT_NE(mc, nullptr);
  EXPECT_EQ(replay_through(c, *mc), expected);
}

TEST_P(MemcachedConformance, BinaryReplayThroughMemcachedMatchesMemory) {
  const Case& c = GetParam();
  MemoryStorage memory;
  const std::string expected = replay_through(c, memory);
  const std::string url = single_url("timeout_ms=2000&prefix=" + unique_prefix(c.name + "-cli"));
  EXPECT_EQ(replay_cli(c, url), expected);
}

INSTANTIATE_TEST_SUITE_P(Cases, MemcachedConformance, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& p) { return p.param.name; });

// ---- seeded random traces: every field of every decision equals the memory store's ----------
Policy random_policy(std::mt19937_64& rng, int seed) {
  static constexpr std::array<Micros, 6> kPeriods{1'000, 1'000'000, 7'000'003, 60'000'000,
                                                  3'600'000'000, 86'400'000'000};
  while (true) {
    PolicyOptions o;
    const auto strategy = static_cast<Strategy>(rng() % 6);
    if (strategy == Strategy::kFixedWindow && rng() % 2 == 0) o.anchor = Anchor::kFirstHit;
    if (strategy == Strategy::kLeakyBucket && rng() % 2 == 0) o.shape = true;
    std::vector<Limit> limits(1 + rng() % 3);
    for (Limit& l : limits) {
      // Small amounts mostly; huge ones (up to 2^53) and odd periods now and then.
      const bool huge = rng() % 5 == 0 && strategy != Strategy::kMovingWindow;
      const std::int64_t amount = huge ? 1 + static_cast<std::int64_t>(rng() % kMaxAmount)
                                       : 1 + static_cast<std::int64_t>(rng() % 40);
      const Micros period = rng() % 4 == 0 ? 1 + static_cast<Micros>(rng() % 30'000'000)
                                           : kPeriods[rng() % kPeriods.size()];
      const std::int64_t burst =
          uses_burst(strategy) && rng() % 2 == 0 ? 1 + static_cast<std::int64_t>(rng() % (2 * amount))
                                                 : 0;
      auto made = Limit::make(amount, period, std::min(burst, kMaxAmount));
      if (made.ok()) l = *made;
    }
    auto p = Policy::make("random-" + std::to_string(seed), strategy, limits, o);
    if (p.ok() && check_policy(*p, MemcachedOptions{}.item_size_max).ok()) return *p;
  }
}

TEST(MemcachedRandomTraces, ThousandTracesAgreeWithMemoryFieldForField) {
  auto mc = open_url(single_url("timeout_ms=2000&pool=1&prefix=" + unique_prefix("random")));
  ASSERT_NE(mc, nullptr);
  int requests = 0;
  for (int seed = 0; seed < 1000; ++seed) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(seed) * 104729 + 3);
    const Policy policy = random_policy(rng, seed);
    Micros min_period = kMaxPeriod;
    std::int64_t min_capacity = kMaxAmount;
    for (const Limit& l : policy.limits()) {
      min_period = std::min(min_period, l.period);
      min_capacity = std::min(min_capacity, uses_burst(policy.strategy()) ? l.capacity() : l.amount);
    }
    MemoryStorage memory;
    Micros now = kT0 + static_cast<Micros>(rng() % 1'000'000'000'000);
    // Odd seeds step the clock back now and then, on one key (the memory store may reclaim an
    // absent key that memcached still holds; both are "absent", and a step back could tell).
    const bool steps_back = seed % 2 == 1;
    for (int i = 0; i < 40; ++i) {
      switch (rng() % 8) {
        case 0: break;
        case 1:
          if (steps_back) now -= static_cast<Micros>(rng() % (min_period / 2 + 1));
          break;
        case 2: now += static_cast<Micros>(rng() % (3 * min_period + 1)); break;
        default: now += 1 + static_cast<Micros>(rng() % (min_period / 4 + 1)); break;
      }
      std::int64_t cost = 1;
      switch (rng() % 10) {
        case 0: cost = 0; break;
        case 1: cost = 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(min_capacity)); break;
        case 2: cost = std::min(kMaxAmount, min_capacity + 1); break;
        default: break;
      }
      const std::string key = !steps_back && rng() % 3 == 0 ? "b" : "a";
      const Effect effect = rng() % 6 == 0 ? Effect::kTest : Effect::kHit;
      const auto want = memory.apply(policy, key, cost, effect, now);
      const auto got = mc->apply(policy, key, cost, effect, now);
      ++requests;
      ASSERT_TRUE(want.ok());
      ASSERT_TRUE(got.ok()) << got.status() << " seed " << seed << " " << policy.describe();
      ASSERT_TRUE(same(*want, *got))
          << "seed " << seed << " request " << i << " " << policy.describe() << " key " << key
          << " cost " << cost << " t " << now << (effect == Effect::kTest ? " test" : " hit")
          << "\n memory:    " << describe(*want) << "\n memcached: " << describe(*got);
    }
  }
  RecordProperty("requests", requests);
  EXPECT_EQ(requests, 40000);
}

// ---- batches: in order, as apply one after another, keys repeated ---------------------------
TEST(MemcachedBatch, BatchEqualsMemoryInOrderWithRepeatedKeys) {
  auto mc = open_url(single_url("timeout_ms=2000&prefix=" + unique_prefix("batch")));
  ASSERT_NE(mc, nullptr);
  MemoryStorage memory;
  const std::vector<Policy> policies{
      Policy::make("b-gcra", Strategy::kGcra, "5/second").value(),
      Policy::make("b-moving", Strategy::kMovingWindow, "3/second; 7/minute").value(),
      Policy::make("b-sliding", Strategy::kSlidingWindowCounter, "4/second").value()};
  std::mt19937_64 rng(7);
  Micros now = kT0;
  for (int round = 0; round < 60; ++round) {
    now += static_cast<Micros>(rng() % 400'000);
    std::vector<Storage::BatchItem> items;
    std::vector<std::string> keys;
    keys.reserve(16);
    for (int i = 0; i < 16; ++i) keys.push_back("k" + std::to_string(rng() % 4));  // repeats
    for (int i = 0; i < 16; ++i) {
      items.push_back({&policies[rng() % policies.size()], keys[static_cast<std::size_t>(i)],
                       static_cast<std::int64_t>(rng() % 3),
                       rng() % 5 == 0 ? Effect::kTest : Effect::kHit});
    }
    std::vector<absl::StatusOr<Decision>> want(items.size()), got(items.size());
    memory.apply_batch(items, now, want);
    mc->apply_batch(items, now, got);
    for (std::size_t i = 0; i < items.size(); ++i) {
      ASSERT_TRUE(got[i].ok()) << got[i].status();
      ASSERT_TRUE(same(*want[i], *got[i])) << "round " << round << " item " << i << "\n memory:    "
                                           << describe(*want[i]) << "\n memcached: "
                                           << describe(*got[i]);
    }
  }
}

// ---- what is written, and when it expires ---------------------------------------------------
TEST(MemcachedValues, ADeniedRequestATestAndACostOfZeroWriteNothing) {
  const std::string prefix = unique_prefix("nowrite");
  auto mc = open_url(single_url("prefix=" + prefix));
  ASSERT_NE(mc, nullptr);
  const Policy p = Policy::make("nw", Strategy::kMovingWindow, "2/minute; 5/hour").value();
  const std::string key = storage_key(prefix, p, "user");
  // Absent key: a test, a zero cost and a request too big for the limit create nothing.
  ASSERT_TRUE(mc->apply(p, "user", 1, Effect::kTest, kT0).ok());
  ASSERT_TRUE(mc->apply(p, "user", 0, Effect::kHit, kT0).ok());
  const auto too_big = mc->apply(p, "user", 3, Effect::kHit, kT0);
  ASSERT_TRUE(too_big.ok());
  EXPECT_FALSE(too_big->allowed);
  EXPECT_FALSE(cas_of(single_port(), key).has_value()) << "nothing stored for an absent key";
  // Present key: a denial (of either limit), a test and a zero cost leave the value as it was.
  ASSERT_TRUE(mc->apply(p, "user", 2, Effect::kHit, kT0)->allowed);
  const auto before = cas_of(single_port(), key);
  ASSERT_TRUE(before.has_value());
  EXPECT_FALSE(mc->apply(p, "user", 1, Effect::kHit, kT0 + 1)->allowed);
  EXPECT_TRUE(mc->apply(p, "user", 1, Effect::kTest, kT0 + 2).ok());
  EXPECT_TRUE(mc->apply(p, "user", 0, Effect::kHit, kT0 + 3)->allowed);
  EXPECT_EQ(cas_of(single_port(), key), before) << "unchanged CAS: nothing was written";
}

TEST(MemcachedValues, EveryValueExpiresWhenItsStateIsAbsentPlusTheSlack) {
  const std::string prefix = unique_prefix("ttl");
  auto mc = open_url(single_url("ttl_slack_ms=2000&prefix=" + prefix));
  ASSERT_NE(mc, nullptr);
  // fixed 10/minute at the start of a minute: absent 60 s later; +2 s slack +1 s clock tick.
  const Policy fixed = Policy::make("e-fixed", Strategy::kFixedWindow, "10/minute").value();
  const Micros minute_start = kT0 / 60'000'000 * 60'000'000;
  ASSERT_TRUE(mc->apply(fixed, "k", 1, Effect::kHit, minute_start)->allowed);
  const auto ttl = ttl_of(single_port(), storage_key(prefix, fixed, "k"));
  ASSERT_TRUE(ttl.has_value());
  EXPECT_GE(*ttl, 62);
  EXPECT_LE(*ttl, 63);
  // Two limits: the longer one decides (1 hour).
  const Policy two = Policy::make("e-two", Strategy::kGcra, "1/second; 10/hour").value();
  ASSERT_TRUE(mc->apply(two, "k", 1, Effect::kHit, kT0)->allowed);
  const auto ttl2 = ttl_of(single_port(), storage_key(prefix, two, "k"));
  ASSERT_TRUE(ttl2.has_value());
  EXPECT_GE(*ttl2, 360 + 2);  // GCRA: one unit of 10/hour is 360 s
  EXPECT_LE(*ttl2, 360 + 3);
}

// memcached reads an expiration above 30 days as an absolute Unix time: sent as a relative one,
// 60 days would be a date in 1970 and the value would vanish at once, admitting the second hit.
TEST(MemcachedValues, ExpiriesBeyondThirtyDaysAreSentAsAbsoluteTimes) {
  const std::string prefix = unique_prefix("long");
  auto mc = open_url(single_url("prefix=" + prefix));
  ASSERT_NE(mc, nullptr);
  const Policy p = Policy::make("long", Strategy::kFixedWindow, "1 per 60 days",
                                PolicyOptions{.anchor = Anchor::kFirstHit}).value();
  ASSERT_TRUE(mc->apply(p, "k", 1, Effect::kHit, kT0)->allowed);
  EXPECT_FALSE(mc->apply(p, "k", 1, Effect::kHit, kT0 + 1)->allowed) << "the value is still there";
  const auto ttl = ttl_of(single_port(), storage_key(prefix, p, "k"));
  ASSERT_TRUE(ttl.has_value());
  EXPECT_GE(*ttl, 60L * 86400 - 60);
  EXPECT_LE(*ttl, 60L * 86400 + 60);
}

TEST(MemcachedValues, AForeignValueUnderOurKeyIsAnErrorNeverAllowed) {
  const std::string prefix = unique_prefix("foreign");
  auto mc = std::shared_ptr<Storage>(open_url(single_url("prefix=" + prefix)));
  ASSERT_NE(mc, nullptr);
  const Policy closed = Policy::make("f", Strategy::kTokenBucket, "5/second",
                                     PolicyOptions{.fail = FailMode::kClosed}).value();
  const std::string key = storage_key(prefix, closed, "k");
  ASSERT_EQ(raw(single_port(), "set " + key + " 0 60 5\r\nhello", {"STORED", "ERROR"}), "STORED\r\n");
  const auto d = mc->apply(closed, "k", 1, Effect::kHit, kT0);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInternal) << d.status();
  Limiter limiter(mc);
  const auto via = limiter.hit(closed, "k");
  ASSERT_TRUE(via.ok());
  EXPECT_TRUE(via->degraded);
  EXPECT_FALSE(via->allowed);
  // A floodgate value of another algorithm (a policy changed in place by hand) likewise.
  const Policy fixed = Policy::make("f", Strategy::kFixedWindow, "5/second").value();
  ASSERT_TRUE(mc->apply(fixed, "other", 1, Effect::kHit, kT0)->allowed);
  const std::string fixed_key = storage_key(prefix, fixed, "other");
  const std::string value = raw(single_port(), "mg " + fixed_key + " v f", {"VA", "EN"});
  ASSERT_TRUE(value.starts_with("VA 20 f")) << value;  // 4 + 16 bytes, flags 0x46470002
}

TEST(MemcachedKeys, OpaqueKeysOfAnyLengthAndBytesNeverShareState) {
  auto mc = open_url(single_url("prefix=" + unique_prefix("keys")));
  ASSERT_NE(mc, nullptr);
  const Policy a = Policy::make("a", Strategy::kFixedWindow, "1/hour").value();
  const Policy b = Policy::make("b", Strategy::kFixedWindow, "1/hour").value();
  const std::vector<std::string> keys{
      "", " ", "a b", std::string("nul\0byte", 8), std::string("nul\0bytf", 8), "\r\n",
      std::string(5000, 'x'), std::string(5000, 'x') + "y", "\xff\xfe", "ключ"};
  for (const std::string& k : keys) {
    const auto first = mc->apply(a, k, 1, Effect::kHit, kT0);
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_TRUE(first->allowed) << "a new key starts fresh";
    EXPECT_FALSE(mc->apply(a, k, 1, Effect::kHit, kT0)->allowed) << "and keeps its state";
    EXPECT_TRUE(mc->apply(b, k, 1, Effect::kHit, kT0)->allowed) << "another policy: its own state";
  }
  const std::string longest = storage_key(std::string(kMaxPrefix, 'p'), a, std::string(100000, 'k'));
  EXPECT_LE(longest.size(), 250u);
  EXPECT_TRUE(std::all_of(longest.begin(), longest.end(), [](char c) { return c > ' ' && c < 0x7f; }));
}

TEST(MemcachedPolicies, AMovingWindowTooBigForAnItemIsRefusedNamingThePolicy) {
  auto mc = std::shared_ptr<Storage>(open_url(single_url("prefix=" + unique_prefix("big"))));
  ASSERT_NE(mc, nullptr);
  const Policy big = Policy::make("huge-log", Strategy::kMovingWindow, "100000/minute").value();
  const auto d = mc->apply(big, "k", 1, Effect::kHit, kT0);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(d.status().message().find("huge-log"), std::string::npos) << d.status();
  Limiter limiter(mc);
  EXPECT_FALSE(limiter.hit(big, "k").ok()) << "a configuration error, not a fail mode";
  // With a larger item size (memcached -I 4m) it fits.
  auto roomy = open_url(single_url("item_size_max=4194304&prefix=" + unique_prefix("big")));
  EXPECT_EQ(roomy->apply(big, "k", 1, Effect::kTest, kT0).status().code(), absl::StatusCode::kOk);
  const Policy fits = Policy::make("fits", Strategy::kMovingWindow, "60000/minute").value();
  EXPECT_TRUE(mc->apply(fits, "k", 1, Effect::kHit, kT0).ok());
}

TEST(MemcachedKeys, ClearForgetsTheKeyOfEveryLimit) {
  auto mc = open_url(single_url("prefix=" + unique_prefix("clear")));
  ASSERT_NE(mc, nullptr);
  const Policy p = Policy::make("c", Strategy::kSlidingWindowCounter, "1/second; 2/hour").value();
  ASSERT_TRUE(mc->apply(p, "k", 1, Effect::kHit, kT0)->allowed);
  ASSERT_FALSE(mc->apply(p, "k", 1, Effect::kHit, kT0)->allowed);
  ASSERT_TRUE(mc->clear(p, "k").ok());
  EXPECT_TRUE(mc->apply(p, "k", 1, Effect::kHit, kT0)->allowed);
  EXPECT_TRUE(mc->clear(p, "never-seen").ok());
}

// ---- contention: processes × threads on one key admit exactly the limit -------------------
std::vector<Policy> one_policy_per_algorithm(std::int64_t limit) {
  const std::string l = std::to_string(limit) + "/hour";
  return {Policy::make("c-fixed", Strategy::kFixedWindow, l).value(),
          Policy::make("c-first", Strategy::kFixedWindow, l, PolicyOptions{.anchor = Anchor::kFirstHit}).value(),
          Policy::make("c-moving", Strategy::kMovingWindow, l).value(),
          Policy::make("c-sliding", Strategy::kSlidingWindowCounter, l).value(),
          Policy::make("c-token", Strategy::kTokenBucket, l).value(),
          Policy::make("c-leaky", Strategy::kLeakyBucket, l).value(),
          Policy::make("c-gcra", Strategy::kGcra, l).value()};
}

struct Tally {
  int admitted = 0;
  int errors = 0;
};

Tally hammer(const std::string& url, const Policy& p, int threads, int hits) {
  MemcachedStorage storage(options_of(url));
  std::atomic<int> admitted{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (int i = 0; i < hits; ++i) {
        // One instant on the client clock: nothing refills, so exactly the limit may pass.
        const auto d = storage.apply(p, "hot", 1, Effect::kHit, kT0);
        if (!d.ok()) {
          errors.fetch_add(1);
        } else if (d->allowed) {
          admitted.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  return {admitted.load(), errors.load()};
}

TEST(MemcachedConcurrency, FourProcessesOfFourThreadsOnOneKeyAdmitExactlyTheLimit) {
  constexpr int kProcesses = 4;
  constexpr int kThreads = 4;
  constexpr int kHits = 60;  // 960 attempts for a limit of 300
  for (const Policy& p : one_policy_per_algorithm(300)) {
    const std::string url =
        single_url("timeout_ms=2000&pool=4&cas_retries=1000&prefix=" + unique_prefix("procs"));
    std::vector<std::pair<pid_t, int>> children;
    for (int i = 0; i < kProcesses; ++i) {
      int fds[2];
      ASSERT_EQ(pipe(fds), 0);
      const pid_t pid = fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        close(fds[0]);
        const Tally t = hammer(url, p, kThreads, kHits);
        const ssize_t w = write(fds[1], &t, sizeof t);
        _exit(w == sizeof t ? 0 : 1);
      }
      close(fds[1]);
      children.emplace_back(pid, fds[0]);
    }
    Tally total;
    for (auto [pid, fd] : children) {
      Tally t;
      ASSERT_EQ(read(fd, &t, sizeof t), static_cast<ssize_t>(sizeof t));
      close(fd);
      int status = 0;
      waitpid(pid, &status, 0);
      total.admitted += t.admitted;
      total.errors += t.errors;
    }
    EXPECT_EQ(total.errors, 0) << p.describe();
    EXPECT_EQ(total.admitted, 300) << p.describe() << ": " << kProcesses << " processes × "
                                   << kThreads << " threads × " << kHits << " hits";
  }
}

TEST(MemcachedConcurrency, LosingTheCompareAndSwapTooOftenIsAnErrorNeverAnAdmission) {
  // cas_retries=1: under contention some decisions lose their only attempt. They must come back
  // as errors (Aborted), and the admissions must still not exceed the limit.
  const Policy p = Policy::make("c-abort", Strategy::kGcra, "200/hour").value();
  const std::string url = single_url("pool=8&cas_retries=1&prefix=" + unique_prefix("abort"));
  MemcachedStorage storage(options_of(url));
  std::atomic<int> admitted{0};
  std::atomic<int> aborted{0};
  std::atomic<int> other{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < 8; ++t) {
    pool.emplace_back([&] {
      for (int i = 0; i < 100; ++i) {
        const auto d = storage.apply(p, "hot", 1, Effect::kHit, kT0);
        if (d.ok()) {
          admitted += d->allowed ? 1 : 0;
        } else if (d.status().code() == absl::StatusCode::kAborted) {
          ++aborted;
        } else {
          ++other;
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  EXPECT_LE(admitted.load(), 200);
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(static_cast<std::uint64_t>(aborted.load()), storage.cas_conflicts())
      << "every lost race with no retry left is reported";
  EXPECT_GT(aborted.load(), 0) << "8 threads on one key with one attempt each: some lose";
  // The stored state counts exactly the admissions reported: no lost race was taken as one.
  const auto left = storage.apply(p, "hot", 1, Effect::kTest, kT0);
  ASSERT_TRUE(left.ok());
  EXPECT_EQ(left->remaining, 200 - admitted.load());
}

// ---- failures: fail mode, bounded latency, breaker, recovery, eviction, one server of two ---
Policy with_fail(FailMode m, const std::string& limit = "10/second") {
  return Policy::make(m == FailMode::kOpen ? "open" : "closed", Strategy::kGcra, limit,
                      PolicyOptions{.fail = m}).value();
}

int free_port() {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  close(s);
  return ntohs(a.sin_port);
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// `--storage-start background` (serve's default): no server yet is no error at start; the probe
// (and /readyz) says why, in words of our own (libmemcached's last-error text carries a pointer
// and a source location).
TEST(MemcachedFailure, ABackgroundStartOpensWithoutAServerAndTheProbeSaysWhy) {
  const std::string url = url_for(free_port(), "timeout_ms=50&connect_timeout_ms=50");
  auto opened = open_storage(url, StorageStart::kBackground);
  ASSERT_TRUE(opened.ok()) << opened.status();
  const absl::Status probe = (*opened)->probe();
  EXPECT_EQ(probe.code(), absl::StatusCode::kUnavailable) << probe;
  EXPECT_NE(probe.message().find("no answer"), std::string_view::npos) << probe;
  const auto fail_fast = open_storage(url, StorageStart::kFailFast);
  ASSERT_FALSE(fail_fast.ok());
  for (const absl::Status& s : {probe, fail_fast.status()}) {
    EXPECT_EQ(s.message().find(".cc:"), std::string_view::npos) << s;
    EXPECT_EQ(s.message().find("0x"), std::string_view::npos) << s;
  }
}

TEST(MemcachedFailure, NoServerFailsOpenOrClosedQuicklyAndOpenReportsIt) {
  const MemcachedOptions o = options_of(url_for(free_port(), "timeout_ms=50&connect_timeout_ms=50"));
  EXPECT_EQ(MemcachedStorage::open(o).status().code(), absl::StatusCode::kUnavailable);
  auto storage = std::make_shared<MemcachedStorage>(o);
  Limiter limiter(storage);
  for (FailMode m : {FailMode::kOpen, FailMode::kClosed}) {
    for (int i = 0; i < 20; ++i) {
      const auto start = std::chrono::steady_clock::now();
      const auto d = limiter.hit(with_fail(m), "k");
      ASSERT_TRUE(d.ok());
      EXPECT_TRUE(d->degraded);
      EXPECT_EQ(d->allowed, m == FailMode::kOpen);
      EXPECT_LT(ms_since(start), 50 + 60);
    }
  }
  EXPECT_EQ(limiter.degraded_count(), 40u);
}

TEST(MemcachedFailure, AStoppedServerTimesOutWithinTheTimeoutThenTheBreakerFailsFast) {
  PrivateServer server;
  ASSERT_GT(server.port(), 0);
  auto storage = open_url(server.url("timeout_ms=40&breaker_failures=3&breaker_cooldown_ms=300&"
                                     "prefix=" + unique_prefix("stop")));
  ASSERT_NE(storage, nullptr);
  Limiter limiter(storage);
  const Policy closed = with_fail(FailMode::kClosed, "1000/second");
  ASSERT_FALSE(limiter.hit(closed, "k")->degraded);
  ASSERT_TRUE(server.stop()) << "the server did not stop";
  std::vector<double> ms;
  for (int i = 0; i < 10; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const auto d = limiter.hit(closed, "k");
    ms.push_back(ms_since(start));
    ASSERT_TRUE(d.ok());
    EXPECT_TRUE(d->degraded);
    EXPECT_FALSE(d->allowed);
  }
  for (double m : ms) EXPECT_LT(m, 40 + 60) << "every call within the timeout (+ scheduling slack)";
  const auto refused = storage->apply(closed, "k", 1, Effect::kHit, kT0);
  EXPECT_NE(refused.status().message().find("circuit breaker open"), std::string::npos)
      << refused.status();
  EXPECT_TRUE(storage->servers().at(0).breaker_open);
  server.signal(SIGCONT);
  // Recovery: the first call after the cooldown goes through. Polled, bounded.
  bool recovered = false;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 300 && !recovered; ++i) {
    recovered = !limiter.hit(closed, "k")->degraded;
    if (!recovered) usleep(10000);
  }
  EXPECT_TRUE(recovered);
  EXPECT_LT(ms_since(start), 2000);
}

TEST(MemcachedFailure, KilledUnderLoadFollowsTheFailModeThenRecoversAfterARestart) {
  PrivateServer server;
  ASSERT_GT(server.port(), 0);
  auto storage = open_url(server.url("timeout_ms=50&connect_timeout_ms=50&breaker_cooldown_ms=100&"
                                     "backoff_max_ms=200&prefix=" + unique_prefix("kill")));
  ASSERT_NE(storage, nullptr);
  Limiter limiter(storage);
  const Policy closed = with_fail(FailMode::kClosed, "100000/second");
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, degraded{0}, degraded_allowed{0}, slow{0};
  std::vector<std::thread> load;
  for (int t = 0; t < 4; ++t) {
    load.emplace_back([&, t] {
      for (int i = 0; !stop.load(); ++i) {
        const auto start = std::chrono::steady_clock::now();
        const auto d = limiter.hit(closed, "k" + std::to_string((t * 7 + i) % 50));
        if (ms_since(start) > 50 + 150) ++slow;
        if (!d.ok()) continue;
        if (d->degraded) {
          ++degraded;
          if (d->allowed) ++degraded_allowed;
        } else {
          ++ok;
        }
      }
    });
  }
  auto wait_for = [](auto pred) {
    for (int i = 0; i < 500 && !pred(); ++i) usleep(10000);
    return pred();
  };
  EXPECT_TRUE(wait_for([&] { return ok.load() > 200; })) << "decisions before the kill";
  server.kill9();
  const int degraded_at_kill = degraded.load();
  EXPECT_TRUE(wait_for([&] { return degraded.load() > degraded_at_kill + 100; }))
      << "fail mode while the server is down";
  ASSERT_TRUE(server.restart());
  const int ok_at_restart = ok.load();
  const auto restarted = std::chrono::steady_clock::now();
  EXPECT_TRUE(wait_for([&] { return ok.load() > ok_at_restart + 100; })) << "recovery";
  const double recovery_ms = ms_since(restarted);
  stop = true;
  for (auto& t : load) t.join();
  RecordProperty("recovery_ms", std::to_string(recovery_ms));
  EXPECT_LT(recovery_ms, 3000);
  EXPECT_EQ(degraded_allowed.load(), 0) << "fail closed: never admitted while down";
  EXPECT_EQ(slow.load(), 0) << "no decision waited beyond the timeout (+ slack)";
}

TEST(MemcachedFailure, EvictionByTheLruIsMoreLenientNeverAnErrorOrAWrongType) {
  PrivateServer server("-m 2");  // 2 MB: the first keys are evicted long before the last
  ASSERT_GT(server.port(), 0);
  auto storage = open_url(server.url("timeout_ms=2000&prefix=" + unique_prefix("lru")));
  ASSERT_NE(storage, nullptr);
  const Policy p = Policy::make("lru", Strategy::kMovingWindow, "3/hour").value();
  constexpr int kKeys = 40000;
  std::vector<Storage::BatchItem> items;
  std::vector<std::string> names;
  names.reserve(kKeys);
  for (int i = 0; i < kKeys; ++i) names.push_back("user" + std::to_string(i));
  // Each key spends its whole limit (3), in batches.
  for (int round = 0; round < 3; ++round) {
    for (int start = 0; start < kKeys; start += 200) {
      items.clear();
      for (int i = start; i < start + 200; ++i) items.push_back({&p, names[static_cast<std::size_t>(i)], 1, Effect::kHit});
      std::vector<absl::StatusOr<Decision>> out(items.size());
      storage->apply_batch(items, kT0 + round, out);
      for (const auto& d : out) ASSERT_TRUE(d.ok()) << d.status();
    }
  }
  EXPECT_GT(stat(server.port(), "evictions"), 0);
  int lenient = 0;
  for (int i = 0; i < kKeys; i += 100) {
    const auto d = storage->apply(p, names[static_cast<std::size_t>(i)], 1, Effect::kHit, kT0 + 10);
    ASSERT_TRUE(d.ok()) << d.status();
    lenient += d->allowed ? 1 : 0;
  }
  EXPECT_GT(lenient, 0) << "evicted keys start afresh (more lenient)";
  // The store still decides exactly for a key that is held: three hits, then a denial.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(storage->apply(p, "fresh", 1, Effect::kHit, kT0 + 11)->allowed);
  const auto fourth = storage->apply(p, "fresh", 1, Effect::kHit, kT0 + 11);
  ASSERT_TRUE(fourth.ok());
  EXPECT_FALSE(fourth->allowed);
}

TEST(MemcachedFailure, OfTwoServersOnlyTheKilledOnesKeysDegrade) {
  PrivateServer a, b;
  ASSERT_GT(a.port(), 0);
  ASSERT_GT(b.port(), 0);
  const std::string prefix = unique_prefix("two");
  auto storage = open_url("memcached://127.0.0.1:" + std::to_string(a.port()) + ",127.0.0.1:" +
                          std::to_string(b.port()) + "?timeout_ms=50&connect_timeout_ms=50&prefix=" + prefix);
  ASSERT_NE(storage, nullptr);
  const Policy p = Policy::make("two", Strategy::kFixedWindow, "2/hour").value();
  std::set<std::string> on_b;
  for (int i = 0; i < 200; ++i) {
    const std::string k = "k" + std::to_string(i);
    ASSERT_TRUE(storage->apply(p, k, 1, Effect::kHit, kT0)->allowed);
    const std::string key = storage_key(prefix, p, k);
    const bool in_a = cas_of(a.port(), key).has_value();
    const bool in_b = cas_of(b.port(), key).has_value();
    ASSERT_NE(in_a, in_b) << "each value on exactly one server";
    if (in_b) on_b.insert(k);
  }
  ASSERT_GT(on_b.size(), 30u) << "consistent hashing spreads the keys";
  ASSERT_LT(on_b.size(), 170u);
  b.kill9();
  for (int i = 0; i < 200; ++i) {
    const std::string k = "k" + std::to_string(i);
    const auto d = storage->apply(p, k, 1, Effect::kHit, kT0);
    if (on_b.count(k) != 0) {
      EXPECT_FALSE(d.ok()) << k << " lives on the killed server";
    } else {
      ASSERT_TRUE(d.ok()) << k << ": " << d.status();
      EXPECT_TRUE(d->allowed) << "its second hit of 2";
      EXPECT_FALSE(storage->apply(p, k, 1, Effect::kHit, kT0)->allowed) << "and its state is kept";
    }
  }
  const auto servers = storage->servers();
  ASSERT_EQ(servers.size(), 2u);
  EXPECT_FALSE(servers[0].breaker_open);
  EXPECT_TRUE(servers[1].breaker_open || servers[1].reconnecting);
}

// A raised or lowered limit keeps its usage in the same keys (their names leave the amount out);
// another algorithm or period starts afresh. Before: the key held the limits, so afresh.
TEST(MemcachedLimitChange, KeepsUsageAcrossAmountsAndStartsAfreshForAnotherAlgorithm) {
  auto storage = open_url(single_url("timeout_ms=2000&prefix=" + unique_prefix("limit-change")));
  floodgate::testing::check_limit_changes(*storage, "k-", SystemClock::instance()->now());
}

}  // namespace
}  // namespace floodgate::memcached

// ---- reservations -----------------------------------------------------------------------------
namespace floodgate::memcached {
namespace {

using namespace floodgate::memcached::testing;

TEST(MemcachedReservations, MatchTheModelForEveryAlgorithm) {
  for (const auto& v : floodgate::testing::kVariants) {
    for (const char* limits : {"6 per 10 seconds", "5 per 10 seconds; 12 per 30 seconds"}) {
      auto storage = open_url(single_url("prefix=" + unique_prefix("reserve")));
      ASSERT_NE(storage, nullptr);
      auto clock = std::make_shared<ManualClock>(Micros{1'700'000'040} * kMicrosPerSecond);
      Limiter limiter(storage, clock);
      floodgate::testing::check_against_model(limiter, *clock, v.policy(limits), "k", 1, 120);
      if (HasFailure()) return;
    }
  }
}

TEST(MemcachedReservations, OneIdOneReservationAndConcurrentSettlesCountOnce) {
  auto storage = open_url(single_url("pool=8&prefix=" + unique_prefix("reserve-threads")));
  ASSERT_NE(storage, nullptr);
  const Policy p = Policy::make("budget", Strategy::kFixedWindow, "100000000/hour").value();
  constexpr Micros kNow = 1'000'000;
  auto clock = std::make_shared<ManualClock>(kNow);
  Limiter limiter(storage, clock);
  ASSERT_TRUE(limiter.reserve(p, "tenant", 100, "dup").ok());
  EXPECT_EQ(limiter.reserve(p, "tenant", 100, "dup").status().code(), absl::StatusCode::kAlreadyExists);
  // Four threads settle the same ids: each id's usage is counted once.
  std::vector<std::string> ids;
  for (int i = 0; i < 50; ++i) {
    ids.push_back("id" + std::to_string(i));
    ASSERT_TRUE(limiter.reserve(p, "tenant", 10, ids.back()).ok());
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (const std::string& id : ids) EXPECT_TRUE(limiter.settle(p, "tenant", id, 3).ok());
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(100'000'000 - limiter.stats(p, "tenant")->remaining, 100 + 50 * 3);
}

// A reservation's time to live is the decision clock's (the caller's), not memcached's: a settle
// after it keeps the estimate, the id is unknown and free again, a lease is not renewed.
TEST(MemcachedReservations, TheTimeToLiveIsTheDecisionsClock) {
  auto storage = open_url(single_url("prefix=" + unique_prefix("reserve-clock")));
  ASSERT_NE(storage, nullptr);
  ::floodgate::testing::expect_time_to_live_on_the_decisions_clock(storage);
}

// Records written before they carried the decision clock's expiry (lower case, Unix seconds) are
// still read: they live while their item does.
TEST(MemcachedReservations, RecordsWithoutTheDecisionsClockAreStillRead) {
  const std::string prefix = unique_prefix("reserve-old");
  auto storage = open_url(single_url("prefix=" + prefix));
  ASSERT_NE(storage, nullptr);
  constexpr Micros kT = Micros{1'700'000'040} * kMicrosPerSecond;
  auto clock = std::make_shared<ManualClock>(kT);
  Limiter limiter(storage, clock);
  const Policy p = Policy::make("tokens", Strategy::kFixedWindow, "100/minute").value();
  ASSERT_EQ(limiter.hit(p, "a", 30)->remaining, 70);  // what the old reservation charged
  const auto set = [&](const std::string& id, const std::string& value) {
    return raw(single_port(),
               fmt::format("set {} {} 60 {}\r\n{}", reservation_key(prefix, p, "a", id), kValueFlags, value.size(), value),
               {"STORED", "NOT_STORED", "CLIENT_ERROR", "ERROR"});
  };
  const std::int64_t unix_expiry = std::time(nullptr) + 60;
  ASSERT_TRUE(set("old", fmt::format("r {} 30 {} 0", kT, unix_expiry)).starts_with("STORED"));
  ASSERT_TRUE(set("done", fmt::format("s {}", unix_expiry)).starts_with("STORED"));
  clock->advance(10 * kMicrosPerSecond);
  EXPECT_TRUE(*storage->known(p, "a", "old", clock->now()));
  EXPECT_EQ(limiter.reserve(p, "a", 1, "done").status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(limiter.settle(p, "a", "done", 50)->remaining, 70);  // settled: no change
  EXPECT_EQ(limiter.settle(p, "a", "old", 10)->remaining, 90);   // refund of 20
  EXPECT_EQ(limiter.settle(p, "a", "old", 10)->remaining, 90);
  // What happened to each id, as the answer says it.
  EXPECT_EQ(limiter.settle(p, "a", "done", 50)->settle, SettleOutcome::kAlreadySettled);
  EXPECT_EQ(limiter.settle(p, "a", "old", 10)->settle, SettleOutcome::kAlreadySettled);
  const auto fresh = limiter.settle(p, "a", "never-reserved", 5);
  EXPECT_EQ(fresh->settle, SettleOutcome::kUnknown);
  EXPECT_EQ(fresh->remaining, 85);
  ASSERT_TRUE(limiter.reserve(p, "a", 10, "new").ok());
  EXPECT_EQ(limiter.settle(p, "a", "new", 10)->settle, SettleOutcome::kSettled);
}

}  // namespace
}  // namespace floodgate::memcached

// ---- leases (a concurrency policy) ---------------------------------------------------------------
namespace floodgate::memcached {
namespace {

using namespace floodgate::memcached::testing;

TEST(MemcachedLeases, MatchTheModel) {
  for (const char* limits : {"3 concurrent for 30 seconds", "2 concurrent for 1 minute"}) {
    auto storage = open_url(single_url("prefix=" + unique_prefix("lease")));
    ASSERT_NE(storage, nullptr);
    auto clock = std::make_shared<ManualClock>(Micros{1'700'000'040} * kMicrosPerSecond);
    Limiter limiter(storage, clock);
    const Policy p = Policy::make("slots", Strategy::kConcurrency, limits).value();
    floodgate::testing::check_leases_against_model(limiter, *clock, p, "k", 1, 150);
    if (HasFailure()) return;
  }
}

TEST(MemcachedLeases, ThreadsNeverHoldMoreThanTheLimit) {
  auto storage = open_url(single_url("pool=8&prefix=" + unique_prefix("lease-threads")));
  ASSERT_NE(storage, nullptr);
  const Policy p = Policy::make("slots", Strategy::kConcurrency, "3 concurrent for 1 minute").value();
  Limiter limiter(storage);
  std::atomic<int> held{0};
  std::atomic<int> most{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      floodgate::testing::churn_leases(limiter, p, "tenant", "t" + std::to_string(t), 60, held, most);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(most.load(), 3);
  EXPECT_GT(most.load(), 0);
  EXPECT_EQ(limiter.stats(p, "tenant")->remaining, 3);
}

}  // namespace
}  // namespace floodgate::memcached
