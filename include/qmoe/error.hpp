#pragma once
// qmoe::Error: every failure the library reports. The message names the tensor or parameter,
// the rule that was broken and the numbers involved, so a user can act on it.
#include <stdexcept>
#include <string>

namespace qmoe {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace qmoe
