// The RLQS quota table under a fleet: CLIENTS clients each reporting BUCKETS buckets per round (as
// Envoy reports every bucket every 5 s), on a simulated clock. Prints the CPU time per bucket
// report (the table's work: demand, rebalance, assignments out; no gRPC) and the heap held per
// tracked (client, bucket) pair and per bucket.
//
// usage: table_load [CLIENTS=1000] [BUCKETS=100] [ROUNDS=5]
#include <malloc.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "server/rlqs/table.hpp"

namespace {

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

std::size_t heap_bytes() { return mallinfo2().uordblks; }

}  // namespace

int main(int argc, char** argv) {
  using namespace floodgate::server::rlqs;
  const int clients = argc > 1 ? std::atoi(argv[1]) : 1000;
  const int buckets = argc > 2 ? std::atoi(argv[2]) : 100;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 5;
  std::vector<std::string> keys;
  for (int b = 0; b < buckets; ++b) keys.push_back("4:edge|3:api4:chat|6:tenant" + std::to_string(b));
  const Shape shape{1, 100'000, 100'000};  // 100,000/s per bucket
  const std::size_t heap0 = heap_bytes();
  Table table;
  std::mt19937 rng(1);
  std::vector<Assignment> out;
  std::size_t assignments = 0;
  double cpu = 0;
  long reports = 0;
  for (int r = 0; r < rounds; ++r) {
    const floodgate::Micros now = static_cast<floodgate::Micros>(r) * 5 * floodgate::kMicrosPerSecond;
    const double t0 = cpu_seconds();
    for (int c = 1; c <= clients; ++c) {
      for (const std::string& key : keys) {
        out.clear();
        const std::uint64_t allowed = r == 0 ? 1 : 200 + rng() % 100;  // steady demand with noise
        table.report(Report{static_cast<ClientId>(c), key, shape, now, r == 0 ? 0 : 5, allowed, 0}, out);
        assignments += out.size();
        ++reports;
      }
    }
    cpu += cpu_seconds() - t0;
  }
  const std::size_t heap = heap_bytes() - heap0;
  std::printf("%d clients x %d buckets, %d rounds: %ld reports\n", clients, buckets, rounds, reports);
  std::printf("CPU per report: %.2f us (%.0f reports/s on one core)\n", cpu / static_cast<double>(reports) * 1e6,
              static_cast<double>(reports) / cpu);
  std::printf("assignments sent per report: %.2f (after the first round: the dead band)\n",
              static_cast<double>(assignments) / static_cast<double>(reports));
  std::printf("heap: %.1f MB, %.0f bytes per (client, bucket), %.0f bytes per bucket of %d clients\n",
              static_cast<double>(heap) / 1e6, static_cast<double>(heap) / static_cast<double>(table.entries()),
              static_cast<double>(heap) / static_cast<double>(table.buckets()), clients);
  return 0;
}
