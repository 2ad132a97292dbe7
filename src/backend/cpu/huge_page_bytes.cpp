#include "backend/cpu/huge_page_bytes.hpp"

#include <cstdlib>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace qmoe::cpu {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}

HugePageBytes::HugePageBytes(size_t size) : size_(size) {
  if (size == 0) return;
  const size_t rounded = (size + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (!p) throw std::bad_alloc();
#if defined(__linux__)
  madvise(p, rounded, MADV_HUGEPAGE);  // a hint: without THP the memory works all the same
#endif
  bytes_.reset(static_cast<uint8_t*>(p));
}

void HugePageBytes::Free::operator()(uint8_t* p) const { std::free(p); }

}  // namespace qmoe::cpu
