#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <new>
#include <string>
#include <vector>

#include "command.hpp"
#include "qmoe/error.hpp"

namespace qmoe::cli {

namespace {
std::vector<AddCommand>& registry() {
  static std::vector<AddCommand> commands;
  return commands;
}

int report(const char* what, int code) {
  std::fflush(stdout);
  fmt::print(stderr, "qmoe: error: {}\n", what);
  return code;
}
}  // namespace

bool register_command(AddCommand add) {
  registry().push_back(add);
  return true;
}

}  // namespace qmoe::cli

int main(int argc, char** argv) {
  using namespace qmoe::cli;
  CLI::App app{"qmoe: weight-only quantized Mixture-of-Experts layers"};
  app.set_version_flag("--version", "qmoe " QMOE_VERSION);
  app.require_subcommand(1);
  for (auto add : registry()) add(app);
  try {
    if (argc > 1 && argv[1][0] != '-') {
      std::string known;
      bool found = false;
      for (const CLI::App* sub : app.get_subcommands({})) {
        known += (known.empty() ? "" : ", ") + sub->get_name();
        found = found || sub->get_name() == argv[1];
      }
      if (!found)
        throw CLI::ValidationError(
            fmt::format("unknown command '{}' (commands: {})", argv[1], known));
    }
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version
  } catch (const CLI::ParseError& e) {
    report(e.what(), kUsage);
    fmt::print(stderr, "Run with --help for the accepted options.\n");
    return kUsage;
  } catch (const ProblemFound& e) {
    return report(e.what.c_str(), kProblem);
  } catch (const qmoe::Error& e) {
    return report(e.what(), kProblem);
  } catch (const std::filesystem::filesystem_error& e) {
    return report(e.what(), kProblem);  // names the path(s)
  } catch (const std::bad_alloc&) {
    return report("out of memory", kProblem);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "qmoe: internal error (please report it): {}\n", e.what());
    return 3;
  }
  return 0;
}
