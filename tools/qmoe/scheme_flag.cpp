#include "scheme_flag.hpp"

#include <charconv>

#include "command.hpp"

namespace qmoe::cli {

namespace {

[[noreturn]] void bad_scheme(const std::string& text, const std::string& why) {
  usage_error(
      "--scheme '{}': {} (expected mxfp4, mxfp4-w4a4, mxfp4-w4a4-even, or int4 / int8 followed "
      "by -gN or "
      "-channelwise, "
      "-asym, -act-order; e.g. int4-g128, int8-g32-asym)",
      text, why);
}

}  // namespace

QuantScheme parse_scheme_flag(const std::string& text) {
  if (text == "mxfp4" || text == "mxfp4-w4a4" || text == "mxfp4-w4a4-even") {
    QuantScheme s{.kind = WeightKind::mxfp4, .bits = 4, .group_size = 32};
    if (text == "mxfp4-w4a4") s.activation_quant = ActivationQuant::mxfp4;
    if (text == "mxfp4-w4a4-even") s.activation_quant = ActivationQuant::mxfp4_even;
    return s;
  }
  QuantScheme s{.bits = 4, .group_size = 128};
  std::string rest = text;
  if (const size_t at = rest.find("-act-order"); at != std::string::npos) {
    s.act_order = true;
    rest.erase(at, 10);
  }
  size_t start = 0;
  bool first = true;
  while (start <= rest.size()) {
    const size_t dash = rest.find('-', start);
    const std::string word =
        rest.substr(start, dash == std::string::npos ? std::string::npos : dash - start);
    start = dash == std::string::npos ? rest.size() + 1 : dash + 1;
    if (first) {
      if (word != "int4" && word != "int8") bad_scheme(text, "it must start with int4 or int8");
      s.bits = word == "int4" ? 4 : 8;
      first = false;
    } else if (word == "asym") {
      s.zero_point = ZeroPoint::explicit_;
    } else if (word == "sym") {
      s.zero_point = ZeroPoint::none;
    } else if (word == "channelwise") {
      s.group_size = kChannelwise;
    } else if (word.size() > 1 && word[0] == 'g') {
      int g = 0;
      const auto [end, ec] = std::from_chars(word.data() + 1, word.data() + word.size(), g);
      if (ec != std::errc{} || end != word.data() + word.size() || g < 1)
        bad_scheme(text, "'" + word + "' is not a group size");
      s.group_size = g;
    } else {
      bad_scheme(text, "'" + word + "' is not understood");
    }
  }
  return s;
}

}  // namespace qmoe::cli
