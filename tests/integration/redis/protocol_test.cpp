// The Redis storage's protocol logic without a server: slots, redirects, the CLUSTER SLOTS reply
// (fed to hiredis's reader as raw RESP), URLs, key names, policy checks, the breaker.
#include <hiredis/hiredis.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "floodgate/policy.hpp"
#include "storage/redis/node.hpp"
#include "storage/redis/protocol.hpp"

namespace floodgate::redis {
namespace {

TEST(RedisSlots, Crc16MatchesTheClusterSpec) {
  EXPECT_EQ(crc16("123456789"), 0x31C3);  // the reference value in the Redis Cluster spec
}

TEST(RedisSlots, KeySlotFollowsHashTags) {
  EXPECT_EQ(key_slot("foo"), 12182);
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("{user1000}.followers"));
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("user1000"));
  EXPECT_EQ(key_slot("foo{}{bar}"), crc16("foo{}{bar}") % 16384);  // empty tag: whole key
  EXPECT_EQ(key_slot("foo{{bar}}zap"), key_slot("{bar"));
  EXPECT_EQ(key_slot("foo{bar}{zap}"), key_slot("bar"));
}

// A call is routed by its key's slot in a cluster only; a single server and Sentinel's master
// have none (every call 0).
TEST(RedisSlots, CallSlotIsTheKeySlotInAClusterOnly) {
  RedisOptions single;
  RedisOptions cluster;
  cluster.cluster = true;
  for (const std::string key : {"foo", "{user1000}.following", "fg:{user:42}:abc:0"}) {
    EXPECT_EQ(call_slot(cluster, key), key_slot(key)) << key;
    EXPECT_EQ(call_slot(single, key), 0) << key;
  }
  EXPECT_NE(call_slot(cluster, "foo"), 0);
}

TEST(RedisKeys, AllLimitsOfAKeyShareASlotEvenForOddKeys) {
  for (const std::string key : {"", "}", "}}x", "\x01", "{", "a}b", "user-42", "{x}"}) {
    const int slot = key_slot(state_key("p:", key, 7, 0));
    for (std::size_t i = 1; i < 16; ++i) EXPECT_EQ(key_slot(state_key("p:", key, 7, i)), slot) << key;
  }
  EXPECT_EQ(state_key("p:", "user-42", 0xabc, 2), "p:{user-42}:0000000000000abc:2");
  // One-to-one: escaped keys do not meet unescaped ones.
  EXPECT_NE(state_key("p:", "}", 1, 0), state_key("p:", "\x01}", 1, 0));
  EXPECT_NE(state_key("p:", "", 1, 0), state_key("p:", "\x01", 1, 0));
}

TEST(RedisKeys, PolicyHashIsStableKeepsAcrossAmountsAndChangesWithThePeriod) {
  auto a = Policy::make("api", Strategy::kGcra, "10/second").value();
  auto b = Policy::make("api", Strategy::kGcra, "11/second").value();
  auto c = Policy::make("api", Strategy::kGcra, "10/minute").value();
  auto d = Policy::make("api", Strategy::kTokenBucket, "10/second").value();
  EXPECT_EQ(policy_hash(a), policy_hash(b));
  EXPECT_NE(policy_hash(a), policy_hash(c));
  EXPECT_NE(policy_hash(a), policy_hash(d));
}

TEST(RedisRedirect, ParsesMovedAndAsk) {
  auto m = parse_redirect("MOVED 3999 127.0.0.1:6381");
  ASSERT_TRUE(m);
  EXPECT_FALSE(m->ask);
  EXPECT_EQ(m->slot, 3999);
  EXPECT_EQ(m->target.host, "127.0.0.1");
  EXPECT_EQ(m->target.port, 6381);
  auto a = parse_redirect("ASK 12 [::1]:7000");
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->ask);
  EXPECT_EQ(a->target.host, "::1");
  EXPECT_EQ(a->target.port, 7000);
  EXPECT_FALSE(parse_redirect("NOSCRIPT No matching script"));
  EXPECT_FALSE(parse_redirect("MOVED x 1.2.3.4:5"));
  EXPECT_FALSE(parse_redirect("MOVED 16384 1.2.3.4:5"));
  EXPECT_FALSE(parse_redirect("MOVED 1 1.2.3.4"));
}

