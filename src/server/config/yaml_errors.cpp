// Typed reads of YAML nodes whose errors name the file, line, column and field.
#include "server/config/yaml_errors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <cerrno>
#include <cstring>
#include <set>
#include <sstream>

#include <yaml-cpp/eventhandler.h>

namespace floodgate::server::yaml {

std::string where(const std::string& source, const YAML::Mark& mark) {
  const int line = mark.line >= 0 ? mark.line + 1 : 0;
  const int column = mark.column >= 0 ? mark.column + 1 : 0;
  return fmt::format("{}:{}:{}", source, line, column);
}

void fail(const std::string& source, const YAML::Node& node, const std::string& what) {
  throw Error{fmt::format("{}: {}", where(source, node.Mark()), what)};
}

std::int64_t integer(const std::string& source, const YAML::Node& node, const std::string& what,
                     std::int64_t min, std::int64_t max, std::string_view unit) {
  const std::string range = fmt::format("{} must be a whole number from {} to {}{}{}{}", what, min, max,
                                        unit.empty() ? "" : " (", unit, unit.empty() ? "" : ")");
  if (!node.IsScalar()) fail(source, node, range);
  std::int64_t v = 0;
  try {
    v = node.as<std::int64_t>();
  } catch (const YAML::Exception&) {
    fail(source, node, fmt::format("{}, not \"{}\"", range, node.Scalar()));
  }
  if (v < min || v > max) fail(source, node, fmt::format("{}, not {}", range, v));
  return v;
}

void check_keys(const std::string& source, const YAML::Node& map,
                std::initializer_list<std::string_view> known, const std::string& where) {
  if (!map.IsMap()) fail(source, map, fmt::format("{} must be a map", where));
  for (const auto& kv : map) {
    const std::string key = kv.first.Scalar();
    bool ok = false;
    for (std::string_view k : known) ok = ok || k == key;
    if (!ok) {
      std::string list;
      for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      fail(source, kv.first, fmt::format("unknown key \"{}\" in {} (known: {})", key, where, list));
    }
  }
}

namespace {

constexpr int kMaxDepth = 64;

// Every map of the tree: its keys are single values, each once. A node reached twice (an alias) is
// checked once, so a tree of aliases cannot make the walk exponential.
void check_unique(const std::string& source, const YAML::Node& node, int depth, std::set<std::size_t>& seen) {
  if (!node.IsMap() && !node.IsSequence()) return;
  if (depth > kMaxDepth) fail(source, node, fmt::format("nested deeper than {} levels", kMaxDepth));
  if (!seen.insert(static_cast<std::size_t>(node.Mark().pos)).second) return;
  if (node.IsSequence()) {
    for (const auto& item : node) check_unique(source, item, depth + 1, seen);
    return;
  }
  std::set<std::string> keys;
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) fail(source, kv.first, "a key must be a single value");
    if (!keys.insert(kv.first.Scalar()).second) {
      fail(source, kv.first, fmt::format("duplicate key \"{}\" (each key may appear once in a map)",
                                         kv.first.Scalar()));
    }
    check_unique(source, kv.second, depth + 1, seen);
  }
}

// A first pass over the events, before any node is built: counts the documents and refuses
// aliases. An alias can make the node graph cyclic (`&a [*a]`), which yaml-cpp then never frees,
// and a tree of aliases can make a small file stand for a huge one; a configuration needs neither.
class Precheck : public YAML::EventHandler {
 public:
  explicit Precheck(const std::string& source) : source_(source) {}
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents_ > 1) {
      throw Error{fmt::format("{}: a second YAML document (after ---): a file holds one document", where(source_, mark))};
    }
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override {
    throw Error{fmt::format("{}: an alias (*name): anchors and aliases are not supported here", where(source_, mark))};
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

 private:
  const std::string& source_;
  int documents_ = 0;
};

}  // namespace

YAML::Node load_document(const std::string& text, const std::string& source) {
  std::vector<YAML::Node> docs;
  try {
    std::istringstream in(text);
    YAML::Parser parser(in);
    Precheck precheck(source);
    while (parser.HandleNextDocument(precheck)) {
    }
    docs = YAML::LoadAll(text);
  } catch (const YAML::Exception& e) {
    throw Error{fmt::format("{}: {}", where(source, e.mark), e.msg)};
  }
  if (docs.empty()) return YAML::Node();
  if (docs.size() > 1) {
    fail(source, docs[1], "a second YAML document (after ---): a file holds one document");
  }
  std::set<std::size_t> seen;
  check_unique(source, docs[0], 0, seen);
  return docs[0];
}

absl::StatusOr<std::vector<std::string>> yaml_files_in(const std::string& dir, std::string_view what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return absl::NotFoundError(fmt::format("{}: not a directory of {}", dir, what));
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const auto ext = entry.path().extension();
    if (entry.is_regular_file() && (ext == ".yaml" || ext == ".yml")) files.push_back(entry.path().string());
  }
  if (ec) return absl::UnavailableError(fmt::format("{}: {}", dir, ec.message()));
  std::sort(files.begin(), files.end());
  return files;
}

absl::StatusOr<std::string> read_config_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return absl::NotFoundError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  }
  struct stat st {};
  std::string text;
  absl::Status status;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    status = absl::InvalidArgumentError(fmt::format(
        "{}: not a regular file (a directory, a device or a pipe is not a configuration)", path));
  } else {
    char buf[16 * 1024];
    ssize_t n = 0;
    while (text.size() <= kMaxFileBytes && (n = ::read(fd, buf, sizeof buf)) > 0) {
      text.append(buf, static_cast<std::size_t>(n));
    }
    if (n < 0) status = absl::UnavailableError(fmt::format("{}: {}", path, std::strerror(errno)));
    if (text.size() > kMaxFileBytes) {
      status = absl::InvalidArgumentError(
          fmt::format("{}: larger than {} bytes: not a configuration file", path, kMaxFileBytes));
    }
  }
  ::close(fd);
  if (!status.ok()) return status;
  return text;
}

}  // namespace floodgate::server::yaml
