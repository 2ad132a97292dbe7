#pragma once
// Tests use the library's random MoE cases (src/sample/random_moe.hpp) under qmoe::test.
#include <ostream>

#include "sample/random_moe.hpp"

namespace qmoe::test {

using sample::CaseSpec;
using sample::fill_normal;
using sample::make_case;
using sample::MoECase;
using sample::random_weight;
using sample::relative_error;

// An integer scheme in one call: scheme(4, 128), scheme(8, kChannelwise, true), ...
inline QuantScheme scheme(int bits, int group, bool zero_points = false, bool act_order = false) {
  return QuantScheme{.bits = bits,
                     .zero_point = zero_points ? ZeroPoint::explicit_ : ZeroPoint::none,
                     .group_size = group,
                     .act_order = act_order};
}

// One named case of a parameterized backend test; the name is what gtest prints.
struct Scenario {
  const char* name;
  CaseSpec spec;
};
inline void PrintTo(const Scenario& s, std::ostream* os) { *os << s.name; }

}  // namespace qmoe::test
