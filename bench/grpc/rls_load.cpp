// A load generator for envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit: the async C++
// gRPC client (a CompletionQueue with N calls outstanding), one descriptor per request, keys drawn
// from K values. Prints decisions/s, the OK / OVER_LIMIT / error split and latency percentiles.
//
//   rls_load --target 127.0.0.1:8081 --domain bench --key remote_address --keys 10000
//            --concurrency 64 --seconds 10 [--channels 2] [--prefix KEY=VALUE ...]
// Each --prefix puts a fixed entry before the varying one (nested rules: path, then address).
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"

namespace {

namespace rls = ::envoy::service::ratelimit::v3;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string target = "127.0.0.1:8081";
  std::string domain = "bench";
  std::string key = "remote_address";
  int keys = 10'000;
  int concurrency = 64;
  int channels = 2;
  double seconds = 10;
  std::string ca_file;  ///< set: TLS, trusting this CA (the server's certificate names localhost)
  std::vector<std::pair<std::string, std::string>> prefix;  // fixed entries before the varying one
};

struct Call {
  rls::RateLimitRequest request;
  rls::RateLimitResponse response;
  grpc::Status status;
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<grpc::ClientAsyncResponseReader<rls::RateLimitResponse>> reader;
  Clock::time_point started;
  int channel = 0;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "rls_load: %s\nusage: rls_load [--target HOST:PORT] [--domain D] [--key K] [--keys N] "
               "[--concurrency N] [--channels N] [--seconds S] [--ca FILE] [--prefix KEY=VALUE]...\n",
               why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(("missing a value after " + a).c_str());
    const char* v = argv[++i];
    if (a == "--target") o.target = v;
    else if (a == "--domain") o.domain = v;
    else if (a == "--key") o.key = v;
    else if (a == "--keys") o.keys = std::atoi(v);
    else if (a == "--concurrency") o.concurrency = std::atoi(v);
    else if (a == "--channels") o.channels = std::atoi(v);
    else if (a == "--seconds") o.seconds = std::atof(v);
    else if (a == "--ca") o.ca_file = v;
    else if (a == "--prefix" && std::strchr(v, '=') != nullptr) {
      const char* eq = std::strchr(v, '=');
      o.prefix.emplace_back(std::string(v, eq), std::string(eq + 1));
    }
    else usage(("unknown option " + a).c_str());
  }
  if (o.keys < 1 || o.concurrency < 1 || o.channels < 1 || o.seconds <= 0) usage("values must be positive");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!o.ca_file.empty()) {
    std::ifstream in(o.ca_file);
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (ssl.pem_root_certs.empty()) usage(("cannot read " + o.ca_file).c_str());
    credentials = grpc::SslCredentials(ssl);
  }
  std::vector<std::unique_ptr<rls::RateLimitService::Stub>> stubs;
  for (int c = 0; c < o.channels; ++c) {
    grpc::ChannelArguments args;
    args.SetInt("grpc.channel_id", c);  // distinct channels: distinct HTTP/2 connections
    if (!o.ca_file.empty()) args.SetSslTargetNameOverride("localhost");
    stubs.push_back(rls::RateLimitService::NewStub(grpc::CreateCustomChannel(o.target, credentials, args)));
  }
  grpc::CompletionQueue cq;
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<int> pick(0, o.keys - 1);
  std::vector<std::string> values;
  for (int k = 0; k < o.keys; ++k) values.push_back("10.0." + std::to_string(k / 250) + "." + std::to_string(k % 250));

  auto start_call = [&](Call* c) {
    c->request.Clear();
    c->request.set_domain(o.domain);
    auto* d = c->request.add_descriptors();
    for (const auto& [k, v] : o.prefix) {
      auto* p = d->add_entries();
      p->set_key(k);
      p->set_value(v);
    }
    auto* e = d->add_entries();
    e->set_key(o.key);
    e->set_value(values[static_cast<std::size_t>(pick(rng))]);
    c->response.Clear();
    c->context = std::make_unique<grpc::ClientContext>();
    c->context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    c->started = Clock::now();
    c->reader = stubs[static_cast<std::size_t>(c->channel)]->AsyncShouldRateLimit(c->context.get(), c->request, &cq);
    c->reader->Finish(&c->response, &c->status, c);
  };

  std::vector<std::unique_ptr<Call>> calls;
  for (int i = 0; i < o.concurrency; ++i) {
    calls.push_back(std::make_unique<Call>());
    calls.back()->channel = i % o.channels;
  }
  // Warm-up: one call per channel, so connection setup is not measured.
  for (int c = 0; c < o.channels; ++c) {
    start_call(calls[static_cast<std::size_t>(c)].get());
    void* tag = nullptr;
    bool ok = false;
    cq.Next(&tag, &ok);
    if (!static_cast<Call*>(tag)->status.ok()) {
      std::fprintf(stderr, "rls_load: %s: %s\n", o.target.c_str(), static_cast<Call*>(tag)->status.error_message().c_str());
      return 1;
    }
  }

  std::uint64_t ok_count = 0, over = 0, errors = 0;
  std::vector<std::uint32_t> latencies_us;
  latencies_us.reserve(1 << 22);
  const auto begin = Clock::now();
  const auto end = begin + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  for (auto& c : calls) start_call(c.get());
  int outstanding = o.concurrency;
  void* tag = nullptr;
  bool ok = false;
  while (outstanding > 0 && cq.Next(&tag, &ok)) {
    Call* c = static_cast<Call*>(tag);
    const auto now = Clock::now();
    if (!ok || !c->status.ok()) {
      ++errors;
    } else if (c->response.overall_code() == rls::RateLimitResponse::OK) {
      ++ok_count;
    } else {
      ++over;
    }
    latencies_us.push_back(static_cast<std::uint32_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(now - c->started).count()));
    if (now < end) {
      start_call(c);
    } else {
      --outstanding;
    }
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - begin).count();
  std::sort(latencies_us.begin(), latencies_us.end());
  auto pct = [&](double p) {
    if (latencies_us.empty()) return 0.0;
    return latencies_us[static_cast<std::size_t>(p * static_cast<double>(latencies_us.size() - 1))] / 1000.0;
  };
  const std::uint64_t total = ok_count + over + errors;
  std::printf("decisions/s: %.0f  (%llu in %.2f s; OK %llu, OVER_LIMIT %llu, errors %llu)\n",
              static_cast<double>(total) / elapsed, static_cast<unsigned long long>(total), elapsed,
              static_cast<unsigned long long>(ok_count), static_cast<unsigned long long>(over),
              static_cast<unsigned long long>(errors));
  std::printf("latency ms: p50 %.3f  p90 %.3f  p99 %.3f  max %.3f\n", pct(0.5), pct(0.9), pct(0.99), pct(1.0));
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return errors == 0 ? 0 : 1;
}
