// One RLQS stream: reports in, assignments out.
#include "server/rlqs/stream.hpp"

#include "server/rlqs/service.hpp"

#include <algorithm>

namespace floodgate::server::rlqs {

void Stream::start(std::shared_ptr<Stream> self) {
  self_ = std::move(self);
  StartRead(&in_);
}

void Stream::OnReadDone(bool ok) {
  if (!ok) {  // the client closed its side, or the call is cancelled
    close(grpc::Status::OK);
    return;
  }
  if (!handle(in_)) return;
  in_.Clear();
  StartRead(&in_);
}

std::uint32_t Stream::interval_ttl() const {
  const auto& t = service_.options().table;
  return static_cast<std::uint32_t>(std::max<std::int64_t>(2, t.silent_intervals) * interval_seconds_);
}

bool Stream::handle(const rlqsv3::RateLimitQuotaUsageReports& reports) {
  if (domain_.empty()) {
    if (reports.domain().empty()) {
      service_.counters().refused_streams.fetch_add(1, std::memory_order_relaxed);
      close(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                         "RateLimitQuotaUsageReports: the first message of a stream needs a domain"));
      return false;
    }
    domain_ = reports.domain();  // later messages may repeat it (Envoy does); the first one holds
  }
  const std::shared_ptr<const Rules> rules = service_.rules();
  std::vector<Assignment> out;
  for (const auto& usage : reports.bucket_quota_usages()) handle_usage(usage, *rules, out);
  service_.sync_fresh();  // a bucket new to this instance: its grant from the store at once
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Assignment& a : out) {
      if (a.client == id_) queue_assignment_locked(a);
    }
  }
  service_.deliver(out, id_);
  service_.maybe_sweep(service_.now());
  flush();
  return true;
}

void Stream::handle_usage(const rlqsv3::RateLimitQuotaUsageReports::BucketQuotaUsage& usage, const Rules& rules,
                          std::vector<Assignment>& out) {
  Counters& counters = service_.counters();
  counters.reports.fetch_add(1, std::memory_order_relaxed);
  const auto entries = bucket_entries(usage.bucket_id());
  if (entries.empty()) {  // refused: Envoy's proto requires entries with non-empty keys and values
    counters.ignored.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const std::string key = bucket_key(domain_, entries);
  const std::int64_t elapsed = usage.has_time_elapsed() ? std::max<std::int64_t>(0, usage.time_elapsed().seconds()) : 0;
  if (elapsed > 0) interval_seconds_ = std::min<std::int64_t>(elapsed, 60);
  const Rule* rule = rules.find(domain_, entries);
  if (rule == nullptr || rule->action != Action::kLimit) {
    untrack(key, out);
    BucketAction action;
    blanket_action(usage.bucket_id(), rule == nullptr || rule->action == Action::kAllow, interval_ttl(), action);
    std::lock_guard<std::mutex> lock(mu_);
    pending_[key] = std::move(action);
    return;
  }
  bool room = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_) return;
    // Tracked before the table knows it, so that no push of a later assignment is dropped.
    if (!tracked_.contains(key)) {
      room = tracked_.size() < service_.options().max_buckets_per_stream;
      if (room) tracked_.emplace(key, Tracked{usage.bucket_id(), 0});
      else counters.refused_buckets.fetch_add(1, std::memory_order_relaxed);
    }
  }
  const Report report{id_, key, shape_of(*rule), service_.now(), elapsed,
                      usage.num_requests_allowed(), usage.num_requests_denied(), domain_, rule->name};
  if (room && service_.table().report(report, out)) return;
  // No room: the limit cannot be split for this bucket, so it is denied until a later report.
  BucketAction action;
  blanket_action(usage.bucket_id(), false, static_cast<std::uint32_t>(interval_seconds_), action);
  std::lock_guard<std::mutex> lock(mu_);
  if (room) tracked_.erase(key);
  pending_[key] = std::move(action);
}

void Stream::untrack(const std::string& key, std::vector<Assignment>& out) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (tracked_.erase(key) == 0) return;
  }
  service_.table().leave(id_, {key}, service_.now(), out);
}

void Stream::queue_assignment_locked(const Assignment& a) {
  if (closing_ || broken_) return;
  const auto it = tracked_.find(a.key);
  if (it == tracked_.end() || it->second.seq > a.seq) return;
  it->second.seq = a.seq;
  assignment_action(it->second.id, a, pending_[a.key]);
}

void Stream::push(const Assignment& a) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_assignment_locked(a);
  }
  flush();
}

void Stream::flush() {
  bool write = false;
  bool finish = false;
  grpc::Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (writing_ || finished_) return;
    if (!closing_ && !broken_ && !pending_.empty()) {
      wire_.Clear();
      for (auto& [key, action] : pending_) *wire_.add_bucket_action() = std::move(action);
      pending_.clear();
      writing_ = write = true;
    } else if (closing_) {
      finished_ = finish = true;
      status = status_;
    }
  }
  if (write) StartWrite(&wire_);
  if (finish) Finish(status);
}

void Stream::OnWriteDone(bool ok) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok) {  // the stream is broken; its read fails too and closes it
      broken_ = true;
      pending_.clear();
    }
  }
  flush();
}

void Stream::close(grpc::Status status) {
  std::vector<std::string> keys;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_) return;
    closing_ = true;
    status_ = std::move(status);
    pending_.clear();
    for (const auto& [key, t] : tracked_) keys.push_back(key);
    tracked_.clear();
  }
  std::vector<Assignment> out;
  service_.table().leave(id_, keys, service_.now(), out);  // the others share what it held
  service_.deliver(out, id_);
  flush();
}

void Stream::OnDone() {
  service_.unregister(id_);
  const std::shared_ptr<Stream> last = std::move(self_);  // may destroy this stream on return
}

// The service's side of its streams (here, where a Stream is complete): a new client's stream,
// and assignments handed to other clients' streams.
grpc::ServerBidiReactor<rlqsv3::RateLimitQuotaUsageReports, rlqsv3::RateLimitQuotaResponse>*
Service::StreamRateLimitQuotas(grpc::CallbackServerContext* /*context*/) {
  const ClientId id = next_id_.fetch_add(1, std::memory_order_relaxed);
  auto stream = std::make_shared<Stream>(*this, id);
  {
    std::lock_guard<std::mutex> lock(streams_mu_);
    streams_.emplace(id, stream);
  }
  counters_.streams.fetch_add(1, std::memory_order_relaxed);
  Stream* raw = stream.get();
  raw->start(std::move(stream));
  return raw;
}

void Service::deliver(const std::vector<Assignment>& assignments, ClientId except) {
  std::vector<std::pair<std::shared_ptr<Stream>, const Assignment*>> to;
  {
    std::lock_guard<std::mutex> lock(streams_mu_);
    for (const Assignment& a : assignments) {
      if (a.client == except) continue;
      const auto it = streams_.find(a.client);
      if (it != streams_.end()) to.emplace_back(it->second, &a);
    }
  }
  for (const auto& [stream, a] : to) stream->push(*a);
  counters_.pushed.fetch_add(to.size(), std::memory_order_relaxed);
}

}  // namespace floodgate::server::rlqs