// What follows a reply, without a socket (RedisStorage::run only acts on it).
TEST(RedisNextStep, ClassifiesEveryKindOfReply) {
  using K = NextStep::Kind;
  EXPECT_EQ(next_step(false, "", true, true, "s:1").kind, K::kDone);
  EXPECT_EQ(next_step(true, "NOSCRIPT No matching script", true, false, "s:1").kind, K::kResendWithEval);
  // NOSCRIPT to a plain command is an error, not a resend.
  EXPECT_EQ(next_step(true, "NOSCRIPT No matching script", false, false, "s:1").kind, K::kFail);
  const NextStep moved = next_step(true, "MOVED 3999 127.0.0.1:6381", true, true, "s:1");
  EXPECT_EQ(moved.kind, K::kMoved);
  EXPECT_EQ(moved.redirect.slot, 3999);
  EXPECT_EQ(moved.redirect.target.port, 6381);
  const NextStep ask = next_step(true, "ASK 12 10.0.0.2:7000", false, true, "s:1");
  EXPECT_EQ(ask.kind, K::kAsk);
  EXPECT_EQ(ask.redirect.target.host, "10.0.0.2");
  // A redirect from a server that is not a cluster is not followed: it fails the call.
  EXPECT_EQ(next_step(true, "MOVED 3999 127.0.0.1:6381", true, false, "s:1").kind, K::kFail);
  // FCALL: a missing library is loaded; a refused command turns the library off; a NOPERM about
  // a key is the call's own error. None of it applies to EVALSHA or a plain command.
  EXPECT_EQ(next_step(true, "ERR Function not found", true, false, "s:1", true).kind, K::kLoadLibrary);
  EXPECT_EQ(next_step(true, "ERR Function not found", true, false, "s:1", false).kind, K::kFail);
  EXPECT_EQ(next_step(true, "ERR unknown command 'FCALL', with args beginning with: 'fg_x' ", true,
                      false, "s:1", true).kind, K::kWithoutFunctions);
  EXPECT_EQ(next_step(true, "NOPERM User u has no permissions to run the 'fcall' command", true,
                      false, "s:1", true).kind, K::kWithoutFunctions);
  EXPECT_EQ(next_step(true, "NOPERM No permissions to access a key", true, false, "s:1", true).kind,
            K::kFail);
  EXPECT_EQ(next_step(true, "NOPERM User u has no permissions to run the 'evalsha' command", true,
                      false, "s:1", false).kind, K::kFail);
  EXPECT_TRUE(functions_refused("NOPERM User u has no permissions to run the 'function|load' command"));
  EXPECT_FALSE(functions_refused("OOM command not allowed when used memory > 'maxmemory'."));
  const NextStep err = next_step(true, "WRONGTYPE Operation against a key", true, true, "s:1");
  EXPECT_EQ(err.kind, K::kFail);
  EXPECT_EQ(err.error.code(), absl::StatusCode::kInternal);
  EXPECT_NE(err.error.message().find("redis s:1: WRONGTYPE"), absl::string_view::npos);
}

redisReply* read_resp(const std::string& resp) {
  redisReader* reader = redisReaderCreate();
  redisReaderFeed(reader, resp.data(), resp.size());
  void* reply = nullptr;
  EXPECT_EQ(redisReaderGetReply(reader, &reply), REDIS_OK);
  redisReaderFree(reader);
  return static_cast<redisReply*>(reply);
}

