#pragma once
// Subcommands of the `qmoe` tool register themselves at start-up:
//   static const bool registered = qmoe::cli::register_command(&add_demo);
// where add_demo(CLI::App& root) adds a subcommand with its options and callback.
//
// Exit codes: 0 ok; 1 the checkpoint or input has a problem (kProblem: a layer fails, a NaN/Inf
// value, no backend can run a layer); 2 a usage error (a bad flag or value); 3 a bug in qmoe.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <string>

#include "qmoe/error.hpp"

namespace qmoe::cli {

using AddCommand = void (*)(CLI::App& root);
bool register_command(AddCommand add);

inline constexpr int kProblem = 1;
inline constexpr int kUsage = 2;

// Thrown by a command that has printed its report and found a problem in it: exit 1 with `what`
// (a one-line summary) on stderr.
struct ProblemFound {
  std::string what;
};

// A wrong flag value: reported with exit code 2, like CLI11's own parse errors.
template <class... Args>
[[noreturn]] void usage_error(fmt::format_string<Args...> format, Args&&... args) {
  throw CLI::ValidationError(fmt::format(format, std::forward<Args>(args)...));
}

// Runs `parse` on a flag's value; a qmoe::Error it throws becomes a usage error.
template <class F>
auto parse_flag(F&& parse) -> decltype(parse()) {
  try {
    return parse();
  } catch (const Error& e) {
    usage_error("{}", e.what());
  }
}

}  // namespace qmoe::cli
