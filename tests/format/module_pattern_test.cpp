// python_re_match: Python's re.match on module names with the patterns of untrusted configs, in
// time linear in the name (RE2), or, in a build without RE2, only where backtracking is bounded.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <utility>

#include "format/module_pattern.hpp"
#include "support/expect_error.hpp"

namespace qmoe::format {
namespace {

using test::expect_error;

// Patterns a backtracking engine (std::regex, Python's re) runs in time exponential in the length
// of a name they do not match: std::regex took 12 s for "(.*)*X" on 16 characters. `text` does not
// match; text + `completion` does.
struct Backtracking {
  std::string pattern, text, completion;
};
const Backtracking kBacktracking[] = {
    {"(.*)*X", "model.layers.47.block_sparse_moe.experts.127.gate_proj.weight_packed", "X"},
    {"(a*)*b", std::string(80, 'a'), "b"},
    {"(a|a)*c", std::string(80, 'a'), "c"},
    {"((a+)+)+b", std::string(80, 'a'), "b"},
};

// Fails the test when the scope it lives in takes 100 ms or more: one match or refusal takes RE2
// microseconds, where std::regex does not finish.
class TimeBound {
 public:
  explicit TimeBound(std::string what) : what_(std::move(what)) {}
  ~TimeBound() { EXPECT_LT(std::chrono::steady_clock::now() - start_, kBound) << what_; }

