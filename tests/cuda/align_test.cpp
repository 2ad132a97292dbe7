// Alignment by expert against a plain host definition of the layout (align.hpp's contract).
#include <random>
#include <vector>

#include "cuda/align.hpp"
#include "gpu_test.hpp"

namespace qmoe::test {
namespace {

struct Layout {
  std::vector<int32_t> sorted_pair_ids, tile_experts, expert_offsets, expert_counts, active_experts,
      pair_rows;
  int32_t padded_total = 0, num_active = 0;
};

// The contract, written the obvious way: local experts in order, each one's pairs in increasing
// pair index, padded with the sentinel to a multiple of the tile height.
Layout expected_layout(const std::vector<int32_t>& ids, int64_t E, const std::vector<int32_t>& map,
                       int64_t E_local, int tile, const AlignSizes& sizes) {
  const int64_t pairs = static_cast<int64_t>(ids.size());
  Layout l;
  l.sorted_pair_ids.assign(sizes.max_padded_rows, static_cast<int32_t>(pairs));
  l.tile_experts.assign(sizes.max_tiles, -1);
  l.expert_counts.assign(E_local, 0);
  l.active_experts.assign(E_local, -1);
  l.pair_rows.assign(pairs, -1);
  std::vector<std::vector<int32_t>> members(E_local);
  for (int64_t i = 0; i < pairs; ++i) {
    const int32_t e = ids[i];
    if (e < 0 || e >= E) continue;
    const int32_t local = map.empty() ? e : map[e];
    if (local >= 0) members[local].push_back(static_cast<int32_t>(i));
  }
  int32_t row = 0;
  for (int64_t e = 0; e < E_local; ++e) {
    l.expert_offsets.push_back(row);
    l.expert_counts[e] = static_cast<int32_t>(members[e].size());
    if (!members[e].empty()) l.active_experts[l.num_active++] = static_cast<int32_t>(e);
    for (size_t r = 0; r < members[e].size(); ++r) {
      l.sorted_pair_ids[row + r] = members[e][r];
      l.pair_rows[members[e][r]] = static_cast<int32_t>(row + r);
    }
    const int32_t padded = static_cast<int32_t>((members[e].size() + tile - 1) / tile * tile);
    for (int32_t t = row / tile; t < (row + padded) / tile; ++t)
      l.tile_experts[t] = static_cast<int32_t>(e);
    row += padded;
  }
  l.expert_offsets.push_back(row);
  l.padded_total = row;
  return l;
}

// optional_outputs false: only what cuda-mma asks for (the required outputs and pair_rows); the
// others stay nullptr and must not be written.
Layout gpu_layout(const std::vector<int32_t>& ids, int64_t E, const std::vector<int32_t>& map,
                  int64_t E_local, int tile, const AlignSizes& sizes,
                  bool optional_outputs = true) {
  const int64_t pairs = static_cast<int64_t>(ids.size());
  DeviceBuffer ids_d = to_device(ids), map_d = to_device(map);
  // 0x7b bytes: a value no output can legitimately hold, so unwritten elements show.
  auto out_buffer = [](int64_t n) { return poisoned(std::max<int64_t>(n, 1) * 4, 0x7b); };
  DeviceBuffer sorted = out_buffer(sizes.max_padded_rows), tiles = out_buffer(sizes.max_tiles),
               offsets = out_buffer(E_local + 1), counts = out_buffer(E_local),
               active = out_buffer(E_local), num_active = out_buffer(1),
               pair_rows = out_buffer(pairs), total = out_buffer(1),
               workspace = poisoned(sizes.workspace_bytes, 0x7b);
  AlignOutputs out{sorted.as<int32_t>(),     tiles.as<int32_t>(),    offsets.as<int32_t>(),
                   total.as<int32_t>(),      counts.as<int32_t>(),   active.as<int32_t>(),
                   num_active.as<int32_t>(), pair_rows.as<int32_t>()};
  if (!optional_outputs) out.expert_counts = out.active_experts = out.num_active = nullptr;
  QMOE_CUDA_CHECK(align_by_expert_cuda(ids_d.as<int32_t>(), pairs, E,
                                       map.empty() ? nullptr : map_d.as<int32_t>(), E_local, tile,
                                       workspace.data(), sizes.workspace_bytes, out, nullptr));
  Layout l;
  l.sorted_pair_ids = to_host<int32_t>(sorted, sizes.max_padded_rows);
  l.tile_experts = to_host<int32_t>(tiles, sizes.max_tiles);
  l.expert_offsets = to_host<int32_t>(offsets, E_local + 1);
  l.expert_counts = to_host<int32_t>(counts, E_local);
  l.active_experts = to_host<int32_t>(active, E_local);
  l.pair_rows = to_host<int32_t>(pair_rows, pairs);
  l.padded_total = to_host<int32_t>(total, 1)[0];
  l.num_active = to_host<int32_t>(num_active, 1)[0];
  return l;
}

// optional_outputs false: the optional outputs' buffers must keep their poison.
void expect_same(const std::vector<int32_t>& ids, int64_t E, const std::vector<int32_t>& map,
                 int64_t E_local, int tile, bool optional_outputs = true) {
  SCOPED_TRACE(::testing::Message()
               << "pairs " << ids.size() << " E " << E << " local " << E_local << " tile " << tile
               << " optional outputs " << optional_outputs);
  const AlignSizes sizes = align_sizes(static_cast<int64_t>(ids.size()), E_local, tile);
  Layout want = expected_layout(ids, E, map, E_local, tile, sizes);
  const Layout got = gpu_layout(ids, E, map, E_local, tile, sizes, optional_outputs);
  if (!optional_outputs) {
    constexpr int32_t kPoison = 0x7b7b7b7b;
    want.num_active = kPoison;
    want.expert_counts.assign(E_local, kPoison);
    want.active_experts.assign(E_local, kPoison);
  }
  EXPECT_EQ(got.padded_total, want.padded_total);
  EXPECT_EQ(got.num_active, want.num_active);
  EXPECT_EQ(got.expert_offsets, want.expert_offsets);
  EXPECT_EQ(got.expert_counts, want.expert_counts);
  EXPECT_EQ(got.active_experts, want.active_experts);
  EXPECT_EQ(got.tile_experts, want.tile_experts);
  EXPECT_EQ(got.sorted_pair_ids, want.sorted_pair_ids);
  EXPECT_EQ(got.pair_rows, want.pair_rows);
}

// topk_ids [M, k] with distinct experts per token, uniform over `pool` (the experts in use).
std::vector<int32_t> random_ids(int64_t M, int k, const std::vector<int32_t>& pool,
                                std::mt19937_64& rng) {
  std::vector<int32_t> ids;
  std::vector<int32_t> shuffled = pool;
  for (int64_t m = 0; m < M; ++m) {
    for (int j = 0; j < k; ++j) {
      std::uniform_int_distribution<size_t> pick(j, shuffled.size() - 1);
      std::swap(shuffled[j], shuffled[pick(rng)]);
      ids.push_back(shuffled[j]);
    }
  }
  return ids;
}

std::vector<int32_t> iota(int64_t n, int step = 1) {
  std::vector<int32_t> v;
  for (int64_t i = 0; i < n; i += step) v.push_back(static_cast<int32_t>(i));
  return v;
}

TEST(CudaAlign, UniformRoutingAcrossShapes) {
  QMOE_REQUIRE_GPU();
  std::mt19937_64 rng(11);
  for (int64_t E : {8, 60, 128, 256, 384})
    for (int k : {1, 2, 6, 8})
      for (int64_t M : {1, 5, 64, 1000, 8192}) {
        if (k > E) continue;
        const int tile = M >= 1000 ? 64 : (M % 2 ? 16 : 1);
        expect_same(random_ids(M, k, iota(E), rng), E, {}, E, tile);
      }
}

// 0 to 33 pairs, where one warp takes up to 32 (a lane per pair) and the block kernel the rest:
// random ids with repeats, ids outside the range, every tile height the GEMM's decode uses and
// tiles taller than the batch, with and without an expert map, local expert counts that do not
// divide among the warp's lanes, and only the outputs cuda-mma asks for.
TEST(CudaAlign, EveryPairCountAroundOneWarp) {
  QMOE_REQUIRE_GPU();
  std::mt19937_64 rng(15);
  for (int64_t pairs = 0; pairs <= 33; ++pairs)
    for (int64_t E : {1, 8, 33, 256, 497, 512}) {
      std::uniform_int_distribution<int32_t> pick(-1, static_cast<int32_t>(E));
      std::vector<int32_t> ids(pairs);
      for (auto& id : ids) id = pick(rng);
      for (int tile : {1, 8, 48}) expect_same(ids, E, {}, E, tile);
      expect_same(ids, E, {}, E, 8, false);
      std::vector<int32_t> even_here(E, -1);
      for (int64_t e = 0; e < E; e += 2) even_here[e] = static_cast<int32_t>(e / 2);
      expect_same(ids, E, even_here, (E + 1) / 2, 16);
    }
}

TEST(CudaAlign, TileHeights) {
  QMOE_REQUIRE_GPU();
  std::mt19937_64 rng(12);
  const auto ids = random_ids(777, 6, iota(60), rng);
  for (int tile : {1, 7, 16, 64, 128, 256}) expect_same(ids, 60, {}, 60, tile);
}

TEST(CudaAlign, EmptyExpertsAndAllOnOne) {
  QMOE_REQUIRE_GPU();
  std::mt19937_64 rng(13);
  // Only every third expert is ever chosen: the rest are empty and get no rows and no tiles.
  expect_same(random_ids(3000, 6, iota(256, 3), rng), 256, {}, 256, 64);
  // Every pair on expert 5 (k = 1), across block boundaries of the scatter.
  expect_same(std::vector<int32_t>(9000, 5), 8, {}, 8, 128);
  expect_same(std::vector<int32_t>(1, 383), 384, {}, 384, 16);
}

TEST(CudaAlign, ExpertMapDropsOtherRanks) {
  QMOE_REQUIRE_GPU();
  std::mt19937_64 rng(14);
  for (int64_t E : {8, 128, 384}) {
    // Rank 1 of 2 in the usual contiguous split, and a strided split with holes.
    std::vector<int32_t> contiguous(E, -1), strided(E, -1);
    for (int64_t e = E / 2; e < E; ++e) contiguous[e] = static_cast<int32_t>(e - E / 2);
    for (int64_t e = 0; e < E; e += 4) strided[e] = static_cast<int32_t>(e / 4);
    for (int64_t M : {3, 500, 8192}) {
      const auto ids = random_ids(M, E >= 8 ? 8 : 2, iota(E), rng);
      expect_same(ids, E, contiguous, E / 2, 64);
      expect_same(ids, E, strided, (E + 3) / 4, 16);
    }
  }
  // A rank with no pairs at all.
  std::vector<int32_t> none_here(8, -1);
  none_here[7] = 0;
  expect_same(std::vector<int32_t>(100, 2), 8, none_here, 1, 16);
}

TEST(CudaAlign, IdsOutsideTheExpertRangeAreDropped) {
  QMOE_REQUIRE_GPU();
  expect_same({0, 9, -1, 3, 8, 3, 7}, 8, {}, 8, 4);
}

TEST(CudaAlign, TheDocumentedExample) {
  QMOE_REQUIRE_GPU();
  const std::vector<int32_t> ids{2, 3, 4, 1, 2, 4, 1, 3, 4, 1, 2, 3};
  const AlignSizes sizes = align_sizes(12, 5, 4);
  const Layout got = gpu_layout(ids, 5, {}, 5, 4, sizes);
  const std::vector<int32_t> sorted{3, 6, 9, 12, 0, 4, 10, 12, 1, 7, 11, 12, 2, 5, 8, 12};
  EXPECT_EQ(std::vector<int32_t>(got.sorted_pair_ids.begin(), got.sorted_pair_ids.begin() + 16),
            sorted);
  EXPECT_EQ(got.padded_total, 16);
  EXPECT_EQ(std::vector<int32_t>(got.tile_experts.begin(), got.tile_experts.begin() + 4),
            (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(got.expert_offsets, (std::vector<int32_t>{0, 0, 4, 8, 12, 16}));
}

TEST(CudaAlign, NoPairs) {
  QMOE_REQUIRE_GPU();
  expect_same({}, 8, {}, 8, 16);
}

TEST(CudaAlign, RejectsBadArguments) {
  EXPECT_THROW(align_sizes(10, 0, 16), Error);
  EXPECT_THROW(align_sizes(10, kMaxAlignExperts + 1, 16), Error);
  EXPECT_THROW(align_sizes(10, 8, 0), Error);
  AlignOutputs out;
  EXPECT_EQ(align_by_expert_cuda(nullptr, 10, 8, nullptr, 8, 16, nullptr, 0, out, nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace qmoe::test
