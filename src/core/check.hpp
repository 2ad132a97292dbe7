#pragma once
// Throwing qmoe::Error with a formatted message. Messages say what was wrong, where, and what
// would have been valid.
#include <fmt/format.h>

#include "qmoe/error.hpp"

namespace qmoe {

template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

template <class... Args>
void check(bool condition, fmt::format_string<Args...> format, Args&&... args) {
  if (!condition) fail(format, std::forward<Args>(args)...);
}

}  // namespace qmoe
