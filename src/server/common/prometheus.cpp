// The Prometheus text writer (see common/prometheus.hpp).
#include "server/common/prometheus.hpp"

#include <fmt/format.h>

namespace floodgate::server {

std::string prometheus_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
  return out;
}

void PromText::family(std::string_view name, std::string_view type, std::string_view help) {
  fmt::format_to(std::back_inserter(out_), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void PromText::start(std::string_view name, Labels labels) {
  out_ += name;
  if (labels.size() == 0) {
    out_ += ' ';
    return;
  }
  char sep = '{';
  for (const auto& [label, value] : labels) {
    out_ += sep;
    out_ += label;
    out_ += "=\"";
    out_ += prometheus_escape(value);
    out_ += '"';
    sep = ',';
  }
  out_ += "} ";
}

void PromText::sample(std::string_view name, Labels labels, std::uint64_t value) {
  start(name, labels);
  fmt::format_to(std::back_inserter(out_), "{}\n", value);
}

void PromText::sample(std::string_view name, Labels labels, std::int64_t value) {
  start(name, labels);
  fmt::format_to(std::back_inserter(out_), "{}\n", value);
}

void PromText::sample(std::string_view name, Labels labels, double value) {
  start(name, labels);
  fmt::format_to(std::back_inserter(out_), "{:g}\n", value);
}

}  // namespace floodgate::server
