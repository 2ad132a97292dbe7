#pragma once
// Act-order (g_idx) as the backends that sort K by group run it: each expert's input channels in
// group order, every group exactly group-size channels long (as GPTQ's desc_act produces), so
// sorted position j lies in group j / group_size and the scale tables stay as they are.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "qmoe/quant.hpp"

namespace qmoe {

// Channel order of expert e of an act-order weight: groups ascending, channels ascending inside
// a group (order[j] = the input channel at sorted position j). Throws Error naming `what` and
// `backend` when some group holds other than group-size channels.
std::vector<int32_t> even_act_order(const QuantizedWeight& w, int64_t e, std::string_view backend,
                                    const std::string& what);

}  // namespace qmoe
