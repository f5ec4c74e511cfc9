#include "floodgate/replay.hpp"

#include <sstream>

#include <gtest/gtest.h>

#include "floodgate/memory_storage.hpp"
#include "storage/url.hpp"

namespace floodgate {
namespace {

struct ReplayRun {
  absl::Status status;
  std::string out;
};

ReplayRun run(std::string_view trace, Strategy s = Strategy::kFixedWindow, std::string_view limit = "2/second",
        PolicyOptions o = {}) {
  const Policy p = Policy::make("t", s, limit, o).value();
  MemoryStorage storage;
  std::istringstream in{std::string(trace)};
  std::ostringstream out;
  ReplayRun r;
  r.status = replay(p, storage, in, out);
  r.out = out.str();
  return r;
}

int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

TEST(Replay, AnswersEveryLineInOrder) {
  const ReplayRun r = run("{\"t\": 0, \"key\": \"a\"}\n\n{\"t\": 0.5, \"key\": \"a\"}\n"
                    "{\"t\": 0.5, \"key\": \"a\", \"cost\": 1, \"extra\": true}\n");
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.out,
            "{\"allowed\": true, \"remaining\": 1, \"retry_after\": 0.0, \"reset_after\": 1.0}\n"
            "{\"allowed\": true, \"remaining\": 0, \"retry_after\": 0.0, \"reset_after\": 0.5}\n"
            "{\"allowed\": false, \"remaining\": 0, \"retry_after\": 0.5, \"reset_after\": 0.5}\n");
}

TEST(Replay, NeverIsNullAndShapeAddsDelay) {
  PolicyOptions o;
  o.shape = true;
  const ReplayRun r = run("{\"t\": 1, \"key\": \"a\", \"cost\": 3}\n{\"t\": 1, \"key\": \"a\"}\n"
                    "{\"t\": 1, \"key\": \"a\"}\n",
                    Strategy::kLeakyBucket, "2/second", o);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.out,
            "{\"allowed\": false, \"remaining\": 2, \"retry_after\": null, \"reset_after\": 0.0, \"delay\": 0.0}\n"
            "{\"allowed\": true, \"remaining\": 1, \"retry_after\": 0.0, \"reset_after\": 0.5, \"delay\": 0.0}\n"
            "{\"allowed\": true, \"remaining\": 0, \"retry_after\": 0.0, \"reset_after\": 1.0, \"delay\": 0.5}\n");
}

TEST(Replay, MalformedLineStopsWithItsNumberAfterAnsweringTheOnesBefore) {
  struct Bad {
    const char* line;
    const char* says;
  };
  const Bad cases[] = {
      {"{\"t\": 1, \"key\": ", "not valid JSON"},
      {"[1, 2]", "expected a JSON object"},
      {"{\"key\": \"a\"}", "missing \"t\""},
      {"{\"t\": \"soon\", \"key\": \"a\"}", "\"t\" must be a number"},
      {"{\"t\": -1, \"key\": \"a\"}", "finite number of seconds"},
      {"{\"t\": 0.5, \"key\": \"a\"}", "goes backwards"},
      {"{\"t\": 2}", "missing \"key\""},
      {"{\"t\": 2, \"key\": 7}", "\"key\" must be a string"},
      {"{\"t\": 2, \"key\": \"a\", \"cost\": -1}", "\"cost\" must be a whole number"},
      {"{\"t\": 2, \"key\": \"a\", \"cost\": 1.5}", "\"cost\" must be a whole number"},
      {"{\"t\": 2, \"key\": \"a\", \"cost\": 9007199254740993}", "\"cost\" must be a whole number"},
      {"{\"t\": 1e300, \"key\": \"a\"}", "finite number of seconds"},
  };
  for (const Bad& bad : cases) {
    const std::string trace = std::string("{\"t\": 1, \"key\": \"a\"}\n{\"t\": 1, \"key\": \"b\"}\n") +
                              bad.line + "\n{\"t\": 3, \"key\": \"a\"}\n";
    const ReplayRun r = run(trace);
    ASSERT_FALSE(r.status.ok()) << bad.line;
    EXPECT_EQ(r.status.code(), absl::StatusCode::kInvalidArgument);
    const std::string msg(r.status.message());
    EXPECT_EQ(msg.rfind("line 3: ", 0), 0u) << msg;
    EXPECT_NE(msg.find(bad.says), std::string::npos) << msg;
    EXPECT_EQ(lines(r.out), 2) << bad.line;  // the lines before it were answered
  }
}