 private:
  static constexpr auto kBound = std::chrono::milliseconds(100);
  std::string what_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

bool timed_match(const std::string& pattern, const std::string& text) {
  const TimeBound bound(pattern + " on " + std::to_string(text.size()) + " characters");
  return python_re_match(pattern, text);
}

class PythonReMatch : public testing::Test {
 protected:
  void SetUp() override {
    if (!module_regexes_supported()) GTEST_SKIP() << "built without RE2 (WithoutRe2 tests that)";
  }
};

TEST_F(PythonReMatch, AnchorsAtTheStartOnly) {
  EXPECT_TRUE(python_re_match("model\\.layers", "model.layers.0.mlp"));
  EXPECT_FALSE(python_re_match("layers", "model.layers.0.mlp"));
  EXPECT_TRUE(python_re_match(".*gate", "model.layers.0.mlp.gate_proj"));
  EXPECT_FALSE(python_re_match(".*gate$", "model.layers.0.mlp.gate_proj"));
}

TEST_F(PythonReMatch, BacktrackingPatternsTakeLinearTime) {
  for (const auto& [pattern, text, completion] : kBacktracking) {
    EXPECT_FALSE(timed_match(pattern, text)) << pattern;
    EXPECT_TRUE(timed_match(pattern, text + completion)) << pattern;
  }
}

// Python refuses a quantifier on a quantifier as "multiple repeat", and so does RE2, in its words.
// The fuzzer's find: "re:.**SSSS..." in an ignore list ran std::regex for 20 minutes.
TEST_F(PythonReMatch, RefusesARepeatedRepeatAsPythonDoes) {
  const std::string hang = ".**" + std::string(100, 'S') + "|p.gate$";
  expect_error([&] { timed_match(hang, "model.layers.0.mlp.gate"); },
               "is not a regular expression qmoe can read: bad repetition operator: **");
  expect_error([] { python_re_match("a+{2}", "aa"); }, "bad repetition operator: +{2}");
  expect_error([] { python_re_match("a*??", "aa"); }, "bad repetition operator: *??");
  // what Python accepts: lazy quantifiers, escaped and bracketed quantifier characters, braces
  // that are not a quantifier
  EXPECT_TRUE(python_re_match(".*?gate", "model.layers.0.mlp.gate_proj"));
  EXPECT_TRUE(python_re_match("a+?b", "aab"));
  EXPECT_TRUE(python_re_match("a\\**", "a**"));
  EXPECT_TRUE(python_re_match("[*+]*x", "*+x"));
  EXPECT_TRUE(python_re_match("a{2}b", "aab"));
  EXPECT_TRUE(python_re_match("x{}", "x{}"));
  EXPECT_TRUE(python_re_match("x{1,2", "x{1,2"));
  EXPECT_TRUE(python_re_match("model\\.layers\\.\\d+", "model.layers.12.mlp"));
}

// Python syntax RE2 lacks is refused with the pattern and RE2's reason, never guessed at.
TEST_F(PythonReMatch, RefusesWhatRe2CannotRead) {
  expect_error([] { python_re_match("(", "x"); },
               "module pattern '(' is not a regular expression qmoe can read: missing ): (");
  expect_error([] { python_re_match("(a)\\1", "aa"); }, "invalid escape sequence: \\1");
  expect_error([] { python_re_match("a(?=b)", "ab"); }, "invalid perl operator: (?=");
  expect_error([] { python_re_match("(?<!a)b", "b"); }, "invalid perl operator: (?<");
  expect_error([] { python_re_match("a\\Z", "a"); }, "invalid escape sequence: \\Z");
  expect_error([] { python_re_match("a++", "a"); }, "bad repetition operator: ++");  // possessive
  expect_error([] { python_re_match("(?>a)", "a"); }, "invalid perl operator: (?>");
  expect_error([] { python_re_match("a{1001}", "a"); }, "invalid repetition size: {1001}");
}

// Spellings Python and RE2 both accept but read differently are rewritten to Python's meaning.
TEST_F(PythonReMatch, ReadsPythonsMeaningWhereRe2WouldReadAnother) {
  // RE2 reads "{,n}" and counts with leading zeros as literal text; Python's minimum is then 0.
  EXPECT_TRUE(python_re_match("a{,3}b", "aab"));
  EXPECT_FALSE(python_re_match("a{,3}b", "aaaab"));
  EXPECT_TRUE(python_re_match("a{,}b", "aaaab"));
  EXPECT_TRUE(python_re_match("a{02}b", "aab"));
  EXPECT_TRUE(python_re_match("a\\{,3}", "a{,3}")) << "an escaped brace stays literal";
  EXPECT_TRUE(python_re_match("[{,3}]", ",")) << "braces in a class are members";
  EXPECT_FALSE(python_re_match("[{,3}]", "0"));
  // RE2 reads "[[:alpha:]]" as a POSIX class; Python as the set "[:alph" followed by ']'.
  EXPECT_TRUE(python_re_match("[[:alpha:]]+", "a]"));
  EXPECT_FALSE(python_re_match("[[:alpha:]]+", "b]"));
  EXPECT_TRUE(python_re_match("[]x]", "]")) << "a ']' first in a class is a member";
  EXPECT_TRUE(python_re_match("[^]x][[]", "a["));
}

// Where RE2 keeps its own reading: module names are ASCII without line breaks, where both agree.
TEST_F(PythonReMatch, Re2ReadsUnicodeClassesAndDollarItsOwnWay) {
  EXPECT_FALSE(python_re_match("a$", "a\n")) << "Python's $ also matches before a final newline";
  EXPECT_FALSE(python_re_match("\\d", "\u0663")) << "Python's \\d also matches non-ASCII digits";
}

// Without RE2 std::regex matches, but only patterns with no group, no '|' and one repeat at most.
TEST(WithoutRe2, MatchesOnlyPatternsOfBoundedBacktracking) {
  if (module_regexes_supported()) GTEST_SKIP() << "built with RE2 (PythonReMatch tests that)";
  for (const auto& [pattern, text, completion] : kBacktracking) {
    expect_error([&] { timed_match(pattern, text); },
                 "module pattern '" + pattern + "' needs RE2, which this qmoe was built without");
  }
  expect_error([] { python_re_match(".*a.*b", "ab"); }, "at most one repeat are matched");
  expect_error([] { python_re_match("gate|up", "up"); },
               "rebuild with RE2 (Debian: libre2-dev; CMake -DQMOE_RE2=ON)");
  // the forms real checkpoints use
  EXPECT_TRUE(timed_match(".*mlp.gate$", "model.layers.0.mlp.gate"));
  EXPECT_FALSE(timed_match(".*mlp.gate$", "model.layers.0.mlp.gate_proj"));
  EXPECT_TRUE(timed_match("model\\.layers\\.1\\.", "model.layers.1.mlp"));
  EXPECT_TRUE(timed_match("[*+(|]x", "(x")) << "quantifier and group characters in a class";
  EXPECT_TRUE(timed_match("a\\*+", "a**"));
}

// Quark's exclude and layer_quant_config keys.
TEST(GlobMatch, IsPythonFnmatchcase) {
  EXPECT_TRUE(glob_match("*.mlp.gate", "model.layers.0.mlp.gate"));
  EXPECT_FALSE(glob_match("*.mlp.gate", "model.layers.0.mlp.gate_proj"));
  EXPECT_TRUE(glob_match("model.layers.?.mlp*", "model.layers.3.mlp.experts.1.up_proj"));
  EXPECT_FALSE(glob_match("model.layers.?.mlp*", "model.layers.13.mlp"));
  EXPECT_TRUE(glob_match("lm_head", "lm_head"));
  EXPECT_FALSE(glob_match("lm_head", "lm_head2"));
  EXPECT_TRUE(glob_match("*a*b*c", "xaxxbxxc"));
  EXPECT_FALSE(glob_match("*a*b*c", "xaxxbxxcd"));
  expect_error([] { glob_match("model.layers.[01].*", "model.layers.0.x"); },
               "character classes ('[...]') are not supported");
}

}  // namespace
}  // namespace qmoe::format
