#pragma once
// The checkpoint fixtures under tests/data: what each directory holds and the canonical experts it
// was written from. The data comes from a small fixed hash, not from the library's samplers, so a
// fixture stays reproducible when those change. make_fixtures.cpp writes the directories;
// tests/format/fixtures_test.cpp reads them back and compares with fixture_experts().
#include <cstdint>
#include <string>
#include <vector>

#include "qmoe/checkpoint.hpp"

namespace qmoe::fixtures {

struct FixtureSpec {
  std::string dir;  // under tests/data
  WriteOptions options;
  QuantScheme scheme;
  bool bias = false;
  int64_t E = 4, H = 64, I = 32;
  int layers = 2;
};

inline std::vector<FixtureSpec> fixture_specs() {
  auto scheme = [](int bits, int group, bool asym, bool act_order) {
    return QuantScheme{.bits = bits,
                       .zero_point = asym ? ZeroPoint::explicit_ : ZeroPoint::none,
                       .group_size = group,
                       .act_order = act_order};
  };
  return {
      {.dir = "gptq-int4-asym-desc_act-v1",
       .options = {.format = CheckpointFormat::gptq, .gptq_version = 1},
       .scheme = scheme(4, 16, true, true)},
      {.dir = "gptq-int8-g32-sym-v2-mixtral",
       .options = {.format = CheckpointFormat::gptq,
                   .naming = ExpertNaming::mixtral,
                   .gptq_version = 2,
                   .model_type = "mixtral"},
       .scheme = scheme(8, 32, false, false)},
      {.dir = "awq-int4-g32-bias",
       .options = {.format = CheckpointFormat::awq},
       .scheme = scheme(4, 32, true, false),
       .bias = true},
      {.dir = "ct-int4-asym-actorder",
       .options = {.format = CheckpointFormat::compressed_tensors},
       .scheme = scheme(4, 16, true, true)},
      {.dir = "ct-int8-channel-sym-sharded",
       .options = {.format = CheckpointFormat::compressed_tensors,
                   .scale_dtype = DType::bf16,
                   .max_shard_bytes = 16384},
       .scheme = scheme(8, kChannelwise, false, false)},
      {.dir = "gpt-oss-mxfp4-bias",
       .options = {.format = CheckpointFormat::mxfp4,
                   .naming = ExpertNaming::gpt_oss,
                   .scale_dtype = DType::bf16,
                   .model_type = "gpt_oss"},
       .scheme = {.kind = WeightKind::mxfp4, .bits = 4, .group_size = 32},
       .bias = true},
  };
}

MoEConfig fixture_config(const FixtureSpec& spec);
QuantizedExperts fixture_experts(const FixtureSpec& spec, int layer);

}  // namespace qmoe::fixtures
