// The `limits` rate notation: "10/minute", "5 per 2 seconds", "2/second; 10/minute".
#include "floodgate/rate.hpp"

#include <array>
#include <cctype>
#include <string>

#include <fmt/format.h>

#include "absl/status/status.h"
#include "util/text.hpp"

namespace floodgate {
namespace {

struct Unit {
  std::string_view name;
  Micros micros;
};

constexpr Micros kMinute = 60 * kMicrosPerSecond;
constexpr Micros kHour = 60 * kMinute;
constexpr Micros kDay = 24 * kHour;

// Canonical names first: to_string uses the first entry with a matching length.
constexpr std::array<Unit, 17> kUnits{{
    {"year", 360 * kDay},  // as Python's `limits` defines it
    {"month", 30 * kDay},
    {"day", kDay},
    {"hour", kHour},
    {"minute", kMinute},
    {"second", kMicrosPerSecond},
    {"millisecond", 1000},
    {"microsecond", 1},
    {"d", kDay},
    {"h", kHour},
    {"hr", kHour},
    {"min", kMinute},
    {"s", kMicrosPerSecond},
    {"sec", kMicrosPerSecond},
    {"ms", 1000},
    {"us", 1},
    {"\xC2\xB5s", 1},  // µs
}};

const Unit* find_unit(std::string_view word) {
  for (const Unit& u : kUnits) {
    if (u.name == word) return &u;
  }
  if (word.size() > 1 && word.back() == 's') {  // plural
    word.remove_suffix(1);
    for (const Unit& u : kUnits) {
      if (u.name == word) return &u;
    }
  }
  return nullptr;
}

// A cursor over one limit item, producing errors that quote the item.
class Scanner {
 public:
  explicit Scanner(std::string_view item) : item_(item) {}

  void skip_space() {
    while (pos_ < item_.size() && text::is_space(item_[pos_])) ++pos_;
  }
  [[nodiscard]] bool done() const { return pos_ >= item_.size(); }
  [[nodiscard]] char peek() const { return done() ? '\0' : item_[pos_]; }
  [[nodiscard]] bool at_digit() const {
    return !done() && text::is_digit(item_[pos_]);
  }

  // A whole number in [1, hi]; `what` names it in errors, `range` says [1, hi] in words.
  absl::StatusOr<std::int64_t> number(std::string_view what, std::int64_t hi = kMaxAmount,
                                      std::string_view range = "1 to 2^53",
                                      std::string_view example = "\"10/minute\" or \"5 per 2 seconds\"") {
    skip_space();
    const std::size_t start = pos_;
    while (!done() && (text::is_digit(peek()) || peek() == '.' ||
                       peek() == '-' || peek() == '+' || peek() == '_' || peek() == 'e' ||
                       peek() == 'E')) {
      ++pos_;
    }
    const std::string_view tok = item_.substr(start, pos_ - start);
    if (tok.empty()) return error(fmt::format("expected {} (a whole number)", what), tok, example);
    std::int64_t v = 0;
    for (char c : tok) {
      if (!text::is_digit(c)) {
        return error(fmt::format("{} must be a whole number from {}", what, range), tok, example);
      }
      v = v * 10 + (c - '0');
      if (v > hi) {
        return error(hi == kMaxAmount ? fmt::format("{} exceeds 2^53", what)
                                      : fmt::format("{} must be a whole number from {}", what, range),
                     tok, example);
      }
    }
    if (v == 0) return error(fmt::format("{} must be at least 1", what), tok, example);
    return v;
  }

  // A run of letters (and 'µ').
  std::string_view word() {
    skip_space();
    const std::size_t start = pos_;
    while (!done() && (text::is_alpha(peek()) ||
                       static_cast<unsigned char>(peek()) >= 0x80)) {
      ++pos_;
    }
    return item_.substr(start, pos_ - start);
  }

  std::string_view rest() const { return item_.substr(pos_); }

  bool eat(char c) {
    if (peek() != c || done()) return false;
    ++pos_;
    return true;
  }