TEST(RedisClusterSlots, ParsesTheReply) {
  const std::string resp =
      "*2\r\n"
      "*3\r\n:0\r\n:5460\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$4\r\nnode\r\n"
      "*4\r\n:5461\r\n:16383\r\n*3\r\n$0\r\n\r\n:7001\r\n$2\r\nid\r\n*2\r\n$9\r\n127.0.0.1\r\n:7002\r\n";
  redisReply* r = read_resp(resp);
  ASSERT_NE(r, nullptr);
  auto ranges = parse_cluster_slots(r, "10.0.0.9");
  freeReplyObject(r);
  ASSERT_TRUE(ranges.ok()) << ranges.status();
  ASSERT_EQ(ranges->size(), 2u);
  EXPECT_EQ((*ranges)[0].first, 0);
  EXPECT_EQ((*ranges)[0].last, 5460);
  EXPECT_EQ((*ranges)[0].master.name(), "127.0.0.1:7000");
  EXPECT_EQ((*ranges)[1].master.name(), "10.0.0.9:7001");  // empty host: the node asked
}

TEST(RedisClusterSlots, RejectsMalformedReplies) {
  redisReply* r = read_resp("*1\r\n*2\r\n:0\r\n:5\r\n");
  EXPECT_FALSE(parse_cluster_slots(r, "h").ok());
  freeReplyObject(r);
  r = read_resp("-ERR This instance has cluster support disabled\r\n");
  EXPECT_FALSE(parse_cluster_slots(r, "h").ok());
  freeReplyObject(r);
}

// append_resp writes the bytes hiredis's own formatter writes, for any arguments: empty ones,
// binary ones (a NUL, CR LF, a '$'), long ones, and commands one after another in one buffer.
TEST(RedisResp, AppendRespWritesWhatHiredisFormats) {
  const std::string binary("a\0b\r\n$3\r\n", 10);
  const std::string long_arg(100000, 'x');
  const std::vector<std::vector<std::string>> commands = {
      {"PING"},
      {"FCALL", "fg_0123_fixed_window", "1", "fg:{user:42}:abc:0", "", "1", "1", "0", "0", "1000000", "1000000"},
      {"SET", binary, long_arg},
      {"GET", ""},
      {"ASKING"}};
  std::string ours;
  std::string theirs;
  for (const auto& command : commands) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const auto& a : command) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    append_resp(ours, static_cast<int>(argv.size()), argv.data(), lens.data());
    char* cmd = nullptr;
    const int n = redisFormatCommandArgv(&cmd, static_cast<int>(argv.size()), argv.data(), lens.data());
    ASSERT_GT(n, 0);
    theirs.append(cmd, static_cast<std::size_t>(n));
    redisFreeCommand(cmd);
    EXPECT_EQ(ours, theirs) << command[0];
  }
  EXPECT_GT(ours.size(), long_arg.size());
}

// Several limits: the 8th integer is the named limit's own reset.
TEST(RedisDecisionReply, TheEighthIntegerIsTheNamedLimitsReset) {
  redisReply* r = read_resp("$33\r\n1 10 1000000 9 3600000 0 0 100000\r\n");
  auto d = parse_decision(r);
  freeReplyObject(r);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->reset_after, 3'600'000);
  EXPECT_EQ(d->limit_reset_after, 100'000);
  r = read_resp("$28\r\n0 10 60000000 0 5000000 -1 0\r\n");
  d = parse_decision(r);
  freeReplyObject(r);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->limit_reset_after, 0);
}

TEST(RedisDecisionReply, ParsesSevenIntegersAndNever) {
  redisReply* r = read_resp("$28\r\n0 10 60000000 0 5000000 -1 0\r\n");
  auto d = parse_decision(r);
  freeReplyObject(r);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->allowed);
  EXPECT_EQ(d->limit, 10);
  EXPECT_EQ(d->period, 60'000'000);
  EXPECT_EQ(d->remaining, 0);
  EXPECT_EQ(d->reset_after, 5'000'000);
  EXPECT_EQ(d->retry_after, kNever);
  EXPECT_EQ(d->delay, 0);
  r = read_resp("$43\r\n1 9007199254740992 1 2 3 4 9007199254740991\r\n");
  d = parse_decision(r);
  freeReplyObject(r);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->allowed);
  EXPECT_EQ(d->limit, 9007199254740992);
  EXPECT_EQ(d->retry_after, 4);
  EXPECT_EQ(d->delay, 9007199254740991);
}

