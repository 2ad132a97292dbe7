// Each format quirk against packed words worked out by hand (the layouts in each format's file):
// one projection of N = 8 outputs and K = 16 inputs, group size 8 (G = 2). The expected words are
// written out here from the layout rules, not produced by the code under test; each test writes
// the projection, checks the stored words, then reads the file back.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "format/adapter.hpp"
#include "format_case.hpp"
#include "support/expect_error.hpp"

namespace qmoe::format {
namespace {

constexpr int64_t N = 8, K = 16, G = 2;

QuantScheme int_scheme(int bits, bool asym, int group = 8) {
  QuantScheme s;
  s.bits = bits;
  s.group_size = group;
  s.zero_point = asym ? ZeroPoint::explicit_ : ZeroPoint::none;
  return s;
}

// codes[n][k] = code(n, k); zeros[n][g] = n + 1 when asymmetric; distinct f16-exact scales.
template <class Code>
Projection projection(const QuantScheme& s, Code code) {
  Projection p;
  p.codes = Matrix<uint8_t>(N, K);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) p.codes.at(n, k) = static_cast<uint8_t>(code(n, k));
  p.scales = Matrix<float>(N, G);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g) p.scales.at(n, g) = 0.25f * static_cast<float>(n + 1 + 8 * g);
  if (s.has_zero_points()) {
    p.zeros = Matrix<uint8_t>(N, G);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t g = 0; g < G; ++g) p.zeros.at(n, g) = static_cast<uint8_t>(n + 1);
  }
  return p;
}

struct Written {
  test::ScratchDir dir{"golden"};
  TensorStore store;
  ProjectionSpec spec;

  std::vector<uint32_t> words(const std::string& suffix) const {
    const TensorInfo& t = store.at(spec.module + "." + suffix);
    std::vector<uint32_t> out(t.bytes.size() / 4);
    std::memcpy(out.data(), t.bytes.data(), t.bytes.size());
    return out;
  }
  std::vector<int64_t> shape(const std::string& suffix) const {
    return store.at(spec.module + "." + suffix).shape;
  }
};

std::unique_ptr<Written> write(CheckpointFormat format, const QuantScheme& s, const Projection& p,
                               int gptq_version = 1) {
  auto w = std::make_unique<Written>();
  w->spec = {"m", N, K, s, gptq_version};
  WriteOptions options;
  options.gptq_version = gptq_version;
  SafetensorsWriter out;
  adapter_for(format).write(out, w->spec, p, options);
  out.write(w->dir.path() / "model.safetensors");
  w->store = TensorStore::open(w->dir.path());
  return w;
}

void expect_same(const Projection& a, const Projection& b) {
  EXPECT_EQ(a.codes.values, b.codes.values);
  EXPECT_EQ(a.scales.values, b.scales.values);
  EXPECT_EQ(a.zeros.values, b.zeros.values);
}

std::vector<uint32_t> repeat(uint32_t word, size_t n) { return std::vector<uint32_t>(n, word); }

// GPTQ qweight [K/8, N]: along K, k % 8 is the nibble. With q = k every column holds k = 0..7
// (0x76543210) then k = 8..15 (0xFEDCBA98).
TEST(GoldenGptq, Int4WeightsPackAlongK) {
  const QuantScheme s = int_scheme(4, true);
  const Projection p = projection(s, [](int64_t, int64_t k) { return k; });
  const auto w = write(CheckpointFormat::gptq, s, p, 2);
  EXPECT_EQ(w->shape("qweight"), (std::vector<int64_t>{2, 8}));
  std::vector<uint32_t> expected = repeat(0x76543210u, 8);
  const std::vector<uint32_t> second = repeat(0xFEDCBA98u, 8);
  expected.insert(expected.end(), second.begin(), second.end());
  EXPECT_EQ(w->words("qweight"), expected);
  EXPECT_EQ(w->words("g_idx"),
            (std::vector<uint32_t>{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1}));
  expect_same(adapter_for(CheckpointFormat::gptq).read(w->store, w->spec), p);
}

