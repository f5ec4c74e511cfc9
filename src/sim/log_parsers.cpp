// One line of a log → one request: layouts with named fields (nginx log_format, Envoy format
// strings), JSON lines and CSV. The formats only split a line into named values; the time, the key
// and the cost are taken from those values the same way for all of them (FieldsParser::parse).
#include <array>
#include <charconv>
#include <map>
#include <optional>

#include <boost/json.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "floodgate/sim/access_log.hpp"
#include "util/text.hpp"

namespace floodgate {

namespace {

// Where the client address usually is, in the order tried, for every format (canonical names).
constexpr std::array<std::string_view, 15> kAddressFields{
    "remote_addr", "realip_remote_addr", "downstream_remote_address_without_port",
    "downstream_remote_address", "downstream_direct_remote_address", "client_ip", "clientip",
    "client_addr", "ip", "remote_ip", "c-ip", "client", "header:x-forwarded-for",
    "x_forwarded_for", "x-forwarded-for"};
constexpr std::array<std::string_view, 11> kTimeFields{
    "t", "time_local", "time_iso8601", "msec", "start_time", "time", "timestamp", "@timestamp",
    "ts", "date", "datetime"};

// Where the duration usually is, for --duration-field auto (units: default_duration_unit).
constexpr std::array<std::string_view, 6> kDurationFields{
    "request_time", "upstream_response_time", "duration", "duration_ms", "response_time", "latency_ms"};

absl::Status bad(std::string_view what) { return absl::InvalidArgumentError(std::string(what)); }

// The closing '%' of the Envoy operator that opens at s[i] ("%REQ(X-A)%", "%START_TIME(%s)%").
std::size_t envoy_end(std::string_view s, std::size_t i) {
  int depth = 0;
  for (std::size_t j = i + 1; j < s.size(); ++j) {
    if (s[j] == '(') {
      ++depth;
    } else if (s[j] == ')') {
      --depth;
    } else if (s[j] == '%' && depth <= 0) {
      return j;
    }
  }
  return std::string_view::npos;
}

// The value of field `name` in a line split into columns (names[i] names values[i]).
template <typename Value>
std::optional<std::string_view> named(const std::vector<std::string>& names,
                                      const std::vector<Value>& values, std::string_view name) {
  for (std::size_t i = 0; i < names.size() && i < values.size(); ++i) {
    if (names[i] == name) return std::string_view(values[i]);
  }
  return std::nullopt;
}

// The shared half: a format fills the line's values; the request is taken from them.
class FieldsParser : public LineParser {
 public:
  explicit FieldsParser(const LogReaderOptions& o) : options_(o) {}

  absl::StatusOr<LogRecord> parse(std::string_view line) final {
    if (absl::Status s = split(line); !s.ok()) return s;
    LogRecord r;
    auto time = find_time();
    if (!time.ok()) return time.status();
    r.time = *time;
    if (absl::Status s = build_key(r.key, r.key_missing); !s.ok()) return s;
    if (auto cost = value(options_.cost_field)) {
      std::int64_t c = -1;
      const auto [end, ec] = std::from_chars(cost->data(), cost->data() + cost->size(), c);
      if (ec != std::errc() || end != cost->data() + cost->size() || c < 0 || c > (std::int64_t{1} << 53)) {
        return bad(fmt::format("bad cost \"{}\" in field {} (a whole number from 0 to 2^53)", *cost,
                               options_.cost_field));
      }
      r.cost = c;
    } else if (options_.require_cost) {
      return bad(fmt::format("no cost field \"{}\" (choose one with --cost-field)", options_.cost_field));
    }
    if (!options_.duration_field.empty()) {
      if (absl::Status s = find_duration(r.duration); !s.ok()) return s;
      if (!r.duration && options_.require_duration) {
        if (options_.duration_field == "auto") {
          return bad(fmt::format("no duration (no field {}; choose one with --duration-field, or give --duration)",
                                 fmt::join(kDurationFields, ", ")));
        }
        return bad(fmt::format("no duration field \"{}\" (or it is \"-\"; give --duration for such lines)",
                               options_.duration_field));
      }
    }
    return r;
  }

