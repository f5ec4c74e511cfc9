// The scripts as one Redis 7 function library (FCALL), against the redis_single fixture: loaded
// on demand, reloaded after FUNCTION FLUSH, and given up for EVALSHA where the server refuses
// functions (an ACL user without them); scripts=eval never loads it.
#include <atomic>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "storage/redis/scripts_gen.hpp"
#include "test_support.hpp"

namespace floodgate::redis {
namespace {

using namespace floodgate::redis::testing;

std::vector<Policy> every_script() {
  return {Policy::make("f-fixed", Strategy::kFixedWindow, "10/minute; 100/hour").value(),
          Policy::make("f-first", Strategy::kFixedWindow, "10/minute",
                       PolicyOptions{.anchor = Anchor::kFirstHit}).value(),
          Policy::make("f-moving", Strategy::kMovingWindow, "10/minute; 100/hour").value(),
          Policy::make("f-sliding", Strategy::kSlidingWindowCounter, "10/minute").value(),
          Policy::make("f-bucket", Strategy::kTokenBucket, "10/minute; 100/hour").value()};
}

// Three hits on one key per script, and a group of two keys: each answered exactly.
void three_hits_each(RedisStorage& redis) {
  for (const Policy& p : every_script()) {
    for (int i = 0; i < 3; ++i) {
      const auto d = redis.apply(p, "k", 1, Effect::kHit, 0);
      ASSERT_TRUE(d.ok()) << p.name() << ": " << d.status();
      EXPECT_TRUE(d->allowed);
      EXPECT_EQ(d->remaining, p.limits()[0].amount - 1 - i) << p.name();
    }
  }
  const auto policies = every_script();
  std::vector<absl::StatusOr<Decision>> out(2);
  const Storage::BatchItem both[] = {{&policies[0], "g1", 1, Effect::kHit},
                                     {&policies[4], "g2", 1, Effect::kHit}};
  ASSERT_TRUE(redis.apply_group(both, 0, out));  // committed
  ASSERT_TRUE(out[0].ok() && out[1].ok());
  EXPECT_EQ(out[0]->remaining, 9);
  EXPECT_EQ(out[1]->remaining, 9);
  const Storage::BatchItem too_much[] = {{&policies[0], "g1", 1, Effect::kHit},
                                         {&policies[4], "g2", 11, Effect::kHit}};
  EXPECT_FALSE(redis.apply_group(too_much, 0, out));  // 11 > 10: nothing is committed
  ASSERT_TRUE(out[0].ok()) << out[0].status();
  ASSERT_TRUE(out[1].ok()) << out[1].status();
  EXPECT_TRUE(out[0]->allowed);
  EXPECT_FALSE(out[1]->allowed);
  EXPECT_EQ(out[0]->remaining, 9);  // as it was
}

long long fcall_calls(Raw& raw) {
  const std::string info = raw.cmd({"INFO", "commandstats"});
  const std::size_t at = info.find("cmdstat_fcall:calls=");
  return at == std::string::npos ? 0 : std::atoll(info.c_str() + at + 20);
}

TEST(RedisFunctions, ScriptsRunAsFcallOfOneVersionedLibrary) {
  auto redis = open_url(single_url("timeout_ms=2000&prefix=" + unique_prefix("fcall")));
  ASSERT_NE(redis, nullptr);
  Raw raw(single_port());
  const long long before = fcall_calls(raw);
  three_hits_each(*redis);
  EXPECT_TRUE(redis->uses_functions());
  EXPECT_GE(fcall_calls(raw) - before, 16);  // other tests may call too: at least ours
  const std::string list = raw.cmd({"FUNCTION", "LIST", "LIBRARYNAME", std::string(scripts::kLibraryName)});
  for (const auto& s : scripts::kAll) EXPECT_NE(list.find(s.function), std::string::npos) << list;
  EXPECT_NE(list.find(scripts::kGroup.function), std::string::npos) << list;
}

TEST(RedisFunctions, FunctionFlushEvery100MsDuringARunSurfacesNoErrors) {
  auto redis = open_url(single_url("timeout_ms=2000&pool=4&prefix=" + unique_prefix("fnflush")));
  ASSERT_NE(redis, nullptr);
  const auto policies = every_script();
  std::atomic<bool> stop{false};
  std::thread flusher([&] {
    Raw raw(single_port());
    while (!stop.load()) {
      raw.cmd({"FUNCTION", "FLUSH"});
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::atomic<int> errors{0}, calls{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < 3; ++t) {
    workers.emplace_back([&, t] {
      const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(1200);
      for (int i = 0; std::chrono::steady_clock::now() < end; ++i) {
        const auto d = redis->apply(policies[static_cast<std::size_t>(i) % policies.size()],
                                    fmt::format("k{}", t * 1000 + i % 50), 1, Effect::kHit, 0);
        calls.fetch_add(1);
        if (!d.ok()) errors.fetch_add(1);
      }
    });
  }
  for (auto& w : workers) w.join();
  stop.store(true);
  flusher.join();
  EXPECT_EQ(errors.load(), 0) << "of " << calls.load() << " calls";
  EXPECT_GT(redis->library_loads(), 1u);  // loaded again after the flushes
  EXPECT_TRUE(redis->uses_functions());
}

TEST(RedisFunctions, AUserWithoutFunctionsGetsTheSameDecisionsThroughEvalsha) {
  Raw raw(single_port());
  ASSERT_EQ(raw.cmd({"ACL", "SETUSER", "fg-no-functions", "on", ">pw", "~*", "&*", "+@all", "-fcall",
                     "-function"}), "OK");
  raw.cmd({"FUNCTION", "FLUSH"});  // the library is not there: FUNCTION LOAD is refused too
  auto redis = open_url("redis://fg-no-functions:pw@127.0.0.1:" + std::to_string(single_port()) +
                        "?timeout_ms=2000&prefix=" + unique_prefix("nofn"));
  ASSERT_NE(redis, nullptr);
  three_hits_each(*redis);
  EXPECT_FALSE(redis->uses_functions());
  EXPECT_EQ(redis->library_loads(), 0u);
  three_hits_each(*open_url(single_url("timeout_ms=2000&prefix=" + unique_prefix("withfn"))));
}

TEST(RedisFunctions, ScriptsEvalNeverLoadsTheLibrary) {
  auto redis = open_url(single_url("timeout_ms=2000&scripts=eval&prefix=" + unique_prefix("evalonly")));
  ASSERT_NE(redis, nullptr);
  EXPECT_FALSE(redis->uses_functions());
  Raw raw(single_port());
  raw.cmd({"FUNCTION", "FLUSH"});
  three_hits_each(*redis);
  EXPECT_EQ(redis->library_loads(), 0u);
}

}  // namespace
}  // namespace floodgate::redis
