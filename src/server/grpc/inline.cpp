// ShouldRateLimit answered on gRPC's own threads when the storage decides in memory.
#include "server/grpc/inline.hpp"

#include <chrono>
#include <cstddef>

namespace floodgate::server {

bool rls_parse(const grpc::ByteBuffer& in, rlsv3::RateLimitRequest& request) {
  grpc::Slice bytes;
  if (!in.TrySingleSlice(&bytes).ok() && !in.DumpToSingleSlice(&bytes).ok()) return false;
  return request.ParseFromArray(bytes.begin(), static_cast<int>(bytes.size()));
}

grpc::Status rls_malformed() {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                      "the request is not a valid RateLimitRequest (malformed bytes, or a string field that is not "
                      "valid UTF-8)");
}

bool rls_caller_gone(grpc::ServerContextBase& context) {
  return context.IsCancelled() || context.deadline() <= std::chrono::system_clock::now();
}

// One call slot: the context, the request's bytes and the writer. After gRPC starts the call, two
// events are still to come, the answer written (`finished`) and the call over (`done`, which is
// what lets IsCancelled be asked); the slot is freed after both.
struct GrpcInlineService::Call {
  enum class Kind { kStarted, kFinished, kDone };
  struct Event {
    Call* call;
    Kind kind;
  };
  grpc::ServerContext context;
  grpc::ByteBuffer in;
  grpc::ServerAsyncResponseWriter<grpc::ByteBuffer> writer{&context};
  Event started{this, Kind::kStarted};
  Event finished{this, Kind::kFinished};
  Event done{this, Kind::kDone};
  int pending = 0;
};

namespace {
constexpr int kSlots = 256;                 // call slots offered to gRPC at any time
constexpr std::size_t kArenaBlock = 4096;  // a request of a few descriptors and its answer
}  // namespace

void GrpcInlineService::attach(grpc::ServerBuilder& builder) {
  builder.RegisterService(&service_);
  cq_ = builder.AddCompletionQueue();
}

void GrpcInlineService::start() {
  for (int i = 0; i < kSlots; ++i) request();
  thread_ = std::thread([this] { run(); });
}

void GrpcInlineService::stop() {
  if (!cq_) return;
  {
    const std::lock_guard lock(mu_);
    requesting_ = false;
  }
  cq_->Shutdown();
  if (thread_.joinable()) {
    thread_.join();
  } else {  // never started: nothing was requested, the queue only has to be drained
    void* tag = nullptr;
    bool ok = false;
    while (cq_->Next(&tag, &ok)) {
    }
  }
  cq_.reset();
}

void GrpcInlineService::request() {
  const std::lock_guard lock(mu_);
  if (!requesting_) return;
  auto* call = new Call;
  call->context.AsyncNotifyWhenDone(&call->done);
  service_.RequestShouldRateLimit(&call->context, &call->in, &call->writer, cq_.get(), cq_.get(), &call->started);
}

void GrpcInlineService::run() {
  void* tag = nullptr;
  bool ok = false;
  while (cq_->Next(&tag, &ok)) {
    const auto& event = *static_cast<Call::Event*>(tag);
    Call& call = *event.call;
    if (event.kind != Call::Kind::kStarted) {
      if (--call.pending == 0) delete &call;
      continue;
    }
    if (!ok) {  // the server is shutting down: the slot was never used, and no other event comes
      delete &call;
      continue;
    }
    request();
    call.pending = 2;
    answer(call);
  }
}

// As the callback handler would: parse, then the caller gone (not decided, not charged), then the
// decision, the messages on an arena whose first block is on the stack.
void GrpcInlineService::answer(Call& call) {
  alignas(std::max_align_t) char block[kArenaBlock];
  google::protobuf::Arena arena(block, sizeof block);
  auto* request = google::protobuf::Arena::CreateMessage<rlsv3::RateLimitRequest>(&arena);
  grpc::Status status = rls_parse(call.in, *request) ? grpc::Status::OK : rls_malformed();
  if (status.ok() && rls_caller_gone(call.context)) status = rls_.abandoned();
  grpc::ByteBuffer out;
  if (status.ok()) {
    auto* response = google::protobuf::Arena::CreateMessage<rlsv3::RateLimitResponse>(&arena);
    status = rls_.should_rate_limit(*request, *response);
    bool own = false;
    if (status.ok()) status = grpc::SerializationTraits<rlsv3::RateLimitResponse>::Serialize(*response, &out, &own);
  }
  if (status.ok()) {
    call.writer.Finish(out, status, &call.finished);
  } else {
    call.writer.FinishWithError(status, &call.finished);
  }
}

}  // namespace floodgate::server
