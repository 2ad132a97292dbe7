#include "open_flags.hpp"

namespace qmoe::cli {

void add_open_flags(CLI::App& cmd, OpenFlags& flags) {
  cmd.add_flag("--moe-wna16", flags.moe_wna16,
               "Read a GPTQ/AWQ checkpoint the way vLLM's moe_wna16 method does");
  cmd.add_flag("--strict-zeros", flags.strict_zeros,
               "Refuse GPTQ layers whose zero points AutoGPTQ's packer overwrote (a zero point of "
               "0); without it they read as 0 and inspect reports them");
}

}  // namespace qmoe::cli
