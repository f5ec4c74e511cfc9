// A service developer's view of floodgate: a policy, a limiter, decisions and their headers.
// Runs on a manual clock so its output is the same every time.
#include <iostream>
#include <memory>

#include <floodgate/headers.hpp>
#include <floodgate/limiter.hpp>
#include <floodgate/memory_storage.hpp>

int main() {
  using namespace floodgate;
  auto clock = std::make_shared<ManualClock>(1'700'000'000 * kMicrosPerSecond);
  Limiter limiter(std::make_shared<MemoryStorage>(), clock);

  // A bucket of 3 that refills one every 4 seconds: 3 at once, then one every 4 seconds.
  auto policy = Policy::make("chat", Strategy::kGcra, "3 per 12 seconds");
  if (!policy.ok()) {
    std::cerr << policy.status().message() << "\n";
    return 1;
  }
  for (int i = 1; i <= 4; ++i) {
    auto d = limiter.hit(*policy, "user-42");
    if (!d.ok()) {
      std::cerr << d.status().message() << "\n";
      return 1;
    }
    if (d->allowed) {
      std::cout << "request " << i << ": allowed, " << d->remaining << " left\n";
    } else {
      std::cout << "request " << i << ": denied, retry after "
                << ceil_seconds(d->retry_after) << " s\n";
      for (const auto& [name, value] : rate_limit_headers(*policy, *d)) {
        std::cout << "  " << name << ": " << value << "\n";
      }
    }
  }
  clock->advance(4 * kMicrosPerSecond);
  std::cout << "4 s later: " << (limiter.hit(*policy, "user-42")->allowed ? "allowed" : "denied")
            << "\n";

  // Bad input gets a clear error.
  auto bad = Policy::make("oops", Strategy::kGcra, "10/fortnight");
  std::cout << "bad limit: " << bad.status().message() << "\n";
  return 0;
}
