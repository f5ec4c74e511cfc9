// Redis Sentinel against real servers (redis_fixture.sh start-sentinel: a master, a replica and
// three sentinels on loopback): a failover under a steady load of decisions, asked for
// (SENTINEL FAILOVER) and forced (kill -9 of the master). Every decision follows the fail mode
// while the store is switching, decisions come from the new master within a measured bound, and
// the old master receives no script call once the storage has switched (not as a deposed master,
// not as the replica it becomes).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "fake_resp.hpp"
#include "floodgate/limiter.hpp"
#include "test_support.hpp"

namespace floodgate::redis::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string sentinel_dir() { return FLOODGATE_REDIS_SENTINEL_DIR; }

std::vector<int> sentinel_ports() { return ports_in(sentinel_dir() + "/sentinel_ports"); }

std::string sentinel_url(const std::string& master, const std::string& query) {
  std::string hosts;
  for (int p : sentinel_ports()) hosts += (hosts.empty() ? "" : ",") + fmt::format("127.0.0.1:{}", p);
  return fmt::format("redis+sentinel://{}@{}?{}", master, hosts, query);
}

// The master's port as one sentinel says; 0 when it cannot say.
int master_port(int sentinel) {
  const std::string r = Raw(sentinel).cmd({"SENTINEL", "get-master-addr-by-name", "mymaster"});
  const std::size_t nl = r.find('\n');
  return nl == std::string::npos ? 0 : std::atoi(r.c_str() + nl + 1);
}

// The script calls a server ran (EVALSHA and EVAL; calls it refused, as READONLY, are not counted).
long long script_calls(int port) {
  const std::string info = Raw(port).cmd({"INFO", "commandstats"});
  long long n = 0;
  for (const char* name : {"cmdstat_evalsha:calls=", "cmdstat_eval:calls="}) {
    const std::size_t at = info.find(name);
    if (at != std::string::npos) n += std::atoll(info.c_str() + at + std::string_view(name).size());
  }
  return n;
}

std::string role(int port) {
  const std::string r = Raw(port).cmd({"ROLE"});
  return r.substr(0, r.find('\n'));
}

bool up(int port) {
  const std::string r = role(port);
  return r == "master" || r == "slave";
}

// The fixture's directory of the data node on `port`.
std::string node_of(int port) {
  return read_file(sentinel_dir() + "/data1/port") == std::to_string(port) ? "data1" : "data2";
}

