// The chart of a ChargeResult: per row, the most one key used in a period, charged after the
// response and reserved+settled side by side, against the limit.
#include <algorithm>

#include <fmt/format.h>

#include "floodgate/sim/charge.hpp"
#include "sim/chart.hpp"

namespace floodgate {

namespace {

constexpr const char* kAfter = sim::kBlockedColour;    // as denied requests
constexpr const char* kReserved = sim::kLevelColour;
constexpr double kLeft = 250;
constexpr double kTop = 50;
constexpr double kRowHeight = 110;
constexpr double kBarSpace = 80;  // the tallest bar

std::string row_svg(const ChargeRow& row, std::size_t i, Micros first, double us_px) {
  const double y0 = kTop + kRowHeight * static_cast<double>(i);
  const double base = y0 + 8 + kBarSpace + 8;
  std::int64_t peak = std::max<std::int64_t>(1, row.amount);
  for (std::size_t b = 0; b < row.after_bins.size(); ++b) peak = std::max({peak, row.after_bins[b], row.reserved_bins[b]});
  const double scale = kBarSpace / static_cast<double>(peak);
  std::string out = sim::row_open("charge-row", row.lane, row.limit, row.policy, i, y0, kRowHeight, kLeft, 22);
  out += fmt::format(
      "<text x=\"10\" y=\"{:.1f}\" fill=\"#a33d00\">after: max {}, over Σ {}</text>\n"
      "<text x=\"10\" y=\"{:.1f}\" fill=\"#005a8c\">reserved: max {}, over Σ {}</text>\n",
      y0 + 58, row.after.max_in_period, row.after.total_over, y0 + 76, row.reserved.max_in_period,
      row.reserved.total_over);
  const double bin_px = static_cast<double>(row.bin_width) * us_px;
  const double bar = std::max(0.6, bin_px * 0.45);
  for (std::size_t b = 0; b < row.after_bins.size(); ++b) {
    const double x = kLeft + static_cast<double>(row.bin_start - first + static_cast<Micros>(b) * row.bin_width) * us_px;
    const auto draw = [&](std::int64_t v, double at, const char* colour, const char* cls) {
      if (v <= 0) return;
      const double h = std::max(0.5, static_cast<double>(v) * scale);
      out += fmt::format("<rect class=\"{}\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\">"
                         "<title>{}</title></rect>\n",
                         cls, at, base - h, bar, h, colour, v);
    };
    draw(row.after_bins[b], x + bin_px * 0.05, kAfter, "after");
    draw(row.reserved_bins[b], x + bin_px * 0.05 + bar, kReserved, "reserved");
  }
  const double limit_y = base - static_cast<double>(row.amount) * scale;
  out += fmt::format(
      "<line class=\"limit\" x1=\"{0:.0f}\" x2=\"{1:.0f}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#000\" "
      "stroke-dasharray=\"6 4\"/>\n<text x=\"{1:.0f}\" y=\"{3:.1f}\" text-anchor=\"end\">limit {4}</text>\n"
      "<line x1=\"{0:.0f}\" x2=\"{1:.0f}\" y1=\"{5:.1f}\" y2=\"{5:.1f}\" stroke=\"#999\" stroke-width=\"0.5\"/>\n</g>\n",
      kLeft, sim::kChartWidth - sim::kChartRight, limit_y, limit_y - 3, row.amount, base);
  return out;
}

}  // namespace

std::string render_charge_svg(const ChargeResult& r, std::string_view title) {
  const double plot = sim::kChartWidth - kLeft - sim::kChartRight;
  const double height = kTop + kRowHeight * static_cast<double>(r.rows.size()) + 50;
  // A common time axis from the earliest period shown to the end of the latest.
  Micros from = r.first, to = r.last;
  for (const ChargeRow& row : r.rows) {
    from = std::min(from, row.bin_start);
    to = std::max(to, row.bin_start + static_cast<Micros>(row.after_bins.size()) * row.bin_width);
  }
  const double us_px = plot / static_cast<double>(std::max<Micros>(1, to - from));
  std::string out = sim::svg_open("charge-chart", height, title);
  out += fmt::format(
      "<text x=\"10\" y=\"40\">the most units one key used in a period: <tspan fill=\"#a33d00\">■ charged after "
      "the response</tspan>, <tspan fill=\"#005a8c\">■ reserved and settled</tspan>; dashed: the limit</text>\n");
  for (std::size_t i = 0; i < r.rows.size(); ++i) out += row_svg(r.rows[i], i, from, us_px);
  out += sim::time_axis(from, to - from, kLeft, plot, kTop + kRowHeight * static_cast<double>(r.rows.size()) + 2);
  return out + "</svg>\n";
}

std::string render_charge_html(const ChargeResult& r, std::string_view title, const std::string& table,
                               const std::vector<std::string>& notes) {
  return sim::html_report(title, table, notes, render_charge_svg(r, title));
}

}  // namespace floodgate