// The one reply form: one string of 7 integers (8 and two a limit after several limits, one more
// after a settle) with single spaces. A table of integers, and the short form, are refused.
TEST(RedisDecisionReply, RejectsAnythingButAStringOfSevenOrEightIntegers) {
  for (const char* resp : {"*7\r\n:0\r\n:10\r\n:60000000\r\n:0\r\n:5\r\n:-1\r\n:0\r\n",
                           "*4\r\n:-1\r\n:0\r\n:1000000\r\n:-1\r\n", ":1\r\n", "$0\r\n\r\n",
                           "$11\r\n1 1 1 1 1 1\r\n",      // 6 integers
                           "$19\r\n1 1 1 1 1 1 1 1 1 1\r\n",  // 10: one limit's balance
                           "$17\r\n1 1 1 1 1 1 1 1 4\r\n",  // a settle's outcome out of 1 to 3
                           "$14\r\n1 1 1 1 1 1 1 \r\n",   // a trailing space
                           "$14\r\n1 1 1  1 1 1 1\r\n",   // two spaces
                           "$13\r\n1 1 1 1 1 1 x\r\n",    // not a number
                           "$14\r\n1 1 1 1 1 1 +1\r\n",   // a sign Lua's %d never writes
                           "$13\r\n2 1 1 1 1 1 1\r\n",    // allowed is 0 or 1
                           "$32\r\n1 1 1 1 1 1 99999999999999999999\r\n",  // beyond 64 bits
                           "-ERR floodgate: key k holds a value floodgate did not write\r\n"}) {
    redisReply* r = read_resp(resp);
    ASSERT_NE(r, nullptr) << resp;
    EXPECT_FALSE(parse_decision(r).ok()) << resp;
    freeReplyObject(r);
  }
}

TEST(RedisGroupReply, ParsesCommittedAndOneStringPerItem) {
  redisReply* r = read_resp("*3\r\n:1\r\n$19\r\n1 5 1000000 4 1 0 0\r\n$20\r\n0 2 60000000 0 7 7 0\r\n");
  std::vector<Decision> out;
  bool committed = false;
  ASSERT_TRUE(parse_group(r, 2, out, committed).ok());
  EXPECT_TRUE(committed);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[0].allowed);
  EXPECT_EQ(out[0].remaining, 4);
  EXPECT_FALSE(out[1].allowed);
  EXPECT_EQ(out[1].period, 60'000'000);
  EXPECT_EQ(out[1].retry_after, 7);
  EXPECT_FALSE(parse_group(r, 3, out, committed).ok());  // one item short
  freeReplyObject(r);
  r = read_resp("*2\r\n:0\r\n$13\r\n1 5 1000000 4\r\n");
  EXPECT_FALSE(parse_group(r, 1, out, committed).ok());
  freeReplyObject(r);
}

absl::StatusOr<RedisOptions> parse(const std::string& url) {
  auto u = parse_storage_url(url);
  if (!u.ok()) return u.status();
  auto o = parse_redis_url(*u);
  if (!o) return absl::NotFoundError("not redis");
  return *o;
}

TEST(RedisUrl, ParsesTheThreeSchemesAndOptions) {
  auto o = parse("redis://user:secret@db.example:6380/3?timeout_ms=20&pool=4&prefix=rl:&clock=client");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->cluster);
  EXPECT_EQ(o->seeds.at(0).name(), "db.example:6380");
  EXPECT_EQ(o->user, "user");
  EXPECT_EQ(o->password, "secret");
  EXPECT_EQ(o->db, 3);
  EXPECT_EQ(o->timeout.count(), 20);
  EXPECT_EQ(o->pool, 4u);
  EXPECT_EQ(o->prefix, "rl:");
  EXPECT_TRUE(o->client_clock);

  o = parse("redis://localhost");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->seeds.at(0).port, 6379);
  EXPECT_EQ(o->timeout.count(), 50);  // tens of ms, not seconds
  EXPECT_FALSE(o->client_clock);
  EXPECT_TRUE(o->functions);
  EXPECT_FALSE(parse("redis://localhost?scripts=eval")->functions);
  EXPECT_TRUE(parse("redis://localhost?scripts=functions")->functions);

  o = parse("redis+unix:///run/redis.sock?pool=2");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->seeds.at(0).unix_path, "/run/redis.sock");

  o = parse("redis-cluster://a:7000,b:7001,[::1]:7002");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->cluster);
  ASSERT_EQ(o->seeds.size(), 3u);
  EXPECT_EQ(o->seeds[2].host, "::1");

  EXPECT_EQ(parse("memory://").status().code(), absl::StatusCode::kNotFound);
}

