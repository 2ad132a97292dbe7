// TensorStore::release_pages: after a module is converted its pages may go back to the kernel,
// but only pages of mapped shards. Over a store of the caller's own arrays (from_tensors, as the
// Python layout reader builds), MADV_DONTNEED would zero the caller's memory, so the arrays must
// read back exactly as written, around and between the module's tensors too.
#include <gtest/gtest.h>

#include <cstddef>
#include <random>
#include <vector>

#include "format/safetensors.hpp"

namespace qmoe::format {
namespace {

TEST(TensorStore, ReleasingPagesLeavesTheCallersArraysIntact) {
  constexpr size_t kBytes = size_t{64} << 10;  // 16 pages of 4 KB, several whole pages per tensor
  std::vector<std::byte> memory(3 * kBytes);
  std::mt19937 rng(7);
  for (std::byte& b : memory) b = static_cast<std::byte>(rng() | 1);  // never zero
  const std::vector<std::byte> written = memory;
  std::vector<TensorInfo> tensors;
  for (const char* name : {"m.0.qweight", "m.0.scales", "n.0.qweight"}) {
    TensorInfo t;
    t.name = name;
    t.file = "(arrays)";
    t.dtype = StDType::u8;
    t.shape = {static_cast<int64_t>(kBytes)};
    t.bytes = {memory.data() + tensors.size() * kBytes, kBytes};
    tensors.push_back(t);
  }
  const TensorStore store = TensorStore::from_tensors(std::move(tensors), "arrays");
  store.release_pages("m.0.");
  size_t changed = 0;
  for (size_t i = 0; i < memory.size(); ++i) changed += memory[i] != written[i];
  EXPECT_EQ(changed, 0u);
}

}  // namespace
}  // namespace qmoe::format
