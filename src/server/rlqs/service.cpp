// The RLQS service: the registry of streams, the table and the rules they share.
#include "server/rlqs/service.hpp"


namespace floodgate::server::rlqs {

Service::Service(std::shared_ptr<const Rules> rules, std::shared_ptr<const Clock> clock, ServiceOptions options)
    : clock_(std::move(clock)), options_(options), table_(options.table), rules_(std::move(rules)) {}

Service::~Service() {
  std::lock_guard<std::mutex> lock(streams_mu_);
  streams_.clear();
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
  out.single("floodgate_rlqs_refused_streams_total", "counter", "RLQS streams ended INVALID_ARGUMENT",
             counters_.refused_streams.load(std::memory_order_relaxed));
}

}  // namespace floodgate::server::rlqs
