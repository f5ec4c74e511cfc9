// The subcommands of the `floodgate` program.
#pragma once

#include <CLI/CLI.hpp>

namespace floodgate::cli {

/// Adds `replay` to the app; the returned callback runs it and returns the exit code.
std::function<int()> add_replay(CLI::App& app);

}  // namespace floodgate::cli
