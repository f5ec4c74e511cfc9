// The scripts as one Redis 7 function library (FCALL), against the redis_single fixture: loaded
// on demand, reloaded after FUNCTION FLUSH, and given up for EVALSHA where the server refuses
// functions (an ACL user without them); scripts=eval never loads it.
#include <gtest/gtest.h>

#include "storage/redis/scripts_gen.hpp"
#include "test_support.hpp"

namespace floodgate::redis {
namespace {

using namespace floodgate::redis::testing;

// Three hits on one key per script, and a group of two keys: each answered exactly.
void three_hits_each(RedisStorage& redis) {
  for (const Policy& p : one_policy_per_script()) {
    for (int i = 0; i < 3; ++i) {
      const auto d = redis.apply(p, "k", 1, Effect::kHit, 0);
      ASSERT_TRUE(d.ok()) << p.name() << ": " << d.status();
      EXPECT_TRUE(d->allowed);
      EXPECT_EQ(d->remaining, p.limits()[0].amount - 1 - i) << p.name();
    }
  }
  const auto policies = one_policy_per_script();
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
  const RunResult run = decide_while_flushing(*redis, {"FUNCTION", "FLUSH"});
  EXPECT_EQ(run.errors, 0) << "of " << run.calls << " calls";
  EXPECT_GT(redis->library_loads(), 1u);  // loaded again after the flushes
  EXPECT_TRUE(redis->uses_functions());
}

TEST(RedisFunctions, ABatchToAServerWithoutTheLibraryLoadsItOnce) {
  auto redis = open_url(single_url("timeout_ms=2000&prefix=" + unique_prefix("fnbatch")));
  ASSERT_NE(redis, nullptr);
  const auto policies = one_policy_per_script();
  std::vector<std::string> keys;
  for (int i = 0; i < 40; ++i) keys.push_back("k" + std::to_string(i));
  std::vector<Storage::BatchItem> items;
  for (int i = 0; i < 40; ++i) items.push_back({&policies[static_cast<std::size_t>(i) % policies.size()], keys[static_cast<std::size_t>(i)], 1, Effect::kHit});
  std::vector<absl::StatusOr<Decision>> out(items.size());
  // The fixture's Redis is shared with tests running in parallel: one of them may load the library
  // between the flush and the batch (then this batch loads nothing: try again), or flush it once
  // more (one more load).
  std::uint64_t loads = 0;
  for (int attempt = 0; attempt < 20 && loads == 0; ++attempt) {
    const std::uint64_t before = redis->library_loads();
    Raw(single_port()).cmd({"FUNCTION", "FLUSH"});
    redis->apply_batch(items, 0, out);
    for (const auto& d : out) ASSERT_TRUE(d.ok()) << d.status();
    loads = redis->library_loads() - before;
  }
  // 40 calls on one connection all missed the library: one FUNCTION LOAD in the retry, not 40.
  EXPECT_GE(loads, 1u);
  EXPECT_LE(loads, 2u);
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
