// The per-expert argument arrays of cuda-wgmma's grouped GEMM (argument_blob.hpp): each array
// holds exactly its values at its own offset, for element types of different sizes and many
// experts (an array sized by the wrong type once overlapped the next one from 11 experts on).
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <vector>

#include "backend/cuda_wgmma/argument_blob.hpp"

namespace qmoe::cuda_wgmma {
namespace {

struct Wide {  // a layout-sized value: larger than a pointer
  std::array<int64_t, 3> v;
};

TEST(ArgumentBlob, ArraysOfDifferentElementSizesKeepTheirOwnBytes) {
  for (size_t experts : {1u, 8u, 11u, 60u, 128u, 256u}) {
    std::vector<const void*> pointers(experts);
    for (size_t e = 0; e < experts; ++e) pointers[e] = reinterpret_cast<const void*>(0x1000 + e);
    const Wide wide{{7, -3, 1 << 20}};
    const int32_t narrow = 42;
    ArgumentBlob blob(experts);
    const size_t at_pointers = blob.add_array(pointers.data());
    const size_t at_wide = blob.add_repeated(wide);
    const size_t at_narrow = blob.add_repeated(narrow);
    const size_t at_more = blob.add_array(pointers.data());
    // in order, on 256 bytes, each after the end of the one before
    EXPECT_EQ(at_pointers, 0u);
    EXPECT_GE(at_wide, at_pointers + experts * sizeof(void*));
    EXPECT_GE(at_narrow, at_wide + experts * sizeof(Wide));
    EXPECT_GE(at_more, at_narrow + experts * sizeof(int32_t));
    for (size_t at : {at_wide, at_narrow, at_more}) EXPECT_EQ(at % 256, 0u);
    EXPECT_EQ(blob.bytes().size(), at_more + experts * sizeof(void*));
    const char* bytes = blob.bytes().data();
    for (size_t e = 0; e < experts; ++e) {
      const void* p = nullptr;
      std::memcpy(&p, bytes + at_pointers + e * sizeof(void*), sizeof(p));
      EXPECT_EQ(p, pointers[e]) << experts << " experts, pointer " << e;
      std::memcpy(&p, bytes + at_more + e * sizeof(void*), sizeof(p));
      EXPECT_EQ(p, pointers[e]) << experts << " experts, second array " << e;
      Wide w{};
      std::memcpy(&w, bytes + at_wide + e * sizeof(Wide), sizeof(w));
      EXPECT_EQ(w.v, wide.v) << experts << " experts, wide " << e;
      int32_t n = 0;
      std::memcpy(&n, bytes + at_narrow + e * sizeof(int32_t), sizeof(n));
      EXPECT_EQ(n, narrow) << experts << " experts, narrow " << e;
    }
  }
}

}  // namespace
}  // namespace qmoe::cuda_wgmma
