// The AWQ and GPTQ fixtures packed by the formats' own libraries
// (tests/data/make_awq_gptq_fixtures.py: AutoAWQ's WQLinear_GEMM.from_linear, AutoGPTQ's
// QuantLinear.pack for GPTQ v1, GPTQModel's TorchLinear.pack_block for gptq_v2). Their truth comes
// from those libraries, not from qmoe: every weight qmoe reads equals the library's own decoding of
// the same file, and every CPU backend's forward matches the layer forward the generator ran in
// float64 over that decoding (reference/expected.safetensors). The AWQ and GPTQ-without-desc_act
// fixtures are also read the way vLLM's moe_wna16 method reads them.
//
// Error bound on the forward, normalized ||out - expected|| / ||expected||: 1e-5. The weights are
// exact (checked first), so what remains is f32 arithmetic: dequantization as one FMA per weight
// (<= 2 ulp), f32 accumulation over K <= 96, an f32 intermediate, and the expected output rounded
// once to f32 (2^-24). Measured: 7e-8 to 4e-7 on every backend; a wrong nibble order, zero
// point, group or permutation moves the output by order 1e-1.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/isa.hpp"
#include "backend_cpu/isa_scope.hpp"
#include "format/inspect.hpp"
#include "library_reference.hpp"
#include "qmoe/checkpoint.hpp"
#include "qmoe/moe.hpp"
#include "sample/random_moe.hpp"
#include "support/moe_case.hpp"

namespace qmoe::format {
namespace {

constexpr double kBound = 1e-5;

struct LibraryFixture {
  std::string dir;
  bool as_moe_wna16;
  CheckpointFormat format;
  QuantScheme scheme;
  int64_t experts, hidden, intermediate;
  bool bias;
};

using test::scheme;

const LibraryFixture kFixtures[] = {
    {"awq-library-int4-g16-bias", false, CheckpointFormat::awq, scheme(4, 16, true), 3, 96, 64,
     true},
    {"awq-library-int4-g16-bias", true, CheckpointFormat::moe_wna16, scheme(4, 16, true), 3, 96, 64,
     true},
    {"gptq-library-int4-g16-asym-desc_act", false, CheckpointFormat::gptq,
     scheme(4, 16, true, true), 3, 64, 96, false},
    {"gptq-library-int8-channel-sym-bias", false, CheckpointFormat::gptq, scheme(8, kChannelwise),
     4, 96, 32, true},
    {"gptq-library-int8-channel-sym-bias", true, CheckpointFormat::moe_wna16,
     scheme(8, kChannelwise), 4, 96, 32, true},
    {"gptq-library-int8-g32-asym-desc_act-v2", false, CheckpointFormat::gptq,
     scheme(8, 32, true, true), 3, 96, 64, false},
};

std::string fixture_name(const LibraryFixture& f) {
  std::string name = f.dir + (f.as_moe_wna16 ? "_as_moe_wna16" : "");
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
}

void PrintTo(const LibraryFixture& f, std::ostream* os) { *os << fixture_name(f); }

std::filesystem::path fixture_dir(const LibraryFixture& f) {
  return std::filesystem::path(QMOE_TEST_DATA_DIR) / f.dir;
}

Checkpoint open_fixture(const LibraryFixture& f) {
  return Checkpoint::open(fixture_dir(f), OpenOptions{.as_moe_wna16 = f.as_moe_wna16});
}

Buffer read_f32(const TensorStore& store, const std::string& name, int64_t rows, int64_t cols) {
  const Matrix<float> m = read_floats(store.at(name), rows, cols);
  Buffer b(DType::f32, {rows, cols});
  std::copy(m.values.begin(), m.values.end(), b.data_as<float>());
  return b;
}

class LibraryFixtureTest : public testing::TestWithParam<LibraryFixture> {};

TEST_P(LibraryFixtureTest, ReadsAsTheLibraryWroteIt) {
  const LibraryFixture& f = GetParam();
  const Checkpoint ckpt = open_fixture(f);
  EXPECT_EQ(ckpt.format_kind(), f.format);
  EXPECT_EQ(ckpt.naming(), ExpertNaming::qwen);
  EXPECT_EQ(ckpt.scheme(), f.scheme) << to_string(ckpt.scheme());
  ASSERT_EQ(ckpt.moe_layers(), std::vector<int>{0});
  const QuantizedExperts experts = ckpt.load_layer(0);
  ASSERT_NO_FATAL_FAILURE(test::expect_gated_layer(experts, f.experts, f.hidden, f.intermediate));
  EXPECT_EQ(experts.w13().has_bias(), f.bias);
  EXPECT_EQ(experts.w2().has_bias(), f.bias);

  test::expect_layer_matches_library(experts, TensorStore::open(fixture_dir(f) / "reference"));

  const CheckpointReport report = inspect(ckpt);
  EXPECT_TRUE(report.findings.empty()) << report.findings.front();
}

// The expected output, on emulation and on the cpu backend in every SIMD variant this machine
// runs (QMOE_CPU_ISA), from the router logits (qmoe's own routing, against the generator's).
TEST_P(LibraryFixtureTest, EveryCpuBackendMatchesTheLibraryForward) {
  const LibraryFixture& f = GetParam();
  const Checkpoint ckpt = open_fixture(f);
  const QuantizedExperts experts = ckpt.load_layer(0);
  const TensorStore expected = TensorStore::open(fixture_dir(f) / "reference");
  const int64_t M = expected.at("hidden").shape.at(0), H = f.hidden, E = f.experts;
  const Buffer hidden = read_f32(expected, "hidden", M, H);
  const Buffer logits = read_f32(expected, "router_logits", M, E);
  const Buffer want = read_f32(expected, "output", M, H);

  std::vector<std::pair<std::string, std::string>> runs = {{"emulation", ""}};
  for (cpu::Isa isa : cpu::supported_isas()) runs.emplace_back("cpu", cpu::name(isa));
  for (const auto& [backend, isa] : runs) {
    SCOPED_TRACE(backend + " " + isa);
    std::optional<test::IsaScope> scope;
    if (!isa.empty()) scope.emplace(isa);
    const MoE moe(ckpt.layer_config(0), experts, backend);
    Buffer out(DType::f32, {M, H});
    std::fill_n(out.data_as<float>(), M * H, 1e6f);  // poison: every element must be written
    moe.forward(hidden.view(), logits.view(), out.view());
    EXPECT_LT(sample::relative_error(out, want), kBound);
  }
}

INSTANTIATE_TEST_SUITE_P(Upstream, LibraryFixtureTest, testing::ValuesIn(kFixtures),
                         [](const testing::TestParamInfo<LibraryFixture>& p) {
                           return fixture_name(p.param);
                         });

}  // namespace
}  // namespace qmoe::format
