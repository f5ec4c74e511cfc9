// floodgate — rate limiting as a library, a CLI and a service.
#include <iostream>
#include <string_view>
#include <vector>

#include "cli/commands.hpp"
#include "cli/version.hpp"  // generated (cmake/version.hpp.in)

namespace {

// envoyproxy/ratelimit's binary is /bin/ratelimit, and Envoy Gateway runs its rate-limit
// container with command ["/bin/ratelimit"] and the settings in the environment; the container
// image links that name to floodgate. Invoked so, floodgate is `floodgate serve --envoyproxy-env`,
// with any arguments given after it (but `ratelimit --version` is floodgate's --version).
bool invoked_as_ratelimit(int argc, char** argv) {
  if (argc < 1 || argv[0] == nullptr) return false;
  if (argc > 1 && std::string_view(argv[1]) == "--version") return false;
  std::string_view name(argv[0]);
  if (auto slash = name.rfind('/'); slash != std::string_view::npos) name.remove_prefix(slash + 1);
  return name == "ratelimit";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"floodgate: rate limiting for C++ services, and as a service"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "floodgate " FLOODGATE_VERSION " (" FLOODGATE_COMMIT ")");
  auto run_replay = floodgate::cli::add_replay(app);
  auto run_serve = floodgate::cli::add_serve(app);
  auto run_pace = floodgate::cli::add_pace(app);
  auto run_simulate = floodgate::cli::add_simulate(app);
  std::vector<char*> args(argv, argv + argc);
  if (invoked_as_ratelimit(argc, argv)) {
    static char serve[] = "serve";
    static char envoyproxy_env[] = "--envoyproxy-env";
    args.insert(args.begin() + 1, {serve, envoyproxy_env});
  }
  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (app.got_subcommand("replay")) return run_replay();
  if (app.got_subcommand("serve")) return run_serve();
  if (app.got_subcommand("pace")) return run_pace();
  if (app.got_subcommand("simulate")) return run_simulate();
  return 2;
}
