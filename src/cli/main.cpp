// floodgate — rate limiting as a library, a CLI and a service.
#include <iostream>

#include "cli/commands.hpp"
#include "cli/version.hpp"  // generated (cmake/version.hpp.in)

int main(int argc, char** argv) {
  CLI::App app{"floodgate: rate limiting for C++ services, and as a service"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "floodgate " FLOODGATE_VERSION " (" FLOODGATE_COMMIT ")");
  auto run_replay = floodgate::cli::add_replay(app);
  auto run_serve = floodgate::cli::add_serve(app);
  auto run_pace = floodgate::cli::add_pace(app);
  auto run_simulate = floodgate::cli::add_simulate(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (app.got_subcommand("replay")) return run_replay();
  if (app.got_subcommand("serve")) return run_serve();
  if (app.got_subcommand("pace")) return run_pace();
  if (app.got_subcommand("simulate")) return run_simulate();
  return 2;
}
