// floodgate simulate's arguments, and what its two files share: simulate_command.cpp (rates:
// traffic through several strategies side by side) and simulate_durations.cpp (requests that
// last: --charge and --concurrency).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "floodgate/sim/access_log.hpp"

namespace floodgate::cli::simulate_cmd {

struct SimulateArgs {
  std::vector<std::string> limits;
  std::int64_t burst = 0;
  std::string strategies = "all";
  std::string traffic;
  std::string format = "auto";
  std::string key = "auto";
  std::string layout;
  std::string time_field;
  std::string focus;
  std::size_t columns = 600;
  std::uint64_t seed = 1;
  std::string out;
  // --charge: costs known after the response, charged after it vs reserved and settled
  bool charge = false;
  std::string cost_field = "cost";
  std::string duration_field = "auto";
  std::string duration_unit;
  std::string duration;
  std::string estimate;
  std::int64_t check_cost = 1;
  // --concurrency N: requests in progress (a lease from start to end) under "N concurrent for T"
  std::int64_t concurrency = 0;
  bool concurrency_given = false;
  std::string lease_ttl;
};

/// Prints `message` as floodgate simulate's error; returns `code` (the exit status).
int fail(std::string_view message, int code = 2);

/// Writes the report (--out) and says so; 1 when it cannot be written.
int write_page(const std::string& path, const std::string& page);

/// Whether --traffic is generated (poisson:…, burst:…) rather than a log file.
bool generated(std::string_view traffic);

/// "poison:rate=…": a misspelt kind of generated traffic, not a log file to open.
absl::Status check_traffic(const std::string& traffic);

/// The reader's options shared by every kind of simulation.
absl::StatusOr<LogReaderOptions> reader_options(const SimulateArgs& a);

/// --duration-unit: µs per bare number of the duration field (0: the field's own unit).
absl::StatusOr<Micros> duration_unit(std::string_view unit);

/// --charge: the log's requests (start, duration, actual cost) charged after the response and
/// reserved+settled; the table on stdout, the chart or page in --out. The exit status.
int run_charge(const SimulateArgs& a);

/// --concurrency N: the traffic's requests, each holding a lease from its start to its end,
/// through "N concurrent for T"; the table on stdout, the lane in --out. The exit status.
int run_concurrency(const SimulateArgs& a);

}  // namespace floodgate::cli::simulate_cmd
