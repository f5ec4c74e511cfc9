// The lanes of a simulation as an SVG document (`floodgate simulate --out chart.svg`).
#include <algorithm>
#include <cmath>
#include <ctime>

#include <map>

#include <fmt/format.h>

#include "floodgate/sim/simulate.hpp"
#include "sim/chart.hpp"

namespace floodgate {

namespace {

// Okabe–Ito: distinguishable with every common colour-vision deficiency.
constexpr const char* kAllowed = sim::kAllowedColour;
constexpr const char* kBlocked = sim::kBlockedColour;
constexpr const char* kLevel = sim::kLevelColour;

constexpr double kLeft = 200;
constexpr double kTop = 56;
constexpr double kLaneHeight = 76;

}  // namespace

namespace sim {

std::string xml_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// A tick step of 1, 2 or 5 × 10^k seconds giving about 10 ticks.
std::string svg_open(std::string_view cls, double height, std::string_view title) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\"{0} width=\"{1:.0f}\" height=\"{2:.0f}\" "
      "viewBox=\"0 0 {1:.0f} {2:.0f}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<title>{3}</title>\n<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n"
      "<text x=\"10\" y=\"20\" font-size=\"15\" font-weight=\"bold\">{3}</text>\n",
      cls.empty() ? std::string() : fmt::format(" class=\"{}\"", cls), kChartWidth, height, xml_escape(title));
}

std::string row_open(std::string_view cls, std::string_view lane, std::string_view limit, std::string_view policy,
                     std::size_t i, double y0, double height, double left, double name_dy) {
  return fmt::format(
      "<g class=\"{}\" data-lane=\"{}\" data-limit=\"{}\">\n"
      "<rect x=\"{:.0f}\" y=\"{:.1f}\" width=\"{:.0f}\" height=\"{:.0f}\" fill=\"{}\"/>\n"
      "<text x=\"10\" y=\"{:.1f}\" font-weight=\"bold\">{}</text>\n"
      "<text x=\"10\" y=\"{:.1f}\" fill=\"#444\">{}</text>\n",
      cls, xml_escape(lane), xml_escape(limit), left, y0 + 4, kChartWidth - left - kChartRight, height - 6,
      i % 2 == 0 ? "#f4f4f4" : "#fafafa", y0 + name_dy, xml_escape(lane), y0 + name_dy + 16, xml_escape(policy));
}

double tick_step(double span_s) {
  const double raw = span_s / 10;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * p) return m * p;
  }
  return 10 * p;
}


// Times past this are since the epoch (2001-09-09): the axis shows the wall clock.
constexpr Micros kWallClockFrom = Micros{1'000'000'000} * kMicrosPerSecond;

std::string clock_label(Micros t, bool with_date) {
  const std::time_t s = static_cast<std::time_t>(t / kMicrosPerSecond);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, with_date ? "%Y-%m-%d %H:%M" : tm.tm_sec ? "%H:%M:%S" : "%H:%M", &tm);
  return buf;
}

// A step of the wall clock giving at most ~10 ticks: 1, 2, 5, 10, 15, 30 s or min, 1, 2, 3, 6, 12 h, days.
double clock_step(double span_s) {
  for (double s : {1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0,
                   7200.0, 10800.0, 21600.0, 43200.0, 86400.0}) {
    if (span_s / s <= 10) return s;
  }
  return 86400.0 * std::ceil(span_s / 86400.0 / 10);
}

std::string html_report(std::string_view title, const std::string& table, const std::vector<std::string>& notes,
                        const std::string& svg) {
  std::string out = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{0}</title>\n"
      "<style>body{{font-family:sans-serif;margin:1.5em;color:#222}}pre{{background:#f6f6f6;padding:.8em;"
      "overflow-x:auto}}.notes{{color:#555}}</style></head><body>\n<h1>{0}</h1>\n",
      xml_escape(title));
  if (!notes.empty()) {
    out += "<ul class=\"notes\">\n";
    for (const std::string& n : notes) out += "<li>" + xml_escape(n) + "</li>\n";
    out += "</ul>\n";
  }
  out += "<pre class=\"table\">" + xml_escape(table) + "</pre>\n";
  out += svg;
  return out + "</body></html>\n";
}

