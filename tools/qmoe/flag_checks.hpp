#pragma once
// CLI11 checks of flag values whose failures read "--tp: 0 is not valid (valid: an integer >= 1)"
// (CLI11 puts the flag in front), a usage error like every other bad flag value.
#include <CLI/CLI.hpp>

#include <cstdint>

namespace qmoe::cli {

CLI::Validator at_least(int64_t min);              // integers >= min
CLI::Validator between(int64_t min, int64_t max);  // integers in min..max
CLI::Validator positive_number();                  // any number > 0
CLI::Validator backend_name();                     // auto or a backend the oracle knows

}  // namespace qmoe::cli
