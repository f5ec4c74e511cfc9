// The `rlqs` section of the configuration file.
#include "server/rlqs/settings.hpp"

#include <filesystem>

#include "server/config/yaml_errors.hpp"

namespace floodgate::server::rlqs {

absl::StatusOr<std::string> rules_dir_of(const std::string& path) {
  if (path.empty()) return std::string();
  auto text = yaml::read_config_file(path);
  if (!text.ok()) return text.status();
  std::string dir;
  auto status = yaml::guarded(path, [&] {
    const YAML::Node root = yaml::load_document(*text, path);
    if (!root.IsMap() || !root["rlqs"]) return;
    const YAML::Node& node = root["rlqs"];
    if (!node.IsMap()) yaml::fail(path, node, "rlqs must be a map, e.g. rlqs: {config: rlqs.d}");
    yaml::check_keys(path, node, {"config"}, "rlqs");
    if (!node["config"]) return;
    std::filesystem::path d = yaml::scalar<std::string>(path, node["config"], "rlqs.config");
    if (d.empty()) yaml::fail(path, node["config"], "rlqs.config is empty");
    if (d.is_relative()) d = std::filesystem::path(path).parent_path() / d;
    dir = d.string();
  });
  if (!status.ok()) return status;
  return dir;
}

}  // namespace floodgate::server::rlqs
