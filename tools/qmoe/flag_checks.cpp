#include "flag_checks.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <string>
#include <vector>

#include "qmoe/oracle.hpp"

namespace qmoe::cli {

namespace {

// A validator that accepts a value `accept` returns true for and otherwise says what is valid.
template <class Accept>
CLI::Validator valid_if(std::string valid, std::string short_name, Accept accept) {
  return CLI::Validator(
      [valid, accept](std::string& value) {
        return accept(value) ? std::string()
                             : fmt::format("{} is not valid (valid: {})", value, valid);
      },
      std::move(short_name));
}

bool integer_in(const std::string& text, int64_t min, int64_t max) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [at, ec] = std::from_chars(text.data(), end, v);
  return ec == std::errc{} && at == end && v >= min && v <= max;
}

}  // namespace

CLI::Validator at_least(int64_t min) {
  return valid_if(fmt::format("an integer >= {}", min), fmt::format(">={}", min),
                  [min](const std::string& v) { return integer_in(v, min, INT64_MAX); });
}

CLI::Validator between(int64_t min, int64_t max) {
  return valid_if(fmt::format("{}..{}", min, max), fmt::format("{}..{}", min, max),
                  [min, max](const std::string& v) { return integer_in(v, min, max); });
}

CLI::Validator positive_number() {
  return valid_if("a number > 0", ">0", [](const std::string& v) {
    double d = 0;
    const char* end = v.data() + v.size();
    const auto [at, ec] = std::from_chars(v.data(), end, d);
    return ec == std::errc{} && at == end && d > 0;
  });
}

CLI::Validator backend_name() {
  return CLI::Validator(
      [](std::string& value) {
        std::vector<std::string> valid = known_backends();
        if (value == "auto" || std::find(valid.begin(), valid.end(), value) != valid.end())
          return std::string();
        valid.insert(valid.begin(), "auto");
        return fmt::format("'{}' is not a backend (valid: {})", value, fmt::join(valid, ", "));
      },
      "");
}

}  // namespace qmoe::cli
