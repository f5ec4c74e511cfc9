// The one writer of Prometheus text exposition (version 0.0.4) in the service: every family of
// /metrics — decisions, latency, HTTP, storage, the gRPC rules — is written through it.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace floodgate::server {

/// A Prometheus label value: backslash, double quote and newline escaped.
[[nodiscard]] std::string prometheus_escape(std::string_view s);

/// Appends families and samples to one text. Label values are escaped here; metric and label
/// names are the caller's constants.
class PromText {
 public:
  using Labels = std::initializer_list<std::pair<std::string_view, std::string_view>>;

  /// Starts a family: its # HELP and # TYPE lines ("counter", "gauge", "histogram").
  void family(std::string_view name, std::string_view type, std::string_view help);
  /// One sample line: `name{labels} value`.
  void sample(std::string_view name, Labels labels, std::uint64_t value);
  void sample(std::string_view name, Labels labels, std::int64_t value);
  void sample(std::string_view name, Labels labels, double value);
  /// A family with a single unlabelled sample.
  template <class V>
  void single(std::string_view name, std::string_view type, std::string_view help, V value) {
    family(name, type, help);
    sample(name, {}, value);
  }
  /// Text written elsewhere through another PromText.
  void append(std::string_view text) { out_ += text; }

  [[nodiscard]] std::string take() { return std::move(out_); }

 private:
  void start(std::string_view name, Labels labels);
  std::string out_;
};

}  // namespace floodgate::server
