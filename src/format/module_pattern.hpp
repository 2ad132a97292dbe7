#pragma once
// The module patterns of quantization configs (GPTQ dynamic keys, compressed-tensors "re:"
// targets and ignore entries) are Python regular expressions applied with re.match; this is the
// subset std::regex reads the same way.
#include <string>

namespace qmoe::format {

// Python re.match semantics: the pattern must match at the start of `text`, not necessarily to its
// end. Throws Error on a pattern std::regex cannot compile, and on one Python refuses as a
// "multiple repeat" (a quantifier on a quantifier, such as ".**", which std::regex would run with
// exponential backtracking).
bool python_re_match(const std::string& pattern, const std::string& text);

}  // namespace qmoe::format