  // A run of anything but spaces (a time zone's name: "America/Port-au-Prince", "Etc/GMT+5").
  std::string_view token() {
    skip_space();
    const std::size_t start = pos_;
    while (!done() && !text::is_space(peek())) ++pos_;
    return item_.substr(start, pos_ - start);
  }

  absl::Status error(std::string_view problem, std::string_view offending,
                     std::string_view example = "\"10/minute\" or \"5 per 2 seconds\"") const {
    const std::string shown =
        offending.empty() ? std::string("the end") : fmt::format("\"{}\"", offending);
    return absl::InvalidArgumentError(fmt::format("invalid limit \"{}\": {} at {}; expected e.g. {}",
                                                  text::trim(item_), problem, shown, example));
  }

 private:
  std::string_view item_;
  std::size_t pos_ = 0;
};

constexpr std::string_view kCalendarExample =
    "\"1000/calendar day\" or \"1000000 per calendar month in Europe/Berlin anchored 31\"";

// After "N per calendar": the unit, then `in <zone>`, `anchored <day>` (months) and `burst <n>`,
// each at most once and in any order.
absl::StatusOr<Limit> parse_calendar(Scanner& s, std::int64_t amount) {
  const std::string_view unit_word = s.word();
  std::string unit_name = text::lower(unit_word);
  if (unit_name.size() > 1 && unit_name.back() == 's') unit_name.pop_back();
  CalendarUnit unit = CalendarUnit::kNone;
  for (CalendarUnit u : {CalendarUnit::kDay, CalendarUnit::kWeek, CalendarUnit::kMonth, CalendarUnit::kYear}) {
    if (unit_name == to_string(u)) unit = u;
  }
  if (unit == CalendarUnit::kNone) {
    return s.error("unknown calendar unit (expected day, week, month or year)",
                   unit_word.empty() ? s.rest() : unit_word, kCalendarExample);
  }
  std::string_view zone = "UTC";
  std::string_view zone_word;  // the zone as written, for errors (empty: not given)
  std::string_view anchor_word;
  int anchor = 1;
  std::int64_t burst = 0;
  bool has_burst = false;
  for (s.skip_space(); !s.done(); s.skip_space()) {
    const std::string_view kw = s.word();
    const std::string lower = text::lower(kw);
    if (lower == "in" && zone_word.empty()) {
      zone_word = s.token();
      if (zone_word.empty()) return s.error("expected a time zone after \"in\"", zone_word, kCalendarExample);
      zone = zone_word;
    } else if (lower == "anchored" && anchor_word.empty()) {
      anchor_word = kw;
      s.skip_space();
      auto n = s.number("the anchor day", 31, "1 to 31", kCalendarExample);
      if (!n.ok()) return n.status();
      anchor = static_cast<int>(*n);
    } else if (lower == "burst" && !has_burst) {
      auto b = s.number("the burst");
      if (!b.ok()) return b.status();
      burst = *b;
      has_burst = true;
    } else {
      return s.error(
          "unexpected text after the calendar unit (only \"in <time zone>\", \"anchored <day>\" for a month, "
          "and \"burst N\" may follow, each once)",
          kw.empty() ? s.rest() : kw, kCalendarExample);
    }
  }
  if (!anchor_word.empty() && unit != CalendarUnit::kMonth) {
    return s.error(fmt::format("an anchor day applies to calendar months only, not to a calendar {}",
                               to_string(unit)),
                   anchor_word, kCalendarExample);
  }
  auto calendar = Calendar::make(unit, zone, anchor);
  if (!calendar.ok()) {
    return s.error(std::string(calendar.status().message()), zone_word.empty() ? zone : zone_word, kCalendarExample);
  }
  return Limit::make(amount, *calendar, burst);
}

constexpr std::string_view kConcurrentExample = "\"20 concurrent\" or \"20 concurrent for 5 minutes\"";

// After "N concurrent": nothing, or `for [count] <unit>`, the time to live of a lease.
absl::StatusOr<Limit> parse_concurrent(Scanner& s, std::int64_t amount) {
  s.skip_space();
  if (s.done()) return Limit::concurrency(amount, kDefaultLeaseTtl);
  const std::string_view kw = s.word();
  if (text::lower(kw) != "for") {
    return s.error("unexpected text after \"concurrent\" (only \"for <time to live>\" may follow)",
                   kw.empty() ? s.rest() : kw, kConcurrentExample);
  }
  std::int64_t count = 1;
  s.skip_space();
  if (s.at_digit()) {
    auto n = s.number("the number of periods");
    if (!n.ok()) return n.status();
    count = *n;
  }
  const std::string_view unit_word = s.word();
  const Unit* unit = find_unit(text::lower(unit_word));
  if (unit == nullptr || unit->micros > kDay) {
    return s.error("unknown unit of a lease's time to live (expected second, minute, hour, day, "
                   "millisecond or microsecond)",
                   unit_word.empty() ? s.rest() : unit_word, kConcurrentExample);
  }
  if (count > kMaxLeaseTtl / unit->micros) {
    return s.error("a lease's time to live is at most one day (a lease that outlives its request is freed by "
                   "it)",
                   unit_word, kConcurrentExample);
  }
  s.skip_space();
  if (!s.done()) return s.error("unexpected text after the time to live", s.rest(), kConcurrentExample);
  return Limit::concurrency(amount, count * unit->micros);
}

// Whether `rest` starts with the word `w` (case-insensitive), after spaces.
bool starts_with_word(std::string_view rest, std::string_view w) {
  rest = text::trim(rest);
  if (rest.size() < w.size() || text::lower(rest.substr(0, w.size())) != w) return false;
  return rest.size() == w.size() || !text::is_alpha(rest[w.size()]);
}

// The optional count of units before the unit ("5 per 2 seconds"): 1 when there is none;
// `count_word` is set to its text, for the error of a count before "calendar".
absl::StatusOr<std::int64_t> parse_count(Scanner& s, std::string_view& count_word) {
  s.skip_space();
  if (!s.at_digit()) return 1;
  count_word = s.rest();
  auto n = s.number("the number of periods");
  if (!n.ok()) return n.status();
  count_word = count_word.substr(0, count_word.size() - s.rest().size());
  return *n;
}

// What may follow the unit: nothing (a burst of 0: the default) or "burst N".
absl::StatusOr<std::int64_t> parse_burst(Scanner& s) {
  s.skip_space();
  if (s.done()) return 0;
  const std::string_view kw = s.word();
  if (text::lower(kw) != "burst") {
    return s.error("unexpected text after the unit (only \"burst N\" may follow)",
                   kw.empty() ? s.rest() : kw);
  }
  auto b = s.number("the burst");
  if (!b.ok()) return b.status();
  s.skip_space();
  if (!s.done()) return s.error("unexpected text after the burst", s.rest());
  return *b;
}

absl::StatusOr<Limit> parse_one(std::string_view item) {
  Scanner s(item);
  auto amount = s.number("the amount");
  if (!amount.ok()) return amount.status();
  if (starts_with_word(s.rest(), "concurrent")) {
    s.word();
    return parse_concurrent(s, *amount);
  }

  // "/" or "per"
  s.skip_space();
  if (!s.eat('/')) {
    const std::string_view sep = s.word();
    if (text::lower(sep) != "per") return s.error("expected \"/\" or \"per\"", sep);
  }

  // Optional count of units: "5 per 2 seconds".
  std::string_view count_word;
  auto count_or = parse_count(s, count_word);
  if (!count_or.ok()) return count_or.status();
  const std::int64_t count = *count_or;

  const std::string_view unit_word = s.word();
  if (text::lower(unit_word) == "calendar") {
    if (!count_word.empty()) {
      return s.error("a calendar period is one unit: no count may precede \"calendar\"", count_word,
                     kCalendarExample);
    }
    return parse_calendar(s, *amount);
  }
  const Unit* unit = find_unit(text::lower(unit_word));
  if (unit == nullptr) {
    return s.error("unknown unit (expected second, minute, hour, day, month, year, "
                   "millisecond or microsecond, or calendar day, week, month or year)",
                   unit_word.empty() ? s.rest() : unit_word);
  }
  if (count > kMaxPeriod / unit->micros) {
    return s.error("the period exceeds 2^53 microseconds (about 285 years)", item);
  }
  const Micros period = count * unit->micros;

  auto burst = parse_burst(s);
  if (!burst.ok()) return burst.status();
  return Limit::make(*amount, period, *burst);
}

}  // namespace

absl::StatusOr<Limit> Limit::make(std::int64_t amount, Micros period, std::int64_t burst) {
  if (amount < 1 || amount > kMaxAmount) {
    return absl::InvalidArgumentError(
        fmt::format("amount {} is out of range: expected 1 to 2^53", amount));
  }
  if (period < 1 || period > kMaxPeriod) {
    return absl::InvalidArgumentError(
        fmt::format("period of {} µs is out of range: expected 1 µs to 2^53 µs", period));
  }
  if (burst < 0 || burst > kMaxAmount) {
    return absl::InvalidArgumentError(
        fmt::format("burst {} is out of range: expected 1 to 2^53 (0 = the amount)", burst));
  }
  return Limit{amount, period, burst, {}};
}

absl::StatusOr<Limit> Limit::make(std::int64_t amount, const Calendar& calendar, std::int64_t burst) {
  if (!calendar) return absl::InvalidArgumentError("a calendar limit needs a calendar unit: day, week, month or year");
  auto l = make(amount, calendar.nominal_period(), burst);
  if (l.ok()) l->calendar = calendar;
  return l;
}

absl::StatusOr<Limit> Limit::concurrency(std::int64_t amount, Micros lease_ttl) {
  auto l = make(amount, lease_ttl);
  if (!l.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("concurrency limit: {}", std::string(l.status().message())));
  }
  if (lease_ttl < 1000) {
    return absl::InvalidArgumentError(fmt::format(
        "concurrency limit: a lease's time to live of {} µs is too short: expected at least 1 ms", lease_ttl));
  }
  l->concurrent = true;
  return l;
}