TEST(RedisUrl, RejectsBadOptionsWithoutQuotingThePassword) {
  for (const std::string bad :
       {"redis://h:0", "redis://h:x", "redis://h?timeout_ms=0", "redis://h?pool=-1",
        "redis://h?clock=sundial", "redis://h?scripts=lua", "redis://h?scripts=", "redis://h?prefix=a{b", "redis://h?colour=blue",
        "redis://h/notadb", "redis-cluster://a:1/2", "redis://a:1,b:2", "redis+unix://host/x"}) {
    auto o = parse(bad);
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  auto o = parse("redis://u:hunter2@h?pool=0");
  EXPECT_EQ(o.status().message().find("hunter2"), std::string::npos) << o.status();
}

// key_layout=envoyproxy: envoyproxy/ratelimit's key names (its limiter/cache_key.go): the window
// start is unix seconds floored to the unit, the month being 30 days as there.
TEST(RedisEnvoyproxyKeys, NameTheWindowAsEnvoyproxyDoes) {
  const Micros now = 1'700'000'123'456'789;
  EXPECT_EQ(envoyproxy_key("", "d_k_v_", kMicrosPerSecond, now), "d_k_v_1700000123");
  EXPECT_EQ(envoyproxy_key("p_", "d_k_v_", 60 * kMicrosPerSecond, now), "p_d_k_v_1700000100");
  EXPECT_EQ(envoyproxy_key("", "d_k_v_", 3600 * kMicrosPerSecond, now), "d_k_v_1699999200");
  EXPECT_EQ(envoyproxy_key("", "d_k_v_", 86400 * kMicrosPerSecond, now), "d_k_v_1699920000");
  EXPECT_EQ(envoyproxy_key("", "d_k_v_", 30 * 86400 * kMicrosPerSecond, now), "d_k_v_1697760000");
  auto o = parse("redis://h?key_layout=envoyproxy&envoyproxy_prefix=erl_");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->envoyproxy_keys);
  EXPECT_EQ(o->envoyproxy_prefix, "erl_");
  EXPECT_FALSE(parse("redis://h")->envoyproxy_keys);
  EXPECT_EQ(parse("redis://h?key_layout=erl").status().message(),
            "storage URL \"redis://h…\": option key_layout=erl must be floodgate or envoyproxy");
  EXPECT_EQ(parse("redis://h?envoyproxy_prefix=x").status().message(),
            "storage URL \"redis://h…\": option envoyproxy_prefix needs key_layout=envoyproxy");
}

