// The quota table: for each tracked bucket (a domain and bucket_id that a kLimit rule matches),
// the clients that report it, their demand and what each holds. Reports, clients leaving and time
// passing rebalance a bucket by fair_split; the table returns every assignment that changed.
#pragma once

#include <atomic>
#include <map>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "floodgate/clock.hpp"
#include "server/rlqs/fair_split.hpp"

namespace floodgate::server::rlqs {

/// A stream: the server cannot tell a reconnecting Envoy from a new one, so each stream is a client.
using ClientId = std::uint64_t;

/// What one client is to hold for one bucket from now on.
struct Assignment {
  ClientId client = 0;
  std::string key;                  ///< the bucket's key (bucket_key)
  Shape shape;                      ///< the rule's token bucket shape
  std::uint64_t tokens_per_fill = 0;  ///< 0: a zero share (sent as DENY_ALL)
  std::uint32_t max_tokens = 1;
  /// Whole seconds: silent_intervals of the client's report interval after its last report, when
  /// the table stops counting its share.
  std::uint32_t ttl_seconds = 15;
  /// Increases with every assignment the table makes: of two for one client and bucket, the
  /// later one is the one in force (pushes from several threads may arrive out of order).
  std::uint64_t seq = 0;
};

struct TableOptions {
  /// Tracked buckets at most; a report of a new bucket beyond it is refused (counted).
  std::size_t max_buckets = 100'000;
  /// Tracked (client, bucket) pairs at most, likewise.
  std::size_t max_entries = 1'000'000;
  /// A client's report interval until its time_elapsed says otherwise (Envoy reports every 5 s).
  Micros default_interval = 5 * kMicrosPerSecond;
  /// A client silent for this many of its intervals gives its share back.
  int silent_intervals = 3;
  /// Buckets of more clients than this are rebalanced at most every rebalance_gap (a report in
  /// between is answered with what its client holds, renewed); a new client or rule at once.
  std::size_t eager_clients = 16;
  Micros rebalance_gap = kMicrosPerSecond;
  SplitOptions split;
  /// The rate is shared with other instances through a store (sync.hpp): a bucket's clients are
  /// split the budget granted to this instance (0 until its first grant), not the whole total.
  bool shared = false;
};

/// One usage report of one bucket.
struct Report {
  ClientId client = 0;
  std::string key;
  Shape shape;
  Micros now = 0;
  std::int64_t elapsed_seconds = 0;  ///< Envoy's time_elapsed, whole seconds; 0 in a first report
  std::uint64_t allowed = 0;
  std::uint64_t denied = 0;
  std::string domain{};  ///< for the metrics
  std::string rule{};    ///< the rule's name (Rule::name), for the metrics
};

/// Thread-safe: every method takes the table's lock (rebalancing one bucket is O(clients log clients)).
class Table {
 public:
  explicit Table(TableOptions options = {}) : options_(options) {}

  /// Records the report, drops the bucket's silent clients and rebalances the bucket. Appends to
  /// `out` the reporter's assignment (always) and every other client's that changed. False: the
  /// bucket is new and the table is full (nothing recorded, refused() counts it).
  bool report(const Report& report, std::vector<Assignment>& out);
  /// The client is gone (its stream closed) from `keys`: their other clients are rebalanced.
  void leave(ClientId client, const std::vector<std::string>& keys, Micros now, std::vector<Assignment>& out);
  /// Drops every client silent for silent_intervals and every bucket left without clients;
  /// rebalances the buckets that lost one or have reports not yet rebalanced. O(tracked buckets).
  void sweep(Micros now, std::vector<Assignment>& out);

  [[nodiscard]] std::size_t buckets() const;
  [[nodiscard]] std::size_t entries() const;
  [[nodiscard]] std::uint64_t refused() const noexcept { return refused_.load(std::memory_order_relaxed); }

  /// The sum over clients of tokens_per_fill held in `key` (0 when untracked): for tests.
  [[nodiscard]] std::uint64_t held_sum(const std::string& key) const;

