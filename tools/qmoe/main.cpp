#include <fmt/format.h>

#include <cstdio>
#include <vector>

#include "command.hpp"
#include "qmoe/error.hpp"

namespace qmoe::cli {

namespace {
std::vector<AddCommand>& registry() {
  static std::vector<AddCommand> commands;
  return commands;
}
}  // namespace

bool register_command(AddCommand add) {
  registry().push_back(add);
  return true;
}

}  // namespace qmoe::cli

int main(int argc, char** argv) {
  CLI::App app{"qmoe: weight-only quantized Mixture-of-Experts layers"};
  app.require_subcommand(1);
  for (auto add : qmoe::cli::registry()) add(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const qmoe::Error& e) {
    fmt::print(stderr, "qmoe: error: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "qmoe: internal error: {}\n", e.what());
    return 2;
  }
  return 0;
}
