#include "format/module_pattern.hpp"

#include "core/check.hpp"

#ifdef QMOE_WITH_RE2
#include <re2/re2.h>

#include <cctype>
#include <optional>
#else
#include <regex>
#endif

namespace qmoe::format {

#ifdef QMOE_WITH_RE2

namespace {

// The digits from p[i] on without leading zeros ("007" -> "7", "00" -> "0"); i moves past them.
std::string number_at(const std::string& p, size_t& i) {
  const size_t start = i;
  while (i < p.size() && std::isdigit(static_cast<unsigned char>(p[i]))) ++i;
  const size_t first = p.find_first_not_of('0', start);
  if (first >= i) return i > start ? "0" : "";
  return p.substr(first, i - first);
}

// The counted repeat Python reads at p[i] == '{' ("{m}", "{m,}", "{,n}", "{m,n}", "{,}"), spelled
// as RE2 reads it the same way: RE2 takes an omitted minimum or a count with leading zeros for
// literal text. nullopt where Python reads the '{' as a literal (RE2 then does too); `end` is set
// past the '}'.
std::optional<std::string> counted_repeat(const std::string& p, size_t i, size_t& end) {
  size_t j = i + 1;
  const std::string min = number_at(p, j);
  const bool comma = j < p.size() && p[j] == ',';
  const std::string max = comma ? number_at(p, ++j) : "";
  if (j >= p.size() || p[j] != '}' || (min.empty() && !comma)) return std::nullopt;
  end = j + 1;
  return "{" + (min.empty() ? "0" : min) + (comma ? "," + max : "") + "}";
}

// `p` (Python syntax) in the RE2 syntax that means the same: counted repeats as above, and each
// '[' inside a character class escaped, which Python reads as a member and RE2 as the start of a
// POSIX class ("[[:alpha:]]"). The rest RE2 reads as Python does, or refuses.
std::string to_re2_syntax(const std::string& p) {
  std::string out;
  size_t class_start = std::string::npos;  // where the open class's members begin
  for (size_t i = 0; i < p.size();) {
    const char c = p[i];
    size_t end = 0;
    if (c == '\\') {
      out.append(p, i, 2);
      i += 2;
    } else if (class_start != std::string::npos) {
      if (c == ']' && i != class_start) class_start = std::string::npos;  // "[]a]" holds ']'
      out += c == '[' ? "\\[" : std::string(1, c);
      ++i;
    } else if (c == '[') {
      out += c;
      if (++i < p.size() && p[i] == '^') out += p[i++];
      class_start = i;
    } else if (const auto repeat = c == '{' ? counted_repeat(p, i, end) : std::nullopt) {
      out += *repeat;
      i = end;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

}  // namespace

bool python_re_match(const std::string& pattern, const std::string& text) {
  RE2::Options options;
  options.set_log_errors(false);
  const RE2 re(to_re2_syntax(pattern), options);
  check(re.ok(),
        "module pattern '{}' is not a regular expression qmoe can read: {} (valid: Python re "
        "syntax without backreferences, lookarounds, possessive repeats, atomic groups or counts "
        "above 1000, as RE2 reads it)",
        pattern, re.error());
  return re.Match(text, 0, text.size(), RE2::ANCHOR_START, nullptr, 0);
}

bool module_regexes_supported() { return true; }

#else

namespace {

// Without RE2, std::regex (a backtracking engine) matches, but only patterns it runs in time
// bounded by name length x pattern length: no group, no alternation and at most one repeat, the
// form real checkpoints use (".*mlp.gate$"). Nested or repeated repeats ("(.*)*X", ".*a.*b.*c")
// are what make backtracking exponential or polynomial of high degree.
void refuse_unbounded_backtracking(const std::string& pattern) {
  int repeats = 0;
  bool in_class = false, grouped = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\') {
      ++i;
    } else if (in_class) {
      in_class = c != ']';
    } else if (c == '[') {
      in_class = true;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') ++i;
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') ++i;  // "[]a]" holds ']'
    } else if (c == '(' || c == ')' || c == '|') {
      grouped = true;
    } else if (c == '*' || c == '+' || c == '?' || c == '{') {
      ++repeats;
    }
  }
  check(
      !grouped && repeats <= 1,
      "module pattern '{}' needs RE2, which this qmoe was built without: without it only patterns "
      "with no group, no '|' and at most one repeat are matched, as a backtracking engine can hang "
      "on the others; rebuild with RE2 (Debian: libre2-dev; CMake -DQMOE_RE2=ON)",
      pattern);
}

}  // namespace

bool python_re_match(const std::string& pattern, const std::string& text) {
  refuse_unbounded_backtracking(pattern);
  try {
    return std::regex_search(text, std::regex(pattern), std::regex_constants::match_continuous);
  } catch (const std::regex_error& e) {
    fail("module pattern '{}' is not a regular expression qmoe can read: {}", pattern, e.what());
  }
}

bool module_regexes_supported() { return false; }

#endif

bool glob_match(const std::string& pattern, const std::string& name) {
  check(pattern.find('[') == std::string::npos,
        "module pattern '{}': character classes ('[...]') are not supported (valid: names with '*' "
        "and '?')",
        pattern);
  // Greedy with one backtrack point: the last '*' seen and where in `name` it stopped matching.
  size_t p = 0, n = 0, star = std::string::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p;
      ++n;
    } else if (star != std::string::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

}  // namespace qmoe::format