// qzeros [G, N/8]: along N, n % 8 is the nibble. z = n + 1: v2 stores it (0x87654321), v1 stores
// z - 1 (0x76543210).
TEST(GoldenGptq, ZeroPointsPackAlongNWithTheV1Offset) {
  const QuantScheme s = int_scheme(4, true);
  const Projection p = projection(s, [](int64_t n, int64_t k) { return (n + k) % 16; });
  const auto v2 = write(CheckpointFormat::gptq, s, p, 2);
  EXPECT_EQ(v2->shape("qzeros"), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(v2->words("qzeros"), repeat(0x87654321u, 2));
  expect_same(adapter_for(CheckpointFormat::gptq).read(v2->store, v2->spec), p);
  const auto v1 = write(CheckpointFormat::gptq, s, p, 1);
  EXPECT_EQ(v1->words("qzeros"), repeat(0x76543210u, 2));
  expect_same(adapter_for(CheckpointFormat::gptq).read(v1->store, v1->spec), p);
}

// Symmetric GPTQ still stores qzeros: 8 everywhere, i.e. 0x77777777 in v1 and 0x88888888 in v2;
// int8: 128, i.e. 0x7F7F7F7F in v1.
TEST(GoldenGptq, SymmetricZeroWords) {
  const Projection p4 = projection(int_scheme(4, false), [](int64_t, int64_t k) { return k; });
  EXPECT_EQ(write(CheckpointFormat::gptq, int_scheme(4, false), p4, 1)->words("qzeros"),
            repeat(0x77777777u, 2));
  EXPECT_EQ(write(CheckpointFormat::gptq, int_scheme(4, false), p4, 2)->words("qzeros"),
            repeat(0x88888888u, 2));
  const Projection p8 = projection(int_scheme(8, false), [](int64_t, int64_t k) { return k; });
  EXPECT_EQ(write(CheckpointFormat::gptq, int_scheme(8, false), p8, 1)->words("qzeros"),
            repeat(0x7F7F7F7Fu, 4));
}

// v1 cannot hold z = 0 as z - 1 = -1 without masking: the field becomes 0xF (not 0xFFFFFFFF
// spilling into the neighbours) and reads back as (0xF + 1) & 0xF = 0.
TEST(GoldenGptq, V1ZeroPointZeroStaysInItsField) {
  const QuantScheme s = int_scheme(4, true);
  Projection p = projection(s, [](int64_t, int64_t k) { return k; });
  p.zeros.at(0, 0) = 0;  // n = 0, g = 0: the lowest nibble of qzeros[0][0]
  const auto w = write(CheckpointFormat::gptq, s, p, 1);
  EXPECT_EQ(w->words("qzeros"), (std::vector<uint32_t>{0x7654321Fu, 0x76543210u}));
  expect_same(adapter_for(CheckpointFormat::gptq).read(w->store, w->spec), p);
}

// int8: 4 codes per int32 along K, byte k % 4.
TEST(GoldenGptq, Int8WeightsPackFourPerWord) {
  const QuantScheme s = int_scheme(8, false);
  const Projection p = projection(s, [](int64_t, int64_t k) { return k; });
  const auto w = write(CheckpointFormat::gptq, s, p, 1);
  EXPECT_EQ(w->shape("qweight"), (std::vector<int64_t>{4, 8}));
  std::vector<uint32_t> expected;
  for (uint32_t word : {0x03020100u, 0x07060504u, 0x0B0A0908u, 0x0F0E0D0Cu}) {
    const auto row = repeat(word, 8);
    expected.insert(expected.end(), row.begin(), row.end());
  }
  EXPECT_EQ(w->words("qweight"), expected);
  expect_same(adapter_for(CheckpointFormat::gptq).read(w->store, w->spec), p);
}

// A sym config whose qzeros do not hold the implicit zero (here: a v2 file read as v1, the
// classic off-by-one) is refused, not silently dequantized wrong.
TEST(GoldenGptq, SymQzerosThatContradictTheConfigAreRefused) {
  const QuantScheme s = int_scheme(4, false);
  const auto w =
      write(CheckpointFormat::gptq, s, projection(s, [](int64_t, int64_t k) { return k; }), 2);
  ProjectionSpec as_v1 = w->spec;
  as_v1.gptq_version = 1;
  test::expect_error([&] { adapter_for(CheckpointFormat::gptq).read(w->store, as_v1); },
                     "m.qzeros: the config says sym, so every zero point must be 8");
}

// AWQ qweight [K, N/8]: along N with fields 0..7 holding n = 0, 2, 4, 6, 1, 3, 5, 7. With q = n
// every word reads 0x75316420; zeros z = n + 1 give 0x86427531.
TEST(GoldenAwq, InterleavedNibbleOrder) {
  const QuantScheme s = int_scheme(4, true);
  const Projection p = projection(s, [](int64_t n, int64_t) { return n; });
  const auto w = write(CheckpointFormat::awq, s, p);
  EXPECT_EQ(w->shape("qweight"), (std::vector<int64_t>{16, 1}));
  EXPECT_EQ(w->words("qweight"), repeat(0x75316420u, 16));
  EXPECT_EQ(w->shape("qzeros"), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(w->words("qzeros"), repeat(0x86427531u, 2));
  expect_same(adapter_for(CheckpointFormat::awq).read(w->store, w->spec), p);
}

// compressed-tensors weight_packed [N, K/8]: N-first, along K. Stored values are signed + 8, so
// the stored codes k (signed k - 8) give 0x76543210, 0xFEDCBA98 per row. weight_zero_point
// [N/8, G] packs along N: z = n + 1 gives 0x87654321 in each column.
TEST(GoldenCompressedTensors, PackedAlongKWithZerosAlongN) {
  const QuantScheme s = int_scheme(4, true);
  const Projection p = projection(s, [](int64_t, int64_t k) { return k; });
  const auto w = write(CheckpointFormat::compressed_tensors, s, p);
  EXPECT_EQ(w->shape("weight_packed"), (std::vector<int64_t>{8, 2}));
  std::vector<uint32_t> expected;
  for (int n = 0; n < 8; ++n) expected.insert(expected.end(), {0x76543210u, 0xFEDCBA98u});
  EXPECT_EQ(w->words("weight_packed"), expected);
  EXPECT_EQ(w->shape("weight_zero_point"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(w->words("weight_zero_point"), repeat(0x87654321u, 2));
  EXPECT_EQ(w->shape("weight_shape"), (std::vector<int64_t>{2}));
  EXPECT_EQ(w->words("weight_shape"), (std::vector<uint32_t>{8, 0, 16, 0}));  // I64 [8, 16]
  expect_same(adapter_for(CheckpointFormat::compressed_tensors).read(w->store, w->spec), p);
}

// Scales keep their orientation per format: GPTQ/AWQ [G, N], compressed-tensors [N, G].
TEST(GoldenScales, OrientationPerFormat) {
  const QuantScheme s = int_scheme(4, true);
  const Projection p = projection(s, [](int64_t, int64_t k) { return k; });
  auto first_two = [](const Written& w, const std::string& suffix) {
    const TensorInfo& t = w.store.at(w.spec.module + "." + suffix);
    half_t h[2];
    std::memcpy(h, t.bytes.data(), 4);
    return std::vector<float>{to_float(h[0]), to_float(h[1])};
  };
  // s[n][g] = 0.25 (n + 1 + 8g): [G, N] starts s[0][0], s[1][0]; [N, G] starts s[0][0], s[0][1].
  EXPECT_EQ(first_two(*write(CheckpointFormat::gptq, s, p), "scales"),
            (std::vector<float>{0.25f, 0.5f}));
  EXPECT_EQ(first_two(*write(CheckpointFormat::compressed_tensors, s, p), "weight_scale"),
            (std::vector<float>{0.25f, 2.25f}));
}

}  // namespace
}  // namespace qmoe::format