std::string time_axis(Micros first, Micros span, double left, double plot, double y) {
  std::string out = fmt::format(
      "<g class=\"axis\" fill=\"#333\"><line x1=\"{0:.0f}\" x2=\"{1:.0f}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#333\"/>\n",
      left, left + plot, y);
  const double span_s = std::max(1e-3, static_cast<double>(span) / 1e6);
  const bool wall = first >= kWallClockFrom;
  const double step = wall ? clock_step(span_s) : std::max(tick_step(span_s), 1e-3);
  // On the wall clock, ticks fall on whole multiples of the step (14:00, 14:15, …).
  const double first_s = static_cast<double>(first) / 1e6;
  const double start = wall ? std::ceil(first_s / step) * step - first_s : 0;
  for (double t = start; t <= span_s + 1e-9; t += step) {
    const double px = left + t / span_s * plot;
    const Micros at = first + static_cast<Micros>(std::llround(t * 1e6));
    const std::string label = wall ? clock_label(at, false) : fmt::format("{:g}s", std::round(t * 1000) / 1000);
    out += fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.1f}\" y2=\"{2:.1f}\" stroke=\"#333\"/>"
                       "<text x=\"{0:.1f}\" y=\"{3:.1f}\" text-anchor=\"middle\">{4}</text>\n",
                       px, y, y + 5, y + 18, label);
  }
  if (wall) {
    out += fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\">UTC, from {}</text>\n", left, y + 34,
                       clock_label(first, true));
  }
  return out + "</g>\n";
}

}  // namespace sim

using sim::tick_step;
using sim::xml_escape;

namespace {

// Scales seconds of the trace to the plot's x.
struct XScale {
  double span_s;
  double plot;
  [[nodiscard]] double operator()(Micros t) const { return kLeft + static_cast<double>(t) / 1e6 / span_s * plot; }
};

std::string svg_head(double height, std::string_view title, std::string_view level_of) {
  std::string out = sim::svg_open("", height, title);
  out += fmt::format(
      "<g font-size=\"12\"><circle cx=\"16\" cy=\"38\" r=\"4\" fill=\"{0}\"/>"
      "<text x=\"24\" y=\"42\">allowed</text>"
      "<path d=\"M86 34 l8 8 m0 -8 l-8 8\" stroke=\"{1}\" stroke-width=\"2\"/>"
      "<text x=\"100\" y=\"42\">blocked</text>"
      "<path d=\"M160 42 h8 v-6 h8\" fill=\"none\" stroke=\"{2}\" stroke-width=\"1.5\"/>"
      "<text x=\"182\" y=\"42\">level{3}: units in use of the limit after each request (0 to capacity)</text></g>\n",
      kAllowed, kBlocked, kLevel, xml_escape(level_of));
  return out;
}

// A lane's marks: a dot per admitted request, a cross per blocked one, and the level as a step
// line: of `level_key`'s requests only when it is set (the levels of several keys mixed in one line
// would zig-zag between unrelated states). Requests at the same instant (a burst) are spread 3 px
// apart so that each one shows.
std::string lane_marks(const SimLane& lane, std::span<const TraceEvent> trace, const XScale& x, double y0,
                       const std::string* level_key) {
  const double allowed_y = y0 + 14;
  const double blocked_y = y0 + 30;
  const double level_top = y0 + 40;
  const double level_bottom = y0 + 66;
  std::string allowed_path;
  std::string blocked_path;
  std::string level_path = fmt::format("M{:.1f} {:.1f}", kLeft, level_bottom);
  double spread = 0;
  for (std::size_t k = 0; k < lane.steps.size() && k < trace.size(); ++k) {
    const SimStep& s = lane.steps[k];
    spread = k > 0 && trace[k].t == trace[k - 1].t ? std::min(spread + 3, 60.0) : 0;
    const double px = x(trace[k].t) + spread;
    if (s.allowed) {
      allowed_path += fmt::format("M{:.1f} {:.1f}a3 3 0 1 0 6 0a3 3 0 1 0 -6 0", px - 3, allowed_y);
    } else {
      blocked_path += fmt::format("M{:.1f} {:.1f}l6 6m0 -6l-6 6", px - 3, blocked_y - 3);
    }
    if (level_key != nullptr && trace[k].key != *level_key) continue;
    const double fill =
        s.capacity > 0 ? std::min(1.0, static_cast<double>(s.level) / static_cast<double>(s.capacity)) : 0.0;
    level_path += fmt::format("H{:.1f}V{:.1f}", px, level_bottom - fill * (level_bottom - level_top));
  }
  level_path += fmt::format("H{:.1f}", kLeft + x.plot);
  std::string out = fmt::format(
      "<line x1=\"{0:.0f}\" x2=\"{1:.0f}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#ccc\"/>\n", kLeft,
      kLeft + x.plot, level_bottom);
  out += fmt::format("<path class=\"level\" d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>\n",
                     level_path, kLevel);
  if (!allowed_path.empty()) {
    out += fmt::format("<path class=\"allowed\" d=\"{}\" fill=\"{}\"/>\n", allowed_path, kAllowed);
  }
  if (!blocked_path.empty()) {
    out += fmt::format("<path class=\"blocked\" d=\"{}\" stroke=\"{}\" stroke-width=\"2\" fill=\"none\"/>\n",
                       blocked_path, kBlocked);
  }
  return out;
}

std::string lane_group(const SimLane& lane, std::size_t i, std::span<const TraceEvent> trace, const XScale& x,
                       const std::string* level_key) {
  const double y0 = kTop + kLaneHeight * static_cast<double>(i);
  std::string out = fmt::format("<g class=\"lane\" data-lane=\"{}\">\n", xml_escape(lane.name));
  out += fmt::format("<rect x=\"{:.0f}\" y=\"{:.1f}\" width=\"{:.0f}\" height=\"{:.0f}\" fill=\"{}\"/>\n", kLeft,
                     y0 + 2, x.plot, kLaneHeight - 4, i % 2 == 0 ? "#f4f4f4" : "#fafafa");
  out += fmt::format(
      "<text x=\"10\" y=\"{:.1f}\" font-weight=\"bold\">{}</text>\n"
      "<text x=\"10\" y=\"{:.1f}\" fill=\"#444\">{}</text>\n"
      "<text x=\"10\" y=\"{:.1f}\"><tspan fill=\"#00664a\">allowed {}</tspan>  "
      "<tspan fill=\"#a33d00\">blocked {}</tspan></text>\n",
      y0 + 18, xml_escape(lane.name), y0 + 34, xml_escape(lane.policy), y0 + 50, lane.allowed, lane.blocked);
  out += lane_marks(lane, trace, x, y0, level_key);
  out += "</g>\n";
  return out;
}

std::string time_axis(const XScale& x, double axis_y) {
  std::string out = fmt::format(
      "<g class=\"axis\" fill=\"#333\"><line x1=\"{0:.0f}\" x2=\"{1:.0f}\" y1=\"{2:.1f}\" "
      "y2=\"{2:.1f}\" stroke=\"#333\"/>\n",
      kLeft, kLeft + x.plot, axis_y);
  const double step = tick_step(x.span_s);
  for (double t = 0; t <= x.span_s + 1e-9; t += step) {
    const double px = kLeft + t / x.span_s * x.plot;
    out += fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.1f}\" y2=\"{2:.1f}\" stroke=\"#333\"/>"
                       "<text x=\"{0:.1f}\" y=\"{3:.1f}\" text-anchor=\"middle\">{4:g}s</text>\n",
                       px, axis_y, axis_y + 5, axis_y + 18, std::round(t * 1000) / 1000);
  }
  out += "</g>\n";
  return out;
}

}  // namespace