// redis+sentinel://master-name@sentinels: the data nodes' credentials are options (the user info
// holds the master's name), the sentinels' own are sentinel_user/sentinel_password.
TEST(RedisUrl, ParsesSentinelUrls) {
  auto o = parse("redis+sentinel://mymaster@a:26380,b/2?user=app&password=p&sentinel_password=sp&sentinel_check_ms=100&sentinel_timeout_ms=700");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->sentinel_master, "mymaster");
  ASSERT_EQ(o->seeds.size(), 2u);
  EXPECT_EQ(o->seeds[0].name(), "a:26380");
  EXPECT_EQ(o->seeds[1].name(), "b:26379");  // Sentinel's port
  EXPECT_EQ(o->user, "app");
  EXPECT_EQ(o->password, "p");
  EXPECT_EQ(o->sentinel_user, "");
  EXPECT_EQ(o->sentinel_password, "sp");
  EXPECT_EQ(o->sentinel_check.count(), 100);
  EXPECT_EQ(o->sentinel_timeout.count(), 700);
  EXPECT_EQ(o->timeout.count(), 50);  // the decisions' own
  EXPECT_EQ(o->db, 2);
  EXPECT_FALSE(o->tls.enabled || o->cluster);
  o = parse("rediss+sentinel://m@a?tls_ca_file=/ca.pem&tls_verify_hostname=false");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->tls.enabled);
  EXPECT_FALSE(o->tls.verify_hostname);
  EXPECT_EQ(o->sentinel_check.count(), 100);
  EXPECT_EQ(o->sentinel_timeout.count(), 500);
  for (const std::string bad : {"redis+sentinel://a:26379", "redis+sentinel://m:pw@a", "redis+sentinel://m@",
                                "redis://h?password=x", "redis://h?sentinel_check_ms=100",
                                "redis://h?sentinel_timeout_ms=100", "redis+sentinel://m@a?sentinel_timeout_ms=0",
                                "redis+sentinel://m@a?sentinel_check_ms=0", "redis+sentinel://m@a?tls_ca_file=x"}) {
    EXPECT_EQ(parse(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  const std::string shown = redact_storage_url("redis+sentinel://m@a?password=hunter2&pool=2&sentinel_password=s3");
  EXPECT_EQ(shown, "redis+sentinel://m@a?password=***&pool=2&sentinel_password=***");
}

TEST(RedisSentinelReplies, MasterAddressAndRole) {
  redisReply* r = read_resp("*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6380\r\n");
  auto addr = parse_master_addr(r, "m");
  freeReplyObject(r);
  ASSERT_TRUE(addr.ok()) << addr.status();
  EXPECT_EQ(addr->name(), "127.0.0.1:6380");
  r = read_resp("*-1\r\n");
  EXPECT_EQ(parse_master_addr(r, "m").status().code(), absl::StatusCode::kNotFound);
  freeReplyObject(r);
  r = read_resp("-NOAUTH Authentication required.\r\n");
  EXPECT_EQ(parse_master_addr(r, "m").status().code(), absl::StatusCode::kUnavailable);
  freeReplyObject(r);
  r = read_resp("*2\r\n$9\r\n127.0.0.1\r\n$1\r\nx\r\n");
  EXPECT_EQ(parse_master_addr(r, "m").status().code(), absl::StatusCode::kInternal);
  freeReplyObject(r);
  r = read_resp("*3\r\n$6\r\nmaster\r\n:10\r\n*0\r\n");
  EXPECT_TRUE(role_is_master(r));
  freeReplyObject(r);
  r = read_resp("*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:6379\r\n$9\r\nconnected\r\n:10\r\n");
  EXPECT_FALSE(role_is_master(r));
  freeReplyObject(r);
}

// SENTINEL MASTER's config-epoch: which of two disagreeing sentinels knows the later failover.
TEST(RedisSentinelReplies, ConfigEpoch) {
  redisReply* r = read_resp("*6\r\n$4\r\nname\r\n$1\r\nm\r\n$12\r\nconfig-epoch\r\n$2\r\n17\r\n$5\r\nflags\r\n$6\r\nmaster\r\n");
  auto epoch = parse_config_epoch(r);
  freeReplyObject(r);
  ASSERT_TRUE(epoch.ok()) << epoch.status();
  EXPECT_EQ(*epoch, 17);
  r = read_resp("-ERR No such master with that name\r\n");
  EXPECT_EQ(parse_config_epoch(r).status().code(), absl::StatusCode::kUnavailable);
  freeReplyObject(r);
  r = read_resp("*2\r\n$4\r\nname\r\n$1\r\nm\r\n");  // no config-epoch
  EXPECT_EQ(parse_config_epoch(r).status().code(), absl::StatusCode::kInternal);
  freeReplyObject(r);
  r = read_resp("*2\r\n$12\r\nconfig-epoch\r\n$2\r\n-1\r\n");
  EXPECT_EQ(parse_config_epoch(r).status().code(), absl::StatusCode::kInternal);
  freeReplyObject(r);
}

// A replica answers a write with READONLY: the call fails (the fail mode decides, it is never an
// answer) and the master is asked for again.
TEST(RedisNextStep, ReadOnlyFailsTheCallAndAsksForTheMaster) {
  const NextStep step = next_step(true, "READONLY You can't write against a read only replica.", true, false, "s:1");
  EXPECT_EQ(step.kind, NextStep::Kind::kReadOnly);
  EXPECT_EQ(step.error.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(step.error.message().find("s:1 is a replica now"), absl::string_view::npos);
}

TEST(RedisPolicyCheck, RejectsWhatDoublesCannotHoldNamingTheLimit) {
  auto ok = Policy::make("p", Strategy::kGcra, "9007199254740992/second").value();
  EXPECT_TRUE(check_policy(ok).ok());
  auto slow = Policy::make("slow", Strategy::kTokenBucket, "1 per 50 years").value();
  EXPECT_TRUE(check_policy(slow).ok());  // 50 years: below 2^51 µs
  // A bucket that drains longer than 2^52 µs is refused by Policy::make on every store; a window
  // longer than 2^51 µs by this check.
  EXPECT_FALSE(Policy::make("huge", Strategy::kTokenBucket, "1/year burst 1000").ok());
  auto long_period = Policy::make("w", Strategy::kFixedWindow, "1 per 100 years").value();
  const absl::Status s = check_policy(long_period);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("policy \"w\""), std::string::npos) << s;
}

TEST(RedisScriptArgs, SplitsBucketProductsExactly) {
  // 3 per second burst 5: capacity·P = 5,000,000 = 1,666,666·3 + 2; cost 2: 2,000,000 = 666,666·3 + 2
  auto p = Policy::make("p", Strategy::kGcra, "3/second burst 5").value();
  std::vector<std::string> args;
  script_args(p, 2, true, 42, 0, args, 42);
  const std::vector<std::string> want{"42", "2", "1", "0", "0", "3", "1000000",
                                      "5", "1666666", "2", "666666", "2"};
  EXPECT_EQ(args, want);
  args.clear();
  script_args(p, 6, false, std::nullopt, 0, args, 42);  // above the capacity: cap_w + 1, 0
  EXPECT_EQ(args[0], "");
  EXPECT_EQ(args[10], "1666667");
  EXPECT_EQ(args[11], "0");
}

TEST(RedisBreaker, OpensAfterConsecutiveFailuresAndClosesOnSuccess) {
  using namespace std::chrono_literals;
  Breaker b(3, 500ms, 10ms, 1000ms);
  const SteadyTime t0{};
  EXPECT_TRUE(b.allows_call(t0));
  b.on_failure(t0);
  b.on_failure(t0);
  EXPECT_TRUE(b.allows_call(t0));
  b.on_failure(t0);
  EXPECT_FALSE(b.allows_call(t0 + 499ms));
  EXPECT_TRUE(b.allows_call(t0 + 500ms));  // half open: a trial goes through
  b.on_failure(t0 + 500ms);                // and fails: open again
  EXPECT_FALSE(b.allows_call(t0 + 900ms));
  b.on_success();
  b.on_failure(t0 + 2000ms);
  EXPECT_TRUE(b.allows_call(t0 + 2000ms));  // the count started over
}

TEST(RedisBreaker, ReconnectBackoffDoublesWithJitterUpToTheMaximum) {
  using namespace std::chrono_literals;
  Breaker b(1000, 500ms, 10ms, 80ms);
  SteadyTime t{};
  for (int i = 0; i < 8; ++i) {
    b.on_connect_failure(t);
    const long long nominal = std::min<long long>(80, 10LL << i);
    EXPECT_FALSE(b.allows_connect(t + std::chrono::milliseconds(nominal * 3 / 4 - 1))) << i;
    EXPECT_TRUE(b.allows_connect(t + std::chrono::milliseconds(nominal * 5 / 4 + 1))) << i;
  }
  b.on_connect_success();
  b.on_connect_failure(t);
  EXPECT_TRUE(b.allows_connect(t + 13ms));  // back to the minimum
}

}  // namespace
}  // namespace floodgate::redis
