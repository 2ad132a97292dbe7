#pragma once
// Runs the built `qmoe` binary (QMOE_CLI, set by CMake) as a user would, through the shell.
#include <sys/wait.h>
#include <array>
#include <cstdio>
#include <string>

#include "qmoe/error.hpp"

namespace qmoe::test {

struct CliRun {
  int status = 0;   // the exit code (128 + signal when killed by one)
  std::string out;  // stdout and stderr
};

// A run longer than `timeout_s` is killed (exit code 124): a hang fails the test instead of
// stalling the suite.
inline CliRun run_cli(const std::string& args, int timeout_s = 300) {
  const std::string command =
      "timeout " + std::to_string(timeout_s) + " " + std::string(QMOE_CLI) + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) throw Error("cannot run " + command);
  CliRun r;
  std::array<char, 4096> chunk{};
  size_t n = 0;
  while ((n = fread(chunk.data(), 1, chunk.size(), pipe)) > 0) r.out.append(chunk.data(), n);
  const int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

}  // namespace qmoe::test
