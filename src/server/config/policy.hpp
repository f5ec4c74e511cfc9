// The `policies:` entries of the service's configuration (config/config.cpp reads the rest).
#pragma once

#include <string>

#include <yaml-cpp/yaml.h>

#include "server/config/config.hpp"

namespace floodgate::server {

/// One entry of `policies:`. Throws yaml::Error naming file:line:column and the field.
ServicePolicy parse_policy(const std::string& source, const YAML::Node& node);

}  // namespace floodgate::server
