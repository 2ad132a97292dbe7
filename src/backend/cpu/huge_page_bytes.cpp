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

HugePageBytes::HugePageBytes(size_t size, Pages pages) : size_(size) {
  if (size == 0) return;
  const size_t rounded = (size + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (!p) throw std::bad_alloc();
#if defined(__linux__)
  // A hint: without THP the memory works all the same.
  madvise(p, rounded, pages == Pages::huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
#else
  (void)pages;
#endif
  bytes_.reset(static_cast<uint8_t*>(p));
}

void HugePageBytes::Free::operator()(uint8_t* p) const { std::free(p); }

}  // namespace qmoe::cpu
