// The aggregated chart of a StreamResult: bars per time bin, whatever the number of requests.
#include <algorithm>
#include <cmath>
#include <ctime>

#include <fmt/format.h>

#include "floodgate/sim/stream.hpp"
#include "sim/chart.hpp"

namespace floodgate {

namespace {

constexpr const char* kAllowed = sim::kAllowedColour;
constexpr const char* kBlocked = sim::kBlockedColour;
constexpr double kLeft = 220;
constexpr double kTop = 50;
constexpr double kRowHeight = 84;
constexpr double kBarSpace = 34;  // the tallest bar, up (allowed) or down (blocked)
// One row: its label, and per bin an allowed bar up from the middle line and a blocked bar down.
std::string row_svg(const StreamRow& row, std::size_t i, double plot, double col, double up_scale,
                    double down_scale) {
  const double y0 = kTop + kRowHeight * static_cast<double>(i);
  const double mid = y0 + 8 + kBarSpace;
  std::string out = sim::row_open("lane", row.lane, row.limit, row.policy, i, y0, kRowHeight, kLeft, 24);
  out += fmt::format(
      "<text x=\"10\" y=\"{:.1f}\"><tspan fill=\"#00664a\">allowed {}</tspan>  "
      "<tspan fill=\"#a33d00\">blocked {}</tspan></text>\n",
      y0 + 56, row.summary.allowed, row.summary.blocked);
  std::string up, down;
  for (std::size_t b = 0; b < row.bins.size(); ++b) {
    const double x = kLeft + (static_cast<double>(b) + 0.5) * col;
    if (row.bins[b].allowed > 0) {
      up += fmt::format("M{:.1f} {:.1f}v-{:.1f}", x, mid, std::max(0.5, static_cast<double>(row.bins[b].allowed) * up_scale));
    }
    if (row.bins[b].blocked > 0) {
      down += fmt::format("M{:.1f} {:.1f}v{:.1f}", x, mid, std::max(0.5, static_cast<double>(row.bins[b].blocked) * down_scale));
    }
  }
  const double stroke = std::max(0.6, col * 0.9);
  if (!up.empty()) {
    out += fmt::format("<path class=\"bins-allowed\" d=\"{}\" stroke=\"{}\" stroke-width=\"{:.2f}\"/>\n", up, kAllowed, stroke);
  }
  if (!down.empty()) {
    out += fmt::format("<path class=\"bins-blocked\" d=\"{}\" stroke=\"{}\" stroke-width=\"{:.2f}\"/>\n", down, kBlocked, stroke);
  }
  out += fmt::format("<line x1=\"{0:.0f}\" x2=\"{1:.0f}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#999\" stroke-width=\"0.5\"/>\n</g>\n",
                     kLeft, kLeft + plot, mid);
  return out;
}

}  // namespace

std::string render_bins_svg(const StreamResult& r, std::string_view title) {
  const double plot = sim::kChartWidth - kLeft - sim::kChartRight;
  const double height = kTop + kRowHeight * static_cast<double>(r.rows.size()) + 50;
  // Allowed and blocked have a scale each (blocked requests are often a few percent of all), the
  // same in every row so that rows compare.
  std::int64_t peak_allowed = 1, peak_blocked = 1;
  for (const StreamRow& row : r.rows) {
    for (const BinCount& b : row.bins) {
      peak_allowed = std::max(peak_allowed, b.allowed);
      peak_blocked = std::max(peak_blocked, b.blocked);
    }
  }
  const double col = plot / static_cast<double>(std::max<std::size_t>(1, r.bins));
  std::string out = sim::svg_open("bins-chart", height, title);
  out += fmt::format(
      "<text x=\"10\" y=\"40\">requests per {} bin: <tspan fill=\"#00664a\">▲ allowed</tspan> above the line "
      "(full height {}), <tspan fill=\"#a33d00\">▼ blocked</tspan> below it (full height {})</text>\n",
      format_bin(r.bin_width), peak_allowed, peak_blocked);
  for (std::size_t i = 0; i < r.rows.size(); ++i) {
    out += row_svg(r.rows[i], i, plot, col, kBarSpace / static_cast<double>(peak_allowed),
                   kBarSpace / static_cast<double>(peak_blocked));
  }
  out += sim::time_axis(r.first, r.bin_width * static_cast<Micros>(r.bins), kLeft, plot,
                        kTop + kRowHeight * static_cast<double>(r.rows.size()) + 2);
  return out + "</svg>\n";
}

std::string format_bin(Micros width) {
  if (width >= 3600 * kMicrosPerSecond) return fmt::format("{:.3g} h", static_cast<double>(width) / 3.6e9);
  if (width >= 60 * kMicrosPerSecond) return fmt::format("{:.3g} min", static_cast<double>(width) / 6e7);
  if (width >= kMicrosPerSecond) return fmt::format("{:.3g} s", static_cast<double>(width) / 1e6);
  return fmt::format("{:.3g} ms", static_cast<double>(width) / 1e3);
}

}  // namespace floodgate