// As over HTTP: a lease lives for its limit's time to live, so a concurrency trace's "ttl_ms" is
// refused, naming the line, after the lines before it were answered.
TEST(Replay, ALeaseTakesNoTtl) {
  const ReplayRun r = run("{\"t\": 0, \"key\": \"a\", \"reservation\": \"l1\"}\n"
                          "{\"t\": 1, \"key\": \"a\", \"reservation\": \"l2\", \"ttl_ms\": 1000}\n",
                          Strategy::kConcurrency, "2 concurrent for 1 minute");
  ASSERT_FALSE(r.status.ok());
  const std::string msg(r.status.message());
  EXPECT_EQ(msg.rfind("line 2: ", 0), 0u) << msg;
  EXPECT_NE(msg.find("\"ttl_ms\" is for reservations"), std::string::npos) << msg;
  EXPECT_EQ(lines(r.out), 1);
}

TEST(Replay, FormatSeconds) {
  EXPECT_EQ(format_seconds(0), "0.0");
  EXPECT_EQ(format_seconds(4'000'000), "4.0");
  EXPECT_EQ(format_seconds(250'000), "0.25");
  EXPECT_EQ(format_seconds(1), "0.000001");
  EXPECT_EQ(format_seconds(123'456'789), "123.456789");
}

TEST(Replay, StorageUrlRunsRedisOnTheTracesClock) {
  EXPECT_EQ(replay_storage_url("memory").value(), "memory");
  EXPECT_EQ(replay_storage_url("redis://127.0.0.1:6379").value(),
            "redis://127.0.0.1:6379?clock=client");
  EXPECT_EQ(replay_storage_url("redis-cluster://a:1,b:2?timeout_ms=30").value(),
            "redis-cluster://a:1,b:2?timeout_ms=30&clock=client");
  EXPECT_EQ(replay_storage_url("redis+unix:///tmp/r.sock?clock=client").value(),
            "redis+unix:///tmp/r.sock?clock=client");
  const auto refused = replay_storage_url("redis://h:1?clock=redis");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("clock=client"), std::string_view::npos);
  EXPECT_FALSE(replay_storage_url("").ok());
}

// The service logs its storage URL and shows it in the live view: never with the password.
TEST(StorageUrl, PasswordsAreRedactedInLogsAndErrors) {
  EXPECT_EQ(redact_storage_url("redis://app:s3cr@t@h:6379/2?pool=4"), "redis://app:***@h:6379/2?pool=4");
  EXPECT_EQ(redact_storage_url("redis://:pw@h"), "redis://:***@h");
  EXPECT_EQ(redact_storage_url("redis://user@h"), "redis://user@h");  // no password
  EXPECT_EQ(redact_storage_url("redis://h:6379?x=a@b"), "redis://h:6379?x=a@b");  // '@' in the query only
  EXPECT_EQ(redact_storage_url("memory"), "memory");
  const auto bad = parse_storage_url("redis://u:hunter2@h?pool");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().find("hunter2"), std::string_view::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("u:***@h"), std::string_view::npos) << bad.status().message();
  const auto unknown = open_storage("memory://u:hunter2@?shards=0");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message().find("hunter2"), std::string_view::npos) << unknown.status().message();
}

}  // namespace
}  // namespace floodgate
