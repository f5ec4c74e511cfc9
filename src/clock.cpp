#include "floodgate/clock.hpp"

#include <chrono>

namespace floodgate {

Micros SystemClock::now() const noexcept {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::shared_ptr<const SystemClock> SystemClock::instance() {
  static const auto clock = std::make_shared<const SystemClock>();
  return clock;
}

}  // namespace floodgate
