#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "command.hpp"
#include "qmoe/error.hpp"

namespace qmoe::cli {

namespace {
std::vector<AddCommand>& registry() {
  static std::vector<AddCommand> commands;
  return commands;
}

// Messages worded over several lines (the oracle's reasons, one per backend) as one line.
std::string one_line(std::string_view text) {
  std::string line;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    std::string_view part = text.substr(start, end - start);
    part.remove_prefix(std::min(part.find_first_not_of(' '), part.size()));
    if (!part.empty()) {
      if (!line.empty()) line += line.back() == ':' ? " " : "; ";
      line += part;
    }
    start = end + 1;
  }
  return line;
}

int report(std::string_view what, int code) {
  std::fflush(stdout);
  fmt::print(stderr, "qmoe: error: {}\n", one_line(what));
  return code;
}

// The command line's first word, checked before CLI11 parses (which would only say that a
// subcommand is required): a known command, --help or --version.
void check_first_word(CLI::App& app, int argc, char** argv) {
  std::string commands;
  bool known = false;
  const std::string first = argc > 1 ? argv[1] : "";
  for (const CLI::App* sub : app.get_subcommands({})) {
    commands += (commands.empty() ? "" : ", ") + sub->get_name();
    known = known || sub->get_name() == first;
  }
  if (first.empty()) usage_error("no command given (commands: {})", commands);
  if (first == "-h" || first == "--help" || first == "--version" || known) return;
  if (first[0] == '-')
    usage_error("unknown flag '{}' before the command (commands: {})", first, commands);
  usage_error("unknown command '{}' (commands: {})", first, commands);
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
    check_first_word(app, argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version
  } catch (const CLI::ValidationError& e) {
    return report(e.what(), kUsage);  // says what would be valid
  } catch (const CLI::ParseError& e) {
    const std::vector<CLI::App*> parsed = app.get_subcommands();
    const std::string help =
        parsed.empty() ? "qmoe --help" : "qmoe " + parsed[0]->get_name() + " --help";
    return report(fmt::format("{}; see {}", e.what(), help), kUsage);
  } catch (const ProblemFound& e) {
    return report(e.what, kProblem);
  } catch (const qmoe::Error& e) {
    return report(e.what(), kProblem);
  } catch (const std::filesystem::filesystem_error& e) {
    return report(e.what(), kProblem);  // names the path(s)
  } catch (const std::bad_alloc&) {
    return report("out of memory", kProblem);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "qmoe: internal error (please report it): {}\n", one_line(e.what()));
    return 3;
  }
  return 0;
}