// Waits up to `seconds` for `ok`.
template <class F>
bool wait_for(F ok, double seconds) {
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    if (ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return ok();
}

Policy with_fail(FailMode m) {
  return Policy::make(m == FailMode::kOpen ? "open" : "closed", Strategy::kFixedWindow, "1000000/hour",
                      PolicyOptions{.fail = m})
      .value();
}

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// A steady load: 4 threads, a decision every 2 ms each (2,000/s), half fail-open, half fail-closed.
class Load {
 public:
  explicit Load(Limiter& limiter) : limiter_(limiter) {
    for (int t = 0; t < 4; ++t) threads_.emplace_back([this, t] { run(t); });
  }
  ~Load() { stop(); }
  void stop() {
    stop_.store(true);
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  /// The first decision from the storage (not degraded) that started at or after `since`.
  void watch_from(Clock::time_point since) { since_ns_.store(since.time_since_epoch().count()); }
  [[nodiscard]] std::optional<Clock::time_point> first_after() const {
    const auto ns = first_ns_.load();
    if (ns == 0) return std::nullopt;
    return Clock::time_point(Clock::duration(ns));
  }
  std::atomic<long long> total{0}, from_storage{0}, degraded_open{0}, degraded_closed{0}, wrong{0};

 private:
  void run(int t) {
    const Policy open = with_fail(FailMode::kOpen);
    const Policy closed = with_fail(FailMode::kClosed);
    const auto start = Clock::now();
    for (int i = 0; !stop_.load(); ++i) {
      std::this_thread::sleep_until(start + std::chrono::milliseconds(2 * i));
      const Policy& p = i % 2 ? open : closed;
      const auto t0 = Clock::now();
      const auto d = limiter_.hit(p, fmt::format("k{}", t * 10 + i % 10));
      total.fetch_add(1);
      if (!d.ok()) {
        wrong.fetch_add(1);  // lost: a decision is always given
      } else if (!d->degraded) {
        from_storage.fetch_add(1);
        if (!d->allowed) wrong.fetch_add(1);  // far below the limit: the store allows
        const auto since = since_ns_.load();
        long long none = 0;
        if (since != 0 && t0.time_since_epoch().count() >= since) {
          first_ns_.compare_exchange_strong(none, Clock::now().time_since_epoch().count());
        }
      } else {
        (&p == &open ? degraded_open : degraded_closed).fetch_add(1);
        if (d->allowed != (&p == &open)) wrong.fetch_add(1);  // the fail mode decides
      }
    }
  }
  Limiter& limiter_;
  std::atomic<bool> stop_{false};
  std::atomic<long long> since_ns_{0}, first_ns_{0};
  std::vector<std::thread> threads_;
};

// The moments of a switch and the old master's script calls.
struct Switch {
  Clock::time_point trigger, agree, storage, back;
  int old_master = 0;
  int new_master = 0;
  long long deposed_at_agree = -1;  // the old master's script calls when the sentinels agreed (-1: down)
  long long old_calls = 0;          // … once the storage had switched
};

// What the load saw and the old master ran, checked and printed (the figures of docs/redis.md).
void check_and_report(const char* what, const Switch& s, const Load& load, const Limiter& limiter) {
  // No decision on the old master after the switch: neither while it was a deposed master nor as
  // the replica it is now (a restarted one has run none at all).
  EXPECT_EQ(script_calls(s.old_master), s.old_calls) << "script calls on the old master after the switch";
  EXPECT_EQ(role(s.new_master), "master");
  EXPECT_EQ(load.wrong.load(), 0) << "every decision from the store or by the fail mode";
  const long long degraded = load.degraded_open.load() + load.degraded_closed.load();
  EXPECT_EQ(load.total.load(), load.from_storage.load() + degraded);
  EXPECT_EQ(static_cast<long long>(limiter.degraded_count()), degraded);
  const double back_ms = ms_between(s.agree, s.back);
  EXPECT_LE(back_ms, 3000) << "decisions from the new master within 3 s of the sentinels' agreement";
  const std::string deposed =
      s.deposed_at_agree < 0 ? "none (it was down)" : std::to_string(s.old_calls - s.deposed_at_agree);
  std::printf("sentinel %s: the sentinels named the new master %.0f ms after the trigger; the storage used it "
              "%.0f ms later, first decision from it %.0f ms after the sentinels' agreement; degraded %lld of "
              "%lld decisions (%lld fail-open allowed, %lld fail-closed denied); decisions taken by the deposed "
              "master between the agreement and the switch: %s; on the old master after the switch: %lld\n",
              what, ms_between(s.trigger, s.agree), ms_between(s.agree, s.storage), back_ms, degraded,
              load.total.load(), load.degraded_open.load(), load.degraded_closed.load(), deposed.c_str(),
              script_calls(s.old_master) - s.old_calls);
  ::testing::Test::RecordProperty("recovery_ms", std::to_string(back_ms));
  ::testing::Test::RecordProperty("degraded", std::to_string(degraded));
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Whether every sentinel sees the master's replica in sync (flags exactly "slave", link ok) and
// knows the two other sentinels. A kill before that — right after a previous test's failover,
// while the deposed master is still resyncing — leaves the sentinels without a good replica to
// promote (-failover-abort-no-good-slave), and they try again only seconds later: in CI the kill
// test once waited 30 s for a failover that never came.
bool settled(const std::vector<int>& sentinels) {
  for (int port : sentinels) {
    Raw sentinel(port);
    const std::string replicas = sentinel.cmd({"SENTINEL", "replicas", "mymaster"});
    if (count(replicas, "flags\nslave\n") != 1 || count(replicas, "master-link-status\nok") != 1) return false;
    if (count(sentinel.cmd({"SENTINEL", "sentinels", "mymaster"}), "flags\nsentinel\n") != 2) return false;
  }
  return true;
}

// The sentinels' events (switch-master, sdown, convert-to-slave, …) from their logs, for a failure
// message: what the sentinels saw says why a failover or a reconfiguration did not come.
std::string sentinel_events() {
  std::string out;
  for (int i = 1; i <= 3; ++i) {
    const std::string log = read_file(fmt::format("{}/sentinel{}/redis.log", sentinel_dir(), i));
    std::size_t at = 0;
    while (at < log.size()) {
      const std::size_t end = std::min(log.find('\n', at), log.size());
      const std::string line = log.substr(at, end - at);
      if (line.find(" # +") != std::string::npos || line.find(" # -") != std::string::npos ||
          line.find(" * +") != std::string::npos) {
        out += fmt::format("sentinel{}: {}\n", i, line);
      }
      at = end + 1;
    }
  }
  return out;
}

// How long the sentinels may take to make a deposed master that is still up a replica: a sentinel
// converts it only once its role report is 8 s old (4 publish periods) and on its next INFO, sent
// every 10 s, so up to 18 s, and more on a loaded machine (15 s failed one run in six under load).
// The storage left it long before: what is checked is that it takes no decision meanwhile.
constexpr int kDeposedMasterConverted = 40;

// Runs `trigger` under load, waits for the switch, then `after` (the old master becomes a replica).
void failover_under_load(const char* what, const std::function<void(int old_master)>& trigger,
                         const std::function<void(int old_master)>& after) {
  const std::vector<int> sentinels = sentinel_ports();
  Switch s;
  ASSERT_TRUE(wait_for([&] { return settled(sentinels); }, 30)) << "the sentinels did not settle";
  s.old_master = master_port(sentinels[0]);
  ASSERT_GT(s.old_master, 0);
  const std::string prefix = unique_prefix("sentinel");
  auto storage = open_url(sentinel_url("mymaster", "timeout_ms=100&prefix=" + prefix));
  ASSERT_NE(storage, nullptr);
  ASSERT_EQ(storage->master()->port, s.old_master);
  Limiter limiter(storage);
  Load load(limiter);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  s.trigger = Clock::now();
  trigger(s.old_master);
  ASSERT_TRUE(wait_for([&] {  // the first sentinel that names another master
    for (int port : sentinels) {
      const int m = master_port(port);
      if (m != 0 && m != s.old_master) s.new_master = m;
    }
    return s.new_master != 0;
  }, 30)) << "the sentinels did not fail over\n" << sentinel_events();
  s.agree = Clock::now();
  s.deposed_at_agree = up(s.old_master) ? script_calls(s.old_master) : -1;
  ASSERT_TRUE(wait_for([&] { return storage->master() && storage->master()->port == s.new_master; }, 10));
  s.storage = Clock::now();
  load.watch_from(s.storage);
  ASSERT_TRUE(wait_for([&] { return load.first_after().has_value(); }, 5));
  s.back = *load.first_after();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // calls sent before the switch end
  s.old_calls = up(s.old_master) ? script_calls(s.old_master) : 0;  // a restart starts at 0
  after(s.old_master);
  ASSERT_EQ(role(s.old_master), "slave") << sentinel_events();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the load goes on
  load.stop();
  EXPECT_NE(Raw(s.new_master).cmd({"KEYS", prefix + "*"}), "") << "the state is on the new master";
  check_and_report(what, s, load, limiter);
}

TEST(RedisSentinel, SentinelFailoverUnderLoad) {
  failover_under_load(
      "SENTINEL FAILOVER",
      [](int) {  // (the replica of a previous test may still be syncing: NOGOODSLAVE until then)
        EXPECT_TRUE(wait_for([] { return Raw(sentinel_ports()[1]).cmd({"SENTINEL", "FAILOVER", "mymaster"}) == "OK"; }, 10));
      },
      [](int old_master) {  // the sentinels turn the deposed master into a replica
        EXPECT_TRUE(wait_for([&] { return role(old_master) == "slave"; }, kDeposedMasterConverted));
      });
}

TEST(RedisSentinel, Kill9OfTheMasterUnderLoad) {
  failover_under_load(
      "kill -9 of the master",
      [](int old_master) {
        const std::string pid = read_file(fmt::format("{}/{}/redis.pid", sentinel_dir(), node_of(old_master)));
        ASSERT_EQ(::kill(std::atoi(pid.c_str()), SIGKILL), 0);
      },
      [](int old_master) {  // restarted, it rejoins as a replica of the new master
        const std::string cmd = fmt::format("{} restart {} {} >/dev/null", FLOODGATE_REDIS_FIXTURE, sentinel_dir(),
                                            node_of(old_master));
        ASSERT_EQ(std::system(cmd.c_str()), 0);
        EXPECT_TRUE(wait_for([&] { return role(old_master) == "slave"; }, kDeposedMasterConverted));
      });
}

// Started before the sentinels know its master (StorageStart::kBackground, as `serve` does): the
// fail mode decides and probe() says why, then the master is found without a restart.
TEST(RedisSentinel, StartsBeforeTheSentinelsKnowTheMaster) {
  const std::string name = fmt::format("later{}", getpid());
  const std::string url = sentinel_url(name, "timeout_ms=100&prefix=" + unique_prefix("later"));
  auto options = parse_redis_url(*parse_storage_url(url));
  ASSERT_TRUE(options && options->ok());
  auto fail_fast = RedisStorage::open(**options);
  ASSERT_FALSE(fail_fast.ok());
  EXPECT_NE(fail_fast.status().message().find("does not know a master named"), std::string::npos) << fail_fast.status();
  auto storage = RedisStorage::open(**options, StorageStart::kBackground);
  ASSERT_TRUE(storage.ok()) << storage.status();
  Limiter limiter(*storage);
  const auto before = limiter.hit(with_fail(FailMode::kClosed), "k");
  ASSERT_TRUE(before.ok());
  EXPECT_TRUE(before->degraded && !before->allowed);
  EXPECT_FALSE((*storage)->probe().ok());
  const int master = master_port(sentinel_ports()[0]);
  for (int s : sentinel_ports()) {
    EXPECT_EQ(Raw(s).cmd({"SENTINEL", "MONITOR", name, "127.0.0.1", std::to_string(master), "2"}), "OK");
  }
  EXPECT_TRUE(wait_for([&] { return (*storage)->probe().ok(); }, 5));
  const auto after = limiter.hit(with_fail(FailMode::kClosed), "k");
  for (int s : sentinel_ports()) Raw(s).cmd({"SENTINEL", "REMOVE", name});
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(after->degraded);
  EXPECT_TRUE(after->allowed);
  EXPECT_EQ((*storage)->master()->port, master);
}

// A fake sentinel that names `master` in configuration epoch `epoch`.
FakeResp::Answer fake_sentinel(int master, int epoch) {
  return [master, epoch](const std::vector<std::string>& c) -> std::string {
    if (c.size() == 3 && c[0] == "SENTINEL" && c[1] == "get-master-addr-by-name" && c[2] == "mymaster") {
      return "*2\r\n" + bulk("127.0.0.1") + bulk(std::to_string(master));
    }
    if (c.size() == 3 && c[0] == "SENTINEL" && c[1] == "MASTER" && c[2] == "mymaster") {
      return "*6\r\n" + bulk("name") + bulk("mymaster") + bulk("config-epoch") + bulk(std::to_string(epoch)) +
             bulk("flags") + bulk("master");
    }
    return "-ERR unknown command\r\n";
  };
}

// A fake data node whose ROLE is `role` ("master" or "slave").
FakeResp::Answer fake_node(const std::string& role) {
  return [role](const std::vector<std::string>& c) -> std::string {
    if (c.size() == 1 && c[0] == "ROLE") {
      return role == "master" ? "*3\r\n" + bulk("master") + ":0\r\n*0\r\n"
                              : "*5\r\n" + bulk("slave") + bulk("127.0.0.1") + ":1\r\n" + bulk("connected") + ":0\r\n";
    }
    if (c.size() == 1 && c[0] == "PING") return "+PONG\r\n";
    return "-ERR unknown command\r\n";
  };
}

// Sentinels that disagree, as during a failover that some of them have not heard of yet: the
// storage follows the answer of the highest config epoch, though the stale sentinel is listed (and
// asked) first and the deposed master it names still says it is a master; a node that the highest
// epoch names but whose ROLE is not master is passed over. (Before: the first sentinel's answer
// was taken, and the storage stayed on the deposed master.)
TEST(RedisSentinel, FollowsTheSentinelWithTheHighestConfigEpoch) {
  FakeResp deposed(fake_node("master")), promoted(fake_node("master")), replica(fake_node("slave"));
  FakeResp stale(fake_sentinel(deposed.port(), 3)), fresh(fake_sentinel(promoted.port(), 4));
  FakeResp odd(fake_sentinel(replica.port(), 5));
  for (const std::string order : {"stale,odd,fresh", "fresh,stale,odd"}) {
    std::string hosts;
    for (const FakeResp* s : order[0] == 's' ? std::vector{&stale, &odd, &fresh} : std::vector{&fresh, &stale, &odd}) {
      hosts += (hosts.empty() ? "" : ",") + fmt::format("127.0.0.1:{}", s->port());
    }
    auto storage = open_url(fmt::format("redis+sentinel://mymaster@{}?timeout_ms=500", hosts));
    ASSERT_NE(storage, nullptr) << order;
    ASSERT_TRUE(storage->master().has_value()) << order;
    EXPECT_EQ(storage->master()->port, promoted.port()) << order << ": deposed " << deposed.port();
  }
}

// A sentinel (or node) that answers `answer`'s replies `delay` late, as a loaded machine does, and
// counts the commands it was sent.
struct Slow {
  FakeResp::Answer answer;
  std::chrono::milliseconds delay;
  std::shared_ptr<std::atomic<int>> commands = std::make_shared<std::atomic<int>>(0);
  FakeResp::Answer operator()() const {
    return [a = answer, d = delay, n = commands](const std::vector<std::string>& c) {
      n->fetch_add(1);
      std::this_thread::sleep_for(d);
      return a(c);
    };
  }
};

// The sentinel that names the new master (epoch 4) and the new master's ROLE answer later than a
// decision may take (timeout_ms=50), the stale sentinel (epoch 3, naming the deposed master that
// still says it is one) at once: the storage follows the new master, because the sentinels and
// the ROLE check have a timeout of their own (sentinel_timeout_ms). With the decisions' timeout
// they time out, and the storage stays on the deposed master.
TEST(RedisSentinel, FollowsASentinelThatAnswersLaterThanADecisionMay) {
  FakeResp deposed(fake_node("master"));
  FakeResp promoted(Slow{fake_node("master"), std::chrono::milliseconds(150)}());
  FakeResp stale(fake_sentinel(deposed.port(), 3));
  FakeResp fresh(Slow{fake_sentinel(promoted.port(), 4), std::chrono::milliseconds(150)}());
  const std::string hosts = fmt::format("127.0.0.1:{},127.0.0.1:{}", stale.port(), fresh.port());
  auto storage = open_url(fmt::format("redis+sentinel://mymaster@{}?timeout_ms=50", hosts));
  ASSERT_NE(storage, nullptr);
  ASSERT_TRUE(storage->master().has_value());
  EXPECT_EQ(storage->master()->port, promoted.port()) << "deposed " << deposed.port();
  // The mechanism: with the sentinels' timeout below their delay, the late answer is lost.
  auto hasty = open_url(fmt::format("redis+sentinel://mymaster@{}?timeout_ms=50&sentinel_timeout_ms=100", hosts));
  ASSERT_NE(hasty, nullptr);
  EXPECT_EQ(hasty->master()->port, deposed.port());
}

// A decision whose master answers READONLY fails at once (by its fail mode) and does not wait for
// the sentinels, which answer 300 ms late: it wakes the storage's thread, which asks them within
// 100 ms (not after sentinel_check_ms, 10 s here).
TEST(RedisSentinel, ADecisionDoesNotWaitForTheSentinels) {
  FakeResp replica([](const std::vector<std::string>& c) -> std::string {
    if (c.size() == 1 && c[0] == "ROLE") return "*3\r\n" + bulk("master") + ":0\r\n*0\r\n";  // not yet
    return "-READONLY You can't write against a read only replica.\r\n";
  });
  const Slow slow{fake_sentinel(replica.port(), 1), std::chrono::milliseconds(300)};
  FakeResp sentinel(slow());
  auto storage = open_url(fmt::format(
      "redis+sentinel://mymaster@127.0.0.1:{}?timeout_ms=100&sentinel_timeout_ms=2000&sentinel_check_ms=10000",
      sentinel.port()));
  ASSERT_NE(storage, nullptr);
  Limiter limiter(storage);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // the watcher's first round is over
  const int before = slow.commands->load();
  const auto t0 = Clock::now();
  const auto d = limiter.hit(with_fail(FailMode::kClosed), "k");
  const double took = ms_between(t0, Clock::now());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->degraded && !d->allowed);
  EXPECT_LT(took, 250) << "the decision waited for the sentinels";
  EXPECT_TRUE(wait_for([&] { return slow.commands->load() > before; }, 1)) << "the sentinels were not asked";
}

}  // namespace
}  // namespace floodgate::redis::testing
