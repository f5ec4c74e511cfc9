// Streams the requests of a log file, plain or gzip'd (zlib reads both), a buffer at a time.
#include <zlib.h>

#include <cstring>

#include <fmt/format.h>

#include "floodgate/sim/access_log.hpp"
#include "util/text.hpp"

namespace floodgate {

namespace {

constexpr std::size_t kMaxLineBytes = 64 * 1024;
constexpr std::size_t kBufferBytes = 256 * 1024;
constexpr std::size_t kQuotedLineBytes = 200;

class FileLogReader final : public LogReader {
 public:
  FileLogReader(gzFile file, std::string path) : file_(file), path_(std::move(path)) {
    buffer_.resize(kBufferBytes);
  }
  ~FileLogReader() override { gzclose(file_); }
  FileLogReader(const FileLogReader&) = delete;
  FileLogReader& operator=(const FileLogReader&) = delete;

  absl::Status start(const LogReaderOptions& options) {
    options_ = options;
    LogFormat format = options.format;
    std::string header;
    if (format == LogFormat::kAuto || format == LogFormat::kCsv) {
      // The first line decides the format (and is the header of a CSV file).
      while (next_line() && text::trim(line_).empty()) {}
      if (!status_.ok()) return status_;
      if (format == LogFormat::kAuto) format = detect_log_format(line_);
      if (format == LogFormat::kAuto) {
        return absl::InvalidArgumentError(fmt::format(
            "{}: cannot tell the log format from its first line (give --format): {}", path_,
            quote(line_)));
      }
      if (format == LogFormat::kCsv) {
        header = line_;
        ++stats_.lines;
      } else {
        pending_ = true;  // the first line is a request too
      }
    }
    format_ = format;
    auto parser = LineParser::make(format, options, header);
    if (!parser.ok()) return absl::InvalidArgumentError(fmt::format("{}: {}", path_, std::string(parser.status().message())));
    parser_ = *std::move(parser);
    return absl::OkStatus();
  }

  std::optional<LogRecord> next() override {
    while (pending_ || next_line()) {
      pending_ = false;
      if (too_long_) {
        ++stats_.lines;
        reject(fmt::format("longer than {} bytes", kMaxLineBytes));
        if (options_.strict) {
          status_ = absl::InvalidArgumentError(
              fmt::format("{}: line {}: longer than {} bytes", path_, line_number_, kMaxLineBytes));
          eof_ = true;
          begin_ = end_;
          return std::nullopt;
        }
        continue;
      }
      const std::string_view line = text::trim(line_);
      if (line.empty()) continue;
      ++stats_.lines;
      auto r = parser_->parse(line);
      if (!r.ok()) {
        reject(std::string(r.status().message()));
        if (options_.strict) {
          status_ = absl::InvalidArgumentError(fmt::format("{}: line {}: {}: {}", path_, line_number_,
                                                           std::string(r.status().message()), quote(line)));
          eof_ = true;
          begin_ = end_;
          return std::nullopt;
        }
        continue;
      }
      if (r->time < latest_) {
        ++stats_.reordered;
        r->time = latest_;
      }
      latest_ = r->time;
      ++stats_.records;
      if (r->key_missing) ++stats_.key_missing;
      if (stats_.records == 1) stats_.fields = parser_->fields();
      return *std::move(r);
    }
    return std::nullopt;
  }

  const LogStats& stats() const noexcept override { return stats_; }
  LogFormat format() const noexcept override { return format_; }
  absl::Status status() const override { return status_; }

 private:
  static std::string quote(std::string_view line) {
    if (line.size() <= kQuotedLineBytes) return std::string(line);
    return fmt::format("{}…", line.substr(0, kQuotedLineBytes));
  }

  void reject(std::string_view why) {
    ++stats_.bad;
    if (stats_.examples.size() < options_.quoted_errors) {
      stats_.examples.push_back(fmt::format("line {}: {}: {}", line_number_, why,
                                            too_long_ ? quote(line_.substr(0, kQuotedLineBytes)) : quote(text::trim(line_))));
    }
  }

  bool fill() {
    if (eof_) return false;
    const int n = gzread(file_, buffer_.data(), static_cast<unsigned>(buffer_.size()));
    if (n < 0) {
      int code = 0;
      status_ = absl::DataLossError(fmt::format("{}: {}", path_, gzerror(file_, &code)));
      eof_ = true;
      return false;
    }
    if (n == 0) {
      eof_ = true;
      return false;
    }
    begin_ = 0;
    end_ = static_cast<std::size_t>(n);
    return true;
  }

  // The next line into line_ (without its newline); a line past the bound is cut, too_long_ set.
  bool next_line() {
    line_.clear();
    too_long_ = false;
    bool any = false;
    for (;;) {
      if (begin_ == end_ && !fill()) {
        if (any) ++line_number_;
        return any;
      }
      any = true;
      const char* start = buffer_.data() + begin_;
      const void* nl = std::memchr(start, '\n', end_ - begin_);
      const std::size_t n = nl ? static_cast<const char*>(nl) - start : end_ - begin_;
      if (line_.size() + n > kMaxLineBytes) {
        too_long_ = true;
        line_.append(start, std::min(n, kMaxLineBytes - std::min(kMaxLineBytes, line_.size())));
      } else {
        line_.append(start, n);
      }
      begin_ += n;
      if (nl) {
        ++begin_;
        ++line_number_;
        return true;
      }
    }
  }

  gzFile file_;
  std::string path_;
  LogReaderOptions options_;
  std::unique_ptr<LineParser> parser_;
  LogFormat format_ = LogFormat::kAuto;
  std::vector<char> buffer_;
  std::size_t begin_ = 0, end_ = 0;
  bool eof_ = false, pending_ = false, too_long_ = false;
  std::string line_;
  std::int64_t line_number_ = 0;
  Micros latest_ = 0;
  LogStats stats_;
  absl::Status status_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<LogReader>> LogReader::open(const std::string& path,
                                                           const LogReaderOptions& options) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) {
    return absl::NotFoundError(fmt::format("cannot open \"{}\": {}", path, std::strerror(errno)));
  }
  gzbuffer(f, static_cast<unsigned>(kBufferBytes));
  auto reader = std::make_unique<FileLogReader>(f, path);
  if (absl::Status s = reader->start(options); !s.ok()) return s;
  return std::unique_ptr<LogReader>(std::move(reader));
}

}  // namespace floodgate