 protected:
  /// Splits `line` into values that value() finds until the next call.
  virtual absl::Status split(std::string_view line) = 0;
  /// The value of the field of canonical name `name` on the current line.
  virtual std::optional<std::string_view> value(std::string_view name) const = 0;

 private:
  absl::StatusOr<Micros> find_time() const {
    if (!options_.time_field.empty()) {
      auto v = value(options_.time_field);
      if (!v) return bad(fmt::format("no time field \"{}\"", options_.time_field));
      if (auto t = parse_log_time(*v)) return *t;
      return bad(fmt::format("bad time \"{}\"", *v));
    }
    for (std::string_view f : kTimeFields) {
      if (auto v = value(f)) {
        if (auto t = parse_log_time(*v)) return *t;
        return bad(fmt::format("bad time \"{}\" in field {}", *v, f));
      }
    }
    return bad("no time field (give one with --time-field)");
  }

  // The duration of the request: nullopt when its field is absent or "-" (nginx's absent value).
  absl::Status find_duration(std::optional<Micros>& out) const {
    std::string_view field = options_.duration_field;
    std::optional<std::string_view> v;
    if (field == "auto") {
      for (std::string_view f : kDurationFields) {
        if ((v = value(f))) {
          field = f;
          break;
        }
      }
    } else {
      v = value(field);
    }
    if (!v || text::trim(*v).empty() || text::trim(*v) == "-") return absl::OkStatus();
    const Micros unit = options_.duration_unit > 0 ? options_.duration_unit : default_duration_unit(field);
    out = parse_log_duration(*v, unit);
    if (!out) {
      return bad(fmt::format("bad duration \"{}\" in field {} (a number of {}, or with a unit: 350ms, 1.5s; "
                             "at most 23 hours)",
                             *v, field, unit == 1 ? "microseconds" : unit == 1000 ? "milliseconds" : "seconds"));
    }
    return absl::OkStatus();
  }

  std::optional<std::string_view> address() const {
    for (std::string_view f : kAddressFields) {
      if (auto v = value(f); v && !v->empty() && *v != "-") return v;
    }
    return std::nullopt;
  }

  absl::Status build_key(std::string& key, bool& missing) const {
    if (options_.key.parts.empty()) {  // auto: the trace's "key", else the client address
      if (auto v = value("key"); v && !v->empty()) {
        key = *v;
      } else if (auto a = address()) {
        key = client_address(*a, -1);
      } else {
        return bad("no key: no \"key\" field and no client address (choose one with --key)");
      }
    }
    for (std::size_t i = 0; i < options_.key.parts.size(); ++i) {
      const KeyPart& p = options_.key.parts[i];
      if (i > 0) key += '|';
      const auto v = p.field == "ip" ? address() : value(p.field);
      if (p.field == "ip" && !v) return bad("no client address (choose a key field with --key)");
      if (!v) missing = true;
      if (!v || v->empty()) {
        key += '-';
      } else if (p.field == "ip" || p.prefix_bits >= 0) {
        key += client_address(*v, p.prefix_bits);
      } else {
        key += *v;
      }
    }
    if (key.size() > 1024) return bad("the key is longer than 1024 bytes");
    return absl::OkStatus();
  }

  LogReaderOptions options_;
};

// nginx log_format ("$remote_addr - [$time_local] …") or an Envoy format string ("%START_TIME% …"):
// literal text between named values. A value runs to the next occurrence of the literal that
// follows it; text after the layout's end is ignored (so "combined" also reads "main" lines).
class LayoutParser final : public FieldsParser {
 public:
  static absl::StatusOr<std::unique_ptr<LineParser>> make(std::string_view layout,
                                                          const LogReaderOptions& o) {
    auto p = std::make_unique<LayoutParser>(o);
    std::string literal;
    for (std::size_t i = 0; i < layout.size();) {
      auto t = next_token(layout, i);
      if (!t.ok()) return t.status();
      if (!t->field) {
        literal += layout[i];
      } else if (!p->add(literal, *t->field)) {
        return bad(fmt::format("layout \"{}\": two fields with nothing between", layout));
      }
      i = t->end;
    }
    if (p->names_.empty()) return bad(fmt::format("layout \"{}\" has no fields", layout));
    p->literals_.push_back(literal);
    p->values_.resize(p->names_.size());
    return std::unique_ptr<LineParser>(std::move(p));
  }

