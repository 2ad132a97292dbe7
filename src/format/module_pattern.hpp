#pragma once
// The module patterns of quantization configs (GPTQ dynamic keys, compressed-tensors "re:"
// targets and ignore entries) are Python regular expressions applied with re.match. They come from
// untrusted config.json files, so they are matched with RE2, in time linear in the module name; a
// qmoe built without RE2 matches only the patterns a backtracking engine runs in bounded time (no
// group, no alternation, at most one repeat: ".*mlp.gate$") and refuses the others.
#include <string>

namespace qmoe::format {

// Python re.match semantics: the pattern must match at the start of `text`, not necessarily to its
// end. Throws Error on a pattern RE2 cannot read (Python syntax RE2 lacks: backreferences,
// lookarounds, possessive repeats, counts above 1000), and, in a build without RE2, on every
// pattern with a group, an alternation or more than one repeat.
bool python_re_match(const std::string& pattern, const std::string& text);

// Whether this build matches every pattern RE2 reads (it was built with RE2).
bool module_regexes_supported();

// Python fnmatch.fnmatchcase semantics (Quark's exclude and layer_quant_config keys): '*' matches
// any run of characters, '?' one character, the rest literally, over the whole name. Throws Error
// on a character class ('[...]'), which qmoe does not read. Time O(pattern x name) at worst.
bool glob_match(const std::string& pattern, const std::string& name);

}  // namespace qmoe::format
