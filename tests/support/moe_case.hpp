#pragma once
// Tests use the library's random MoE cases (src/sample/random_moe.hpp) under qmoe::test.
#include "sample/random_moe.hpp"

namespace qmoe::test {

using sample::CaseSpec;
using sample::fill_normal;
using sample::make_case;
using sample::MoECase;
using sample::random_weight;
using sample::relative_error;

}  // namespace qmoe::test