  explicit LayoutParser(const LogReaderOptions& o) : FieldsParser(o) {}

 protected:
  absl::Status split(std::string_view line) override {
    if (!line.starts_with(literals_[0])) return bad(fmt::format("does not start with \"{}\"", literals_[0]));
    std::size_t at = literals_[0].size();
    for (std::size_t i = 0; i < names_.size(); ++i) {
      const std::string& next = literals_[i + 1];
      const std::size_t end = next.empty() ? line.size() : line.find(next, at);
      if (end == std::string_view::npos) {
        return bad(fmt::format("no \"{}\" after field {}", next, names_[i]));
      }
      values_[i] = line.substr(at, end - at);
      at = end + next.size();
    }
    return absl::OkStatus();
  }

  std::optional<std::string_view> value(std::string_view name) const override {
    return named(names_, values_, name);
  }

 public:
  [[nodiscard]] std::vector<std::string> fields() const override { return names_; }

 private:
  bool add(std::string& literal, std::string_view name) {
    if (literal.empty() && !names_.empty()) return false;
    literals_.push_back(std::exchange(literal, {}));
    names_.push_back(canonical_field(name));
    return true;
  }

  // The token of a layout at `i`: a field ($name, ${name}, %NAME…%) with the index after it, or
  // one literal character (no field).
  struct Token {
    std::size_t end;
    std::optional<std::string_view> field;
  };
  static absl::StatusOr<Token> next_token(std::string_view layout, std::size_t i) {
    if (layout[i] == '$') {
      std::size_t end = i + 1;
      const bool braced = end < layout.size() && layout[end] == '{';
      if (braced) ++end;
      while (end < layout.size() && (text::is_alpha(layout[end]) || text::is_digit(layout[end]) || layout[end] == '_')) ++end;
      if (braced && (end >= layout.size() || layout[end] != '}')) return bad("layout: an unclosed ${");
      const std::string_view name = layout.substr(i + (braced ? 2 : 1), end - i - (braced ? 2 : 1));
      if (name.empty()) return bad(fmt::format("layout \"{}\": a '$' without a name", layout));
      return Token{end + (braced ? 1 : 0), name};
    }
    if (layout[i] == '%' && i + 1 < layout.size() && layout[i + 1] != '%') {
      const std::size_t end = envoy_end(layout, i);
      if (end == std::string_view::npos) return bad(fmt::format("layout \"{}\": an unclosed %", layout));
      return Token{end + 1, layout.substr(i + 1, end - i - 1)};
    }
    return Token{i + 1, std::nullopt};
  }

  std::vector<std::string> literals_;  // before each field, and after the last
  std::vector<std::string> names_;
  std::vector<std::string_view> values_;
};

// One JSON object per line (Envoy's JSON access log, the replay trace format, log shippers).
// Strings are taken as they are, numbers as written; names compare by canonical_field.
class JsonParser final : public FieldsParser {
 public:
  explicit JsonParser(const LogReaderOptions& o) : FieldsParser(o) {}

 protected:
  absl::Status split(std::string_view line) override {
    boost::system::error_code ec;
    doc_ = boost::json::parse(line, ec);
    if (ec) return bad(fmt::format("not valid JSON ({})", ec.message()));
    if (!doc_.is_object()) return bad("not a JSON object");
    fields_.clear();
    numbers_.clear();
    numbers_.reserve(doc_.as_object().size());
    for (const auto& [k, v] : doc_.as_object()) {
      const std::string_view raw(k.data(), k.size());
      auto it = names_.find(raw);
      if (it == names_.end()) it = names_.emplace(std::string(raw), canonical_field(raw)).first;
      if (v.is_string()) {
        fields_.emplace_back(it->second, std::string_view(v.as_string().data(), v.as_string().size()));
      } else if (v.is_number()) {
        numbers_.push_back(boost::json::serialize(v));
        fields_.emplace_back(it->second, numbers_.back());
      } else if (!v.is_null()) {
        fields_.emplace_back(it->second, std::string_view{});
      }
    }
    return absl::OkStatus();
  }