  /// What this instance holds and wants of a bucket, for its sync with the others (sync.hpp).
  struct Local {
    std::string key;
    Shape shape;
    std::vector<Claim> claims;    ///< its clients' demands and what they hold
    std::uint64_t requested = 0;  ///< the grant to ask for (the last sync's own fair share)
    bool fresh = false;           ///< never granted yet
  };
  /// Which buckets locals() gives: every one; those never granted yet; those granted less than
  /// they asked at their last sync (the other instances had not given it back yet).
  enum class Pick : std::uint8_t { kAll, kFresh, kShort };
  /// The picked buckets', and the buckets released since the last call (no clients left: their
  /// grant is to be given back; `released`).
  std::vector<Local> locals(Pick pick, std::vector<Local>* released = nullptr);
  /// Whether a bucket was created since the last locals(kFresh) or any bucket was released (cheap).
  [[nodiscard]] bool has_fresh() const;
  /// Whether a bucket was granted less than it asked since the last locals(kShort) (cheap).
  [[nodiscard]] bool has_short() const;
  /// The sync's outcome for `key` (of `shape`; a bucket whose shape changed since is left): its
  /// clients are split `budget` until `expiry` (then 0), and `requested` is asked next time.
  /// Appends the assignments that changed.
  void grant(const std::string& key, const Shape& shape, std::uint64_t budget, std::uint64_t requested,
             Micros expiry, Micros now, std::vector<Assignment>& out);

  /// Per rule: clients, buckets, the rate assigned (Σ tokens_per_fill / fill_seconds) and the
  /// rate reported (Σ demand), for the metrics.
  struct RuleLoad {
    std::uint64_t clients = 0;
    std::uint64_t buckets = 0;
    double assigned = 0;
    double reported = 0;
  };
  /// By (domain, rule name).
  [[nodiscard]] std::map<std::pair<std::string, std::string>, RuleLoad> load_by_rule() const;

 private:
  struct Entry {
    double demand = -1;  // requests per second; < 0: no history
    std::uint64_t held = 0;
    bool sent = false;   // held has been given to the client
    Micros last = 0;     // when it last reported
    Micros interval = 0;
  };
  struct Bucket {
    Shape shape;
    std::string domain{};
    std::string rule{};
    std::uint64_t budget = 0;     // options_.shared: the grant split among the clients
    std::uint64_t requested = 0;  // options_.shared: asked at the next sync
    Micros expiry = 0;            // options_.shared: the grant's end (0: never granted)
    absl::flat_hash_map<ClientId, Entry> clients{};
    Micros rebalanced = 0;  // when it was last rebalanced
    bool force = false;     // the shape changed: every client is sent its assignment
    bool dirty = false;     // reports since the last rebalance
  };

  /// The report's bucket, created if there is room (null: none); a new shape marks it `force`.
  Bucket* bucket_for(const Report& r);
  Assignment assignment(const std::string& key, const Bucket& bucket, ClientId client, const Entry& e, Micros now);
  void rebalance(const std::string& key, Bucket& bucket, ClientId reporter, Micros now, std::vector<Assignment>& out);
  std::size_t drop_silent(Bucket& bucket, Micros now, ClientId keep);
  /// Erases a bucket; a shared one's grant is to be given back (released_).
  void erase_bucket(absl::flat_hash_map<std::string, Bucket>::iterator it);
  /// What the split shares among the bucket's clients: the shape, with the budget as its total.
  Shape split_shape(const Bucket& bucket) const;

  TableOptions options_;
  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, Bucket> buckets_;  // guarded by mu_
  std::size_t entries_ = 0;                           // guarded by mu_
  std::uint64_t seq_ = 0;                             // guarded by mu_
  std::vector<Local> released_;                       // guarded by mu_
  std::vector<std::string> fresh_;                    // guarded by mu_: buckets created since
  std::vector<std::string> short_;                    // guarded by mu_: granted less than asked since
  std::atomic<std::uint64_t> refused_{0};
};

}  // namespace floodgate::server::rlqs
