// Upstream #15 (the vLLM WNA16 MoE spec, section 8): the CUDA decode fast path was lost in a
// refactor and no test failed. Here the decode path is a dispatch fact that a test pins: on an
// sm_90 device the oracle gives decode-shaped layers of real models to cuda-mma (never to
// emulation or the CPU), and at decode batch sizes cuda-mma takes its smallest tile (8 rows), so a
// change that sends decode to prefill-sized tiles fails here. Host only, no GPU needed; the
// numbers of that path are checked on the GPU by cuda_mma_matches_reference_test (M = 1 cases).
#include <gtest/gtest.h>

#include "backend/cuda_mma/expert_gemm.hpp"
#include "qmoe/oracle.hpp"
#include "support/moe_case.hpp"

namespace qmoe {
namespace {

struct Model {
  const char* name;
  int64_t E, H, I;
  int top_k;
};

constexpr Model kModels[] = {{"mixtral", 8, 4096, 14336, 2},
                             {"qwen3_30b_a3b", 128, 2048, 768, 8},
                             {"deepseek_v3", 256, 7168, 2048, 8},
                             {"gpt_oss_120b", 128, 2880, 2880, 4}};

TEST(UpstreamRegression, DecodeTakesTheSmallestCudaMmaTile) {  // #15
  for (const Model& m : kModels) {
    for (int64_t tokens = 1; tokens <= 2; ++tokens) {
      EXPECT_EQ(cuda_mma::choose_tile_rows(tokens, m.top_k, m.E), 8)
          << m.name << " at M = " << tokens;
    }
  }
}

TEST(UpstreamRegression, DecodeLayersGoToCudaMma) {  // #15
  for (const char* device : {"h100", "h200"}) {      // sm_90: the CUDA build has its code
    for (const Model& m : kModels) {
      MoEConfig config;
      config.num_experts = m.E;
      config.hidden = m.H;
      config.intermediate = m.I;
      config.routing.top_k = m.top_k;
      config.activation_dtype = DType::bf16;
      for (const QuantScheme& s : {test::scheme(4, 128), test::scheme(4, 128, true),
                                   test::scheme(8, kChannelwise), test::scheme(4, 32)}) {
        if (m.H % s.group_size_for(m.H) != 0 || m.I % s.group_size_for(m.I) != 0)
          continue;  // no such checkpoint: e.g. gpt-oss (H 2880) is not split in groups of 128
        const Selection sel = select(describe(s, config), parse_device(device));
        EXPECT_EQ(sel.backend, "cuda-mma") << m.name << " " << to_string(s) << " on " << device;
      }
    }
  }
}

}  // namespace
}  // namespace qmoe