std::string render_svg(const std::vector<SimLane>& lanes, std::span<const TraceEvent> trace,
                       std::string_view title) {
  const Micros end = trace.empty() ? 0 : trace.back().t;
  const XScale x{std::max(1.0, static_cast<double>(end) / 1e6 * 1.02), sim::kChartWidth - kLeft - sim::kChartRight};
  const double height = kTop + kLaneHeight * static_cast<double>(lanes.size()) + 40;
  // Several keys: the level line follows the busiest one (most requests; the first seen on a tie).
  std::map<std::string_view, std::size_t> counts;
  std::vector<std::string_view> order;
  for (const TraceEvent& e : trace) {
    if (counts[e.key]++ == 0) order.push_back(e.key);
  }
  std::string busiest;
  std::string level_of;
  if (order.size() > 1) {
    std::string_view best = order.front();
    for (std::string_view k : order) {
      if (counts[k] > counts[best]) best = k;
    }
    busiest = std::string(best);
    level_of = fmt::format(" of key {} (the busiest of {} keys)", busiest, order.size());
  }
  std::string out = svg_head(height, title, level_of);
  for (std::size_t i = 0; i < lanes.size(); ++i) {
    out += lane_group(lanes[i], i, trace, x, busiest.empty() ? nullptr : &busiest);
  }
  out += time_axis(x, kTop + kLaneHeight * static_cast<double>(lanes.size()) + 4);
  out += "</svg>\n";
  return out;
}

}  // namespace floodgate
