// The RLQS service: the registry of streams, the table and the rules they share.
#include "server/rlqs/service.hpp"

#include <algorithm>
#include <chrono>


namespace floodgate::server::rlqs {

namespace {

bool shares(const ServiceOptions& o) { return o.storage != nullptr && o.storage->traits().shared; }

TableOptions table_options(const ServiceOptions& o) {
  TableOptions t = o.table;
  t.shared = shares(o);
  return t;
}

}  // namespace

Service::Service(std::shared_ptr<const Rules> rules, std::shared_ptr<const Clock> clock, ServiceOptions options)
    : clock_(std::move(clock)), options_(options), table_(table_options(options)), rules_(std::move(rules)) {
  if (!shares(options_)) return;
  sync_ = std::make_unique<QuotaSync>(
      options_.storage, options_.table.split, [this](const std::vector<Assignment>& out) { deliver(out, 0); },
      options_.sync);
  // Every bucket each period; in between, every short_retry, those granted less than they asked.
  syncer_ = std::thread([this] {
    const auto period = std::chrono::microseconds(options_.sync.period);
    const auto step = std::min(period, std::chrono::microseconds(std::max<Micros>(1, options_.sync.short_retry)));
    using Steady = std::chrono::steady_clock;
    Steady::time_point next = Steady::now() + period;
    std::unique_lock<std::mutex> lock(stop_mu_);
    while (!stop_cv_.wait_until(lock, std::min(next, Steady::now() + step), [this] { return stop_; })) {
      lock.unlock();
      if (Steady::now() >= next) {
        sync_->sync(table_, false, now());
        next = Steady::now() + period;
      } else {
        sync_->sync_short(table_, now());
      }
      lock.lock();
    }
  });
}

Service::~Service() {
  if (syncer_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(stop_mu_);
      stop_ = true;
    }
    stop_cv_.notify_all();
    syncer_.join();
  }
  std::lock_guard<std::mutex> lock(streams_mu_);
  streams_.clear();
}

absl::StatusOr<std::unique_ptr<Service>> Service::open(std::shared_ptr<const Rules> rules,
                                                      std::shared_ptr<const Clock> clock,
                                                      std::shared_ptr<Storage> storage) {
  if (rules == nullptr) return std::unique_ptr<Service>();
  if (storage != nullptr && storage->traits().networked && !storage->traits().shared) {
    return absl::FailedPreconditionError(
        "--rlqs-config needs the memory or a Redis storage: this storage cannot share the quotas of several instances");
  }
  ServiceOptions options;
  options.storage = std::move(storage);
  return std::make_unique<Service>(std::move(rules), std::move(clock), std::move(options));
}

void Service::sync_fresh() {
  if (sync_ != nullptr) sync_->sync(table_, true, now());
}

void Service::reload(std::shared_ptr<const Rules> rules) {
  std::lock_guard<std::mutex> lock(rules_mu_);
  rules_ = std::move(rules);
}

std::shared_ptr<const Rules> Service::rules() const {
  std::lock_guard<std::mutex> lock(rules_mu_);
  return rules_;
}

void Service::unregister(ClientId id) {
  std::lock_guard<std::mutex> lock(streams_mu_);
  if (streams_.erase(id) > 0) counters_.streams.fetch_sub(1, std::memory_order_relaxed);
}

void Service::maybe_sweep(Micros now) {
  Micros next = next_sweep_.load(std::memory_order_relaxed);
  if (now < next || !next_sweep_.compare_exchange_strong(next, now + kMicrosPerSecond)) return;
  std::vector<Assignment> out;
  table_.sweep(now, out);
  deliver(out, 0);
}

void Service::render_metrics(PromText& out) const {
  out.single("floodgate_rlqs_streams", "gauge", "RLQS streams open (one per client)",
             counters_.streams.load(std::memory_order_relaxed));
  out.single("floodgate_rlqs_buckets", "gauge", "RLQS buckets tracked (limited bucket_ids with clients)",
             static_cast<std::uint64_t>(table_.buckets()));
  out.single("floodgate_rlqs_bucket_clients", "gauge", "RLQS (client, bucket) pairs tracked",
             static_cast<std::uint64_t>(table_.entries()));
  out.single("floodgate_rlqs_reports_total", "counter", "RLQS bucket usages received",
             counters_.reports.load(std::memory_order_relaxed));
  out.single("floodgate_rlqs_ignored_total", "counter", "RLQS bucket usages without a usable bucket_id",
             counters_.ignored.load(std::memory_order_relaxed));
  out.single("floodgate_rlqs_pushed_total", "counter", "RLQS assignments pushed to a client after another's report",
             counters_.pushed.load(std::memory_order_relaxed));
  out.single("floodgate_rlqs_refused_buckets_total", "counter",
             "RLQS limited buckets denied because the table (or the stream's share of it) is full",
             table_.refused() + counters_.refused_buckets.load(std::memory_order_relaxed));
  render_rule_metrics(out);
  out.single("floodgate_rlqs_refused_streams_total", "counter", "RLQS streams ended INVALID_ARGUMENT",
             counters_.refused_streams.load(std::memory_order_relaxed));
}

void Service::render_rule_metrics(PromText& out) const {
  const auto loads = table_.load_by_rule();
  const auto each = [&](std::string_view name, std::string_view help, auto value) {
    out.family(name, "gauge", help);
    for (const auto& [rule, load] : loads) out.sample(name, {{"domain", rule.first}, {"rule", rule.second}}, value(load));
  };
  each("floodgate_rlqs_rule_clients", "RLQS (client, bucket) pairs tracked, per rule",
       [](const Table::RuleLoad& l) { return l.clients; });
  each("floodgate_rlqs_rule_buckets", "RLQS buckets tracked, per rule", [](const Table::RuleLoad& l) { return l.buckets; });
  each("floodgate_rlqs_rule_assigned_rate", "RLQS requests per second assigned to this instance's clients, per rule",
       [](const Table::RuleLoad& l) { return l.assigned; });
  each("floodgate_rlqs_rule_reported_rate", "RLQS requests per second reported by this instance's clients, per rule",
       [](const Table::RuleLoad& l) { return l.reported; });
  out.single("floodgate_rlqs_sync_errors_total", "counter",
             "RLQS syncs of a bucket's shared grant through the storage that failed",
             sync_ != nullptr ? sync_->errors() : std::uint64_t{0});
}

}  // namespace floodgate::server::rlqs
