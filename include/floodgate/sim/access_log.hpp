// floodgate/sim/access_log.hpp — requests read from real access logs, one line at a time, for
// `floodgate simulate --traffic FILE`: nginx/Apache "combined" (or any nginx log_format), Envoy's
// text and JSON access logs, JSON lines and CSV with a header. Each line gives a time (from the
// log's own timestamp) and a key (chosen with a KeySpec). Nothing is kept per line: memory does
// not grow with the file.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "floodgate/clock.hpp"

namespace floodgate {

enum class LogFormat { kAuto, kJsonl, kCombined, kEnvoy, kCsv };

/// "auto", "jsonl" (or "json"), "combined" (or "nginx", "apache"), "envoy", "csv".
/// Errors: InvalidArgument quoting the name and listing the valid ones.
absl::StatusOr<LogFormat> parse_log_format(std::string_view name);
std::string_view format_name(LogFormat f) noexcept;

/// nginx's predefined "combined" log_format (Apache's is the same line).
inline constexpr std::string_view kCombinedLogFormat =
    R"($remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent")";
/// Envoy's default access log format.
inline constexpr std::string_view kEnvoyLogFormat =
    R"([%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" %RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%" "%REQ(X-REQUEST-ID)%" "%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%")";

/// The canonical name of a field reference, the same whichever notation names it:
///   "$http_x_api_key", "%REQ(X-API-KEY)%", "REQ(X-API-KEY)", "header:X-Api-Key" → "header:x-api-key"
///   "$remote_addr", "remote_addr" → "remote_addr";  "%START_TIME%" → "start_time"
/// JSON and CSV names are kept as written, lower-cased ("Client IP" → "client ip").
std::string canonical_field(std::string_view ref);

/// One part of a key: a field, or the client address ("ip"), optionally masked to a prefix.
struct KeyPart {
  std::string field;       ///< canonical_field, or "ip" for the client address of the format
  int prefix_bits = -1;    ///< "/64": IPv6 addresses keep their first 64 bits (−1 = whole);
                           ///< IPv4 addresses are masked only when the prefix is at most 32
};

/// What `--key` names: parts joined by '+' ("ip/64", "$http_x_api_key", "ip+$http_user_agent").
/// The key of a line is its parts' values joined by '|'. An absent or empty value is "-" (nginx
/// writes "-" for an empty variable), so requests without the header share the key "-".
/// "auto" (the default): the JSON field "key" when the line has one, else the client address.
/// Errors: InvalidArgument for an empty part or a bad prefix ("/129", "/x").
struct KeySpec {
  std::vector<KeyPart> parts;  ///< empty = auto
  static absl::StatusOr<KeySpec> parse(std::string_view text);
};

/// The address `value` names (an "ip:port", "[v6]:port", or the first of a comma list as in
/// X-Forwarded-For), masked as `prefix_bits` says; the value itself when it is not an address;
/// "-" (nginx's absent value) when that first item is empty, so a key is never empty.
std::string client_address(std::string_view value, int prefix_bits);

/// Times in logs: nginx/Apache "10/Oct/2000:13:55:36 -0700", ISO 8601 ("2024-05-01T12:00:00.5Z",
/// "+02:00" offsets, a space for the T), and numbers of seconds since the epoch ("1714564800.123";
/// values above 10^11 are taken as milliseconds, above 10^14 as microseconds). µs since the epoch.
std::optional<Micros> parse_log_time(std::string_view text);

/// A request's duration in a log: a number in `unit` µs per unit ("0.350" seconds as nginx's
/// $request_time, "350" ms as Envoy's %DURATION%), or a number with its own unit ("350ms", "1.5s",
/// "250us", "2m"). At most 23 hours. nullopt when it is not such a duration.
std::optional<Micros> parse_log_duration(std::string_view text, Micros unit);

/// Where a log keeps the request's duration, and in what unit, when it is not named:
///   request_time (s, nginx), upstream_response_time (s, nginx), duration (ms, Envoy's %DURATION%
///   and its JSON logs), duration_ms (ms), response_time (s), latency_ms (ms).
/// The unit of a named field: ms for "duration" and names ending in "_ms", µs for names ending
/// in "_us", else seconds.
Micros default_duration_unit(std::string_view field) noexcept;

