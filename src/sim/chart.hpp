// The simulator's charts and reports share these: colours, escaping, the time axis and the HTML
// page around a chart (src/sim/chart.cpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "floodgate/clock.hpp"

namespace floodgate::sim {

/// The charts' colours (Okabe–Ito, readable with any colour vision): admitted requests, denied
/// ones, and a level or count drawn as a line.
inline constexpr const char* kAllowedColour = "#009E73";  // bluish green
inline constexpr const char* kBlockedColour = "#D55E00";  // vermillion
inline constexpr const char* kLevelColour = "#0072B2";    // blue

/// Every chart's width and right margin, in pixels (the left margin, for the row labels, is each
/// chart's own).
inline constexpr double kChartWidth = 1000;
inline constexpr double kChartRight = 20;

/// A chart document's opening: the <svg> element (of class `cls` unless empty) `height` pixels
/// high, a white background and `title` as its <title> and heading.
std::string svg_open(std::string_view cls, double height, std::string_view title);

/// A row of a binned chart (simulate's streaming and --charge charts): the opening <g> of class
/// `cls` with the row's lane and limit, a banded background from `left` to the right margin, and
/// the lane's name and policy at the left, 4 and 20 pixels below `y0` + `name_dy`.
std::string row_open(std::string_view cls, std::string_view lane, std::string_view limit, std::string_view policy,
                     std::size_t i, double y0, double height, double left, double name_dy);

/// Text for SVG and HTML: < > & " escaped.
std::string xml_escape(std::string_view s);

/// A tick step of 1, 2 or 5 × 10^k seconds giving about 10 ticks over `span_s` seconds.
double tick_step(double span_s);

/// The time axis of a chart at height `y`, from `left` over `plot` pixels, for `span` µs from
/// `first`: wall-clock ticks (UTC) when `first` is a time since the epoch, else seconds from 0.
std::string time_axis(Micros first, Micros span, double left, double plot, double y);

/// A standalone HTML page: `title`, `notes` as a list, `table` as preformatted text, then `svg`
/// (a chart document) — the report of `simulate --charge` and `--concurrency`.
std::string html_report(std::string_view title, const std::string& table, const std::vector<std::string>& notes,
                        const std::string& svg);

}  // namespace floodgate::sim
