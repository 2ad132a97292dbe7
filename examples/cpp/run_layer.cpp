// Runs the first MoE layer of a checkpoint on the backend the oracle picks for this CPU.
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "qmoe/qmoe.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CHECKPOINT_DIR\n", argv[0]);
    return 2;
  }
  try {
    const qmoe::Checkpoint ckpt = qmoe::Checkpoint::open(argv[1]);
    const int layer = ckpt.moe_layers().front();
    const qmoe::MoE moe(ckpt.layer_config(layer), ckpt.load_layer(layer), "auto");
    const int64_t M = 4, H = moe.config().hidden, E = moe.config().num_experts;
    std::vector<float> x(M * H), logits(M * E), out(M * H);
    std::mt19937 rng(1);
    std::normal_distribution<float> normal;
    for (float& v : x) v = normal(rng);
    for (float& v : logits) v = normal(rng);
    moe.forward(qmoe::TensorView(x.data(), qmoe::DType::f32, {M, H}),
                qmoe::TensorView(logits.data(), qmoe::DType::f32, {M, E}),
                qmoe::TensorView(out.data(), qmoe::DType::f32, {M, H}));
    const std::string format(ckpt.format()), backend(moe.backend_name());
    std::printf("%s layer %d on %s: out[0][0] = %g\n", format.c_str(), layer, backend.c_str(),
                out[0]);
  } catch (const qmoe::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
