// The README's "Try it" walk-through runs as written: every `build/qmoe ...` line of its first
// code block after the heading, run twice in a row (the second time over the first one's files),
// exits 0.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "support/run_cli.hpp"

namespace qmoe::test {
namespace {

std::vector<std::string> walkthrough_commands() {
  std::ifstream in(QMOE_README);
  std::stringstream text;
  text << in.rdbuf();
  const std::string readme = text.str();
  const size_t heading = readme.find("## Try it");
  const size_t begin = readme.find("```sh\n", heading);
  const size_t end = readme.find("```\n", begin + 6);
  if (heading == std::string::npos || begin == std::string::npos || end == std::string::npos)
    return {};
  std::vector<std::string> commands;
  std::istringstream block(readme.substr(begin + 6, end - begin - 6));
  for (std::string line; std::getline(block, line);) {
    const std::string prefix = "build/qmoe ";
    if (line.rfind(prefix, 0) != 0) continue;
    line = line.substr(prefix.size(), line.find('#') - prefix.size());
    commands.push_back(line);
  }
  return commands;
}

TEST(Readme, WalkthroughRunsAsWritten) {
  const std::vector<std::string> commands = walkthrough_commands();
  ASSERT_EQ(commands.size(), 5u) << "the README's walk-through moved or changed shape";
  for (int pass = 0; pass < 2; ++pass) {
    for (const std::string& args : commands) {
      SCOPED_TRACE(args);
      const CliRun r = run_cli(args, 600);
      EXPECT_EQ(r.status, 0) << r.out;
    }
  }
}

}  // namespace
}  // namespace qmoe::test
