// The HTML report of `floodgate simulate --out x.html`: one self-contained page (inline CSS and
// SVG, no script, nothing fetched) whose size depends on rows, bins and top keys, not requests.
#include <algorithm>

#include <fmt/format.h>

#include "floodgate/sim/stream.hpp"
#include "sim/chart.hpp"

namespace floodgate {

namespace {

using sim::xml_escape;

constexpr std::string_view kStyle =
    "body{font-family:sans-serif;margin:1rem 2rem;color:#222;max-width:1100px}"
    "h1{font-size:1.4rem}h2{font-size:1.15rem;margin-top:2rem}"
    "table{border-collapse:collapse;font-size:.9rem}th,td{padding:.25rem .6rem;border-bottom:1px solid #ddd}"
    "th{text-align:left;background:#f4f4f4}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}"
    ".scroll{overflow-x:auto}svg{max-width:100%;height:auto}.note{color:#555}"
    ".hours td{padding:.2rem .3rem;font-size:.75rem;text-align:right}code{background:#f4f4f4;padding:0 .2rem}";

std::string percent(std::int64_t part, std::int64_t whole) {
  if (whole <= 0) return "–";
  return fmt::format("{:.1f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
}

std::string row_name(const StreamRow& row, bool with_limit) {
  return with_limit ? fmt::format("{} · {}", row.limit, row.lane) : row.lane;
}

bool several_limits(const StreamResult& r) {
  return std::any_of(r.rows.begin(), r.rows.end(), [&](const StreamRow& x) { return x.limit != r.rows.front().limit; });
}

std::string summary_table(const StreamResult& r) {
  const bool many = several_limits(r);
  std::string out =
      "<div class=\"scroll\"><table id=\"summary\"><thead><tr><th>limit</th><th>strategy</th>"
      "<th class=\"n\">allowed</th><th class=\"n\">blocked</th><th class=\"n\">blocked share</th>"
      "<th class=\"n\">keys ever blocked</th><th class=\"n\">share of keys</th>"
      "<th class=\"n\">max in a period</th><th class=\"n\">worst burst</th></tr></thead><tbody>\n";
  for (const StreamRow& row : r.rows) {
    const std::int64_t total = row.summary.allowed + row.summary.blocked;
    out += fmt::format(
        "<tr data-row=\"{}\"><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>"
        "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>"
        "<td class=\"n\">{}</td></tr>\n",
        xml_escape(row_name(row, many)), xml_escape(row.limit), xml_escape(row.policy), row.summary.allowed,
        row.summary.blocked, percent(row.summary.blocked, total), row.keys_blocked,
        percent(row.keys_blocked, r.keys), row.summary.max_in_period, row.summary.worst_burst);
  }
  return out + "</tbody></table></div>\n"
               "<p class=\"note\">Max in a period: the most units one key got within any interval of the "
               "first limit's period (a strategy that holds its limit exactly stays at the amount). "
               "Worst burst: the most within one emission interval (period ÷ amount).</p>\n";
}

std::string top_keys_table(const StreamResult& r) {
  if (r.top.empty()) return "<p>No key was ever blocked.</p>\n";
  const bool many = several_limits(r);
  std::string out = "<div class=\"scroll\"><table id=\"top-keys\"><thead><tr><th>key</th><th class=\"n\">requests</th>";
  for (const StreamRow& row : r.rows) out += fmt::format("<th class=\"n\">{}</th>", xml_escape(row_name(row, many)));
  out += "</tr></thead><tbody>\n";
  for (const StreamResult::TopKey& k : r.top) {
    out += fmt::format("<tr><td><code>{}</code></td><td class=\"n\">{}</td>", xml_escape(k.key), k.requests);
    for (std::int64_t b : k.blocked) out += fmt::format("<td class=\"n\">{}</td>", b);
    out += "</tr>\n";
  }
  return out + "</tbody></table></div>\n";
}

std::string hours_table(const StreamResult& r) {
  const bool many = several_limits(r);
  std::int64_t peak = 1;
  for (const StreamRow& row : r.rows) peak = std::max(peak, *std::max_element(row.blocked_by_hour.begin(), row.blocked_by_hour.end()));
  std::string out = "<div class=\"scroll\"><table id=\"hours\" class=\"hours\"><thead><tr><th>blocked, by hour (UTC)</th>";
  for (int h = 0; h < 24; ++h) out += fmt::format("<th class=\"n\">{:02}</th>", h);
  out += "</tr></thead><tbody>\n";
  for (const StreamRow& row : r.rows) {
    out += fmt::format("<tr><td>{}</td>", xml_escape(row_name(row, many)));
    for (std::int64_t n : row.blocked_by_hour) {
      const double a = static_cast<double>(n) / static_cast<double>(peak);
      out += fmt::format("<td style=\"background:rgba(213,94,0,{:.2f})\">{}</td>", a * 0.8, n);
    }
    out += "</tr>\n";
  }
  return out + "</tbody></table></div>\n";
}

}  // namespace

std::string render_report_html(const StreamResult& r, std::string_view title,
                               const std::vector<std::string>& notes) {
  std::string out = fmt::format(
      "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<title>{0}</title><style>{1}</style></head>\n<body>\n<h1>{0}</h1>\n",
      xml_escape(title), kStyle);
  out += fmt::format("<p id=\"totals\">{} requests from {} keys; {} bins of {}.</p>\n", r.requests, r.keys,
                     r.bins, format_bin(r.bin_width));
  for (const std::string& n : notes) out += fmt::format("<p class=\"note\">{}</p>\n", xml_escape(n));
  out += "<h2>Summary</h2>\n" + summary_table(r);
  out += "<h2>Allowed and blocked over time</h2>\n<figure id=\"chart\">\n" +
         render_bins_svg(r, "allowed and blocked requests per time bin") + "</figure>\n";
  if (!r.marked.empty()) {
    const std::string what = r.all_marked ? std::string("every request")
                                          : fmt::format("the requests of key {}", r.marked.front().key);
    out += fmt::format("<h2>Request by request: {}</h2>\n<figure id=\"marks\">\n", xml_escape(what)) +
           render_svg(marked_lanes(r), r.marked, what) + "</figure>\n";
  }
  out += "<h2>Top keys by blocked requests</h2>\n" + top_keys_table(r);
  out += "<h2>Blocks by hour of day</h2>\n" + hours_table(r);
  return out + "</body></html>\n";
}

}  // namespace floodgate
