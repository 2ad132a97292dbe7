#pragma once
// The flags that say how a command reads a checkpoint (--moe-wna16, --strict-zeros), one set for
// every command that opens one.
#include <CLI/CLI.hpp>

#include "qmoe/checkpoint.hpp"

namespace qmoe::cli {

struct OpenFlags {
  bool moe_wna16 = false;     // read GPTQ/AWQ as vLLM's moe_wna16 method does
  bool strict_zeros = false;  // refuse GPTQ v1 layers whose zero points AutoGPTQ overwrote

  OpenOptions options() const { return {.as_moe_wna16 = moe_wna16, .strict_zeros = strict_zeros}; }
};

void add_open_flags(CLI::App& cmd, OpenFlags& flags);

}  // namespace qmoe::cli