/// One request of a log.
struct LogRecord {
  Micros time = 0;         ///< µs since the epoch
  std::string key;
  std::int64_t cost = 1;   ///< the cost field (LogReaderOptions::cost_field) when present, else 1
  /// A field the key names is not on this line: its part of the key is "-" (as nginx logs an
  /// absent value).
  bool key_missing = false;
  /// How long the request took (LogReaderOptions::duration_field); nullopt when not asked for, or
  /// when the line's value is absent or "-".
  std::optional<Micros> duration;
};

struct LogReaderOptions {
  LogFormat format = LogFormat::kAuto;
  /// An nginx log_format ("$remote_addr … \"$http_x_api_key\"") or Envoy format string
  /// ("%START_TIME% %REQ(X-API-KEY)%") for logs written with one; empty = combined / Envoy's default.
  std::string layout;
  KeySpec key;
  /// The field holding the time (canonical_field); empty = the format's: $time_local,
  /// $time_iso8601 or $msec for nginx, START_TIME for Envoy, and for JSON and CSV the first of
  /// t, time, timestamp, @timestamp, start_time, time_iso8601, msec, ts, date.
  std::string time_field;
  std::size_t quoted_errors = 5;  ///< how many bad lines are quoted in LogStats::examples
  /// The field holding the request's cost (canonical_field), e.g. "total_tokens"; a line without
  /// it costs 1 unless `require_cost`.
  std::string cost_field = "cost";
  /// A line without `cost_field` does not parse ("no cost field …").
  bool require_cost = false;
  /// The field holding the request's duration (canonical_field); "auto" = the first present of
  /// those default_duration_unit lists; empty = durations are not read.
  std::string duration_field;
  /// µs per unit of a bare number in the duration field; 0 = default_duration_unit of the field.
  Micros duration_unit = 0;
  /// A line without a duration (the field absent, empty or "-") does not parse.
  bool require_duration = false;
  /// A line that does not parse ends the stream: next() returns nullopt and status() says
  /// "FILE: line N: <problem>: <line>". Otherwise such lines are skipped and counted.
  bool strict = false;
};

struct LogStats {
  std::int64_t lines = 0;          ///< non-empty lines read (a CSV header included)
  std::int64_t records = 0;        ///< lines that gave a request
  std::int64_t bad = 0;            ///< lines that did not parse
  std::int64_t reordered = 0;      ///< requests logged earlier than one before them (their time is
                                   ///< taken as the latest seen: logs are written at completion)
  std::vector<std::string> examples;  ///< "line 12: <problem>: <the line, cut at 200 bytes>"
  std::int64_t key_missing = 0;    ///< records whose key names a field the line does not have
  std::vector<std::string> fields;    ///< the fields of the first record (canonical names)
};

/// Reads a log line by line, plain or gzip'd (detected by content), with lines of at most 64 KiB.
class LogReader {
 public:
  /// Opens `path` and, for format auto, detects the format from its first lines.
  /// Errors: NotFound / InvalidArgument naming the file; a layout that has no usable fields.
  static absl::StatusOr<std::unique_ptr<LogReader>> open(const std::string& path,
                                                         const LogReaderOptions& options);
  virtual ~LogReader() = default;
  /// The next request, or nullopt at the end of the file. Lines that do not parse are counted in
  /// stats() and skipped; a read error of the file ends the stream (see status()).
  virtual std::optional<LogRecord> next() = 0;
  [[nodiscard]] virtual const LogStats& stats() const noexcept = 0;
  [[nodiscard]] virtual LogFormat format() const noexcept = 0;
  /// Ok, or why reading stopped early (a read or decompression error).
  [[nodiscard]] virtual absl::Status status() const = 0;
};

/// Parses one line of a format on its own (the unit of LogReader; also what the fuzz target and
/// tests drive). For CSV, `header` is the first line of the file.
class LineParser {
 public:
  static absl::StatusOr<std::unique_ptr<LineParser>> make(LogFormat format,
                                                          const LogReaderOptions& options,
                                                          std::string_view header = {});
  virtual ~LineParser() = default;
  /// The request of `line`, or InvalidArgument saying what is wrong with it.
  virtual absl::StatusOr<LogRecord> parse(std::string_view line) = 0;
  /// The canonical names of the fields of the line parsed last (canonical_field), for messages
  /// such as "no field ipp; this log's fields: …".
  [[nodiscard]] virtual std::vector<std::string> fields() const = 0;
};

/// The format a log's first line looks like (kAuto when none fits).
LogFormat detect_log_format(std::string_view first_line);

}  // namespace floodgate
