#include "format/module_pattern.hpp"

#include <cctype>
#include <regex>

#include "core/check.hpp"

namespace qmoe::format {

namespace {

// The length of the quantifier at pattern[i] (*, +, ?, {m}, {m,}, {m,n}), 0 when there is none.
size_t quantifier_at(const std::string& pattern, size_t i) {
  const char c = pattern[i];
  if (c == '*' || c == '+' || c == '?') return 1;
  if (c != '{') return 0;
  size_t j = i + 1, digits = 0;
  while (j < pattern.size() &&
         (std::isdigit(static_cast<unsigned char>(pattern[j])) || pattern[j] == ',')) {
    digits += pattern[j] != ',';
    ++j;
  }
  return j < pattern.size() && pattern[j] == '}' && digits > 0 ? j - i + 1 : 0;
}

// Python's re refuses a quantifier on a quantifier ("multiple repeat"); std::regex accepts "a**" as
// (a*)*, whose backtracking is exponential in the module name's length, so an untrusted
// config.json could hang the loader with one pattern. A lazy '?' right after a quantifier is fine.
void refuse_multiple_repeat(const std::string& pattern) {
  bool after_quantifier = false, lazy_taken = false, in_class = false;
  for (size_t i = 0; i < pattern.size();) {
    const char c = pattern[i];
    if (c == '\\' || in_class || c == '[') {
      if (c == '\\') {
        i += 2;
      } else if (in_class) {
        in_class = c != ']';
        ++i;
      } else {  // '[' opens a class; quantifier characters in it are literal
        in_class = true;
        ++i;
      }
      after_quantifier = false;
      continue;
    }
    const size_t q = quantifier_at(pattern, i);
    if (q == 0) {
      after_quantifier = false;
      ++i;
      continue;
    }
    if (after_quantifier && (c != '?' || lazy_taken))
      fail(
          "module pattern '{}' repeats a repeat at offset {} (Python's re refuses it as "
          "'multiple repeat')",
          pattern, i);
    lazy_taken = after_quantifier;  // the '?' that makes the quantifier before it lazy
    after_quantifier = true;
    i += q;
  }
}

}  // namespace

bool python_re_match(const std::string& pattern, const std::string& text) {
  refuse_multiple_repeat(pattern);
  try {
    return std::regex_search(text, std::regex(pattern), std::regex_constants::match_continuous);
  } catch (const std::regex_error& e) {
    fail("module pattern '{}' is not a regular expression qmoe can read: {}", pattern, e.what());
  }
}

}  // namespace qmoe::format