absl::StatusOr<std::vector<Limit>> parse_limits(std::string_view text) {
  std::vector<Limit> out;
  if (text::trim(text).empty()) {
    return absl::InvalidArgumentError(
        "empty limit: expected e.g. \"10/minute\" or \"2/second; 10/minute\"");
  }
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find_first_of(";,|", start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = text.substr(start, end - start);
    if (text::trim(item).empty()) {
      return absl::InvalidArgumentError(fmt::format(
          "invalid limits \"{}\": empty limit at position {} (between separators ';', ',' or "
          "'|')",
          text, start));
    }
    auto limit = parse_one(item);
    if (!limit.ok()) return limit.status();
    out.push_back(*limit);
    start = end + 1;
  }
  return out;
}

std::string to_string(const Limit& limit) {
  if (limit.calendar) {
    const Calendar& c = limit.calendar;
    std::string out = fmt::format("{}/calendar {} in {}", limit.amount, to_string(c.unit), c.zone.name());
    if (c.anchor_day != 1) out += fmt::format(" anchored {}", c.anchor_day);
    if (limit.burst > 0) out += fmt::format(" burst {}", limit.burst);
    return out;
  }
  // The largest unit that divides the period.
  const Unit* best = &kUnits[7];  // microsecond
  for (std::size_t i = 0; i < 8; ++i) {
    if (limit.period % kUnits[i].micros == 0) {
      best = &kUnits[i];
      break;
    }
  }
  const std::int64_t count = limit.period / best->micros;
  if (limit.concurrent) {
    return fmt::format("{} concurrent for {} {}{}", limit.amount, count, best->name, count == 1 ? "" : "s");
  }
  std::string out = count == 1 ? fmt::format("{}/{}", limit.amount, best->name)
                               : fmt::format("{} per {} {}s", limit.amount, count, best->name);
  if (limit.burst > 0) out += fmt::format(" burst {}", limit.burst);
  return out;
}

std::string to_string(const std::vector<Limit>& limits) {
  std::string out;
  for (const Limit& l : limits) {
    if (!out.empty()) out += "; ";
    out += to_string(l);
  }
  return out;
}

}  // namespace floodgate