  std::optional<std::string_view> value(std::string_view name) const override {
    for (const auto& [n, v] : fields_) {
      if (n == name) return v;
    }
    return std::nullopt;
  }

 public:
  [[nodiscard]] std::vector<std::string> fields() const override {
    std::vector<std::string> out;
    for (const auto& [n, v] : fields_) out.emplace_back(n);
    return out;
  }

 private:
  boost::json::value doc_;
  // raw name → canonical (names repeat); a node-based map, as fields_ points into its values
  std::map<std::string, std::string, std::less<>> names_;
  std::vector<std::string> numbers_;
  std::vector<std::pair<std::string_view, std::string_view>> fields_;
};

// RFC 4180 fields of one line ("a,\"b,c\",\"say \"\"hi\"\"\""): quotes around a field, "" inside.
absl::Status split_csv(std::string_view line, std::vector<std::string>& out) {
  out.clear();
  std::size_t i = 0;
  for (;;) {
    std::string field;
    if (i < line.size() && line[i] == '"') {
      for (++i;; ++i) {
        if (i >= line.size()) return bad("an unclosed quote");
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            field += '"';
            ++i;
          } else {
            ++i;
            break;
          }
        } else {
          field += line[i];
        }
      }
      if (i < line.size() && line[i] != ',') return bad("text after a closing quote");
    } else {
      const std::size_t comma = std::min(line.find(',', i), line.size());
      field.assign(line.substr(i, comma - i));
      i = comma;
    }
    out.push_back(std::move(field));
    if (i >= line.size()) break;
    ++i;  // the comma
  }
  return absl::OkStatus();
}

class CsvParser final : public FieldsParser {
 public:
  CsvParser(const LogReaderOptions& o, std::vector<std::string> names)
      : FieldsParser(o), names_(std::move(names)) {}

 protected:
  absl::Status split(std::string_view line) override {
    if (absl::Status s = split_csv(line, values_); !s.ok()) return s;
    if (values_.size() != names_.size()) {
      return bad(fmt::format("{} fields where the header has {}", values_.size(), names_.size()));
    }
    return absl::OkStatus();
  }

  std::optional<std::string_view> value(std::string_view name) const override {
    return named(names_, values_, name);
  }

 public:
  [[nodiscard]] std::vector<std::string> fields() const override { return names_; }

 private:
  std::vector<std::string> names_;
  std::vector<std::string> values_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<LineParser>> LineParser::make(LogFormat format,
                                                             const LogReaderOptions& options,
                                                             std::string_view header) {
  switch (format) {
    case LogFormat::kJsonl: return std::unique_ptr<LineParser>(std::make_unique<JsonParser>(options));
    case LogFormat::kCombined:
      return LayoutParser::make(options.layout.empty() ? kCombinedLogFormat : options.layout, options);
    case LogFormat::kEnvoy:
      return LayoutParser::make(options.layout.empty() ? kEnvoyLogFormat : options.layout, options);
    case LogFormat::kCsv: {
      std::vector<std::string> names;
      if (absl::Status s = split_csv(text::trim(header), names); !s.ok()) {
        return bad(fmt::format("the CSV header: {}", std::string(s.message())));
      }
      for (std::string& n : names) n = canonical_field(n);
      return std::unique_ptr<LineParser>(std::make_unique<CsvParser>(options, std::move(names)));
    }
    case LogFormat::kAuto: break;
  }
  return bad("no log format: give --format jsonl, combined, envoy or csv");
}

LogFormat detect_log_format(std::string_view first_line) {
  const std::string_view line = text::trim(first_line);
  if (line.starts_with("{")) return LogFormat::kJsonl;
  for (LogFormat f : {LogFormat::kCombined, LogFormat::kEnvoy}) {
    // Only the layout and the time decide: keyed by a field every line of the layout has.
    LogReaderOptions probe;
    probe.key.parts.push_back({f == LogFormat::kEnvoy ? "start_time" : "remote_addr", -1});
    auto parser = LineParser::make(f, probe);
    if (parser.ok() && (*parser)->parse(line).ok()) return f;
  }
  if (line.find(',') != std::string_view::npos) return LogFormat::kCsv;
  return LogFormat::kAuto;
}

}  // namespace floodgate
