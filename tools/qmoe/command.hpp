#pragma once
// Subcommands of the `qmoe` tool register themselves at start-up:
//   static const bool registered = qmoe::cli::register_command(&add_demo);
// where add_demo(CLI::App& root) adds a subcommand with its options and callback.
#include <CLI/CLI.hpp>

namespace qmoe::cli {

using AddCommand = void (*)(CLI::App& root);
bool register_command(AddCommand add);

}  // namespace qmoe::cli
