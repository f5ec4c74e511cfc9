// The subcommands of the `floodgate` program.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace floodgate::cli {

/// Adds `replay` to the app; the returned callback runs it and returns the exit code.
std::function<int()> add_replay(CLI::App& app);

/// Adds `serve`; the returned callback runs the service until SIGTERM/SIGINT.
std::function<int()> add_serve(CLI::App& app);

/// Adds `pace`; the returned callback copies stdin to stdout at the limit's rate.
std::function<int()> add_pace(CLI::App& app);

/// Adds `simulate`; the returned callback runs traffic through several strategies, prints a
/// summary table and writes the lanes as SVG or HTML.
std::function<int()> add_simulate(CLI::App& app);

}  // namespace floodgate::cli
