#pragma once
// --scheme values: int4-g128, int8-g32-asym, int4-channelwise, int4-g128-act-order, mxfp4,
// mxfp4-w4a4 (MXFP4 weights and activations, OCP floor scales), mxfp4-w4a4-even (Quark's even
// scales), ...
#include <string>

#include "qmoe/quant.hpp"

namespace qmoe::cli {

// "int{4|8}" then any of "-gN" / "-channelwise", "-asym" / "-sym", "-act-order"; or "mxfp4" /
// "mxfp4-w4a4" / "mxfp4-w4a4-even".
// The group defaults to 128, symmetric. A malformed value is a usage error.
QuantScheme parse_scheme_flag(const std::string& text);

}  // namespace qmoe::cli
