#include "core/host_memory.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace qmoe {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;
// From here on a block is mapped on its own: two huge pages, so the rounding costs little.
constexpr size_t kMappedFrom = 2 * kHugePage;

size_t mapped_size(size_t bytes) { return (bytes + kHugePage - 1) / kHugePage * kHugePage; }

}  // namespace

std::byte* allocate_zeroed(size_t bytes) {
#if defined(__linux__)
  if (bytes >= kMappedFrom) {
    // Map one huge page more than needed and trim both ends, so the block starts on a huge page.
    const size_t size = mapped_size(bytes), span = size + kHugePage;
    void* m = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    auto* base = static_cast<std::byte*>(m);
    const auto misaligned = reinterpret_cast<uintptr_t>(base) % kHugePage;
    const size_t head = misaligned ? kHugePage - misaligned : 0;
    if (head) ::munmap(base, head);
    if (kHugePage - head) ::munmap(base + head + size, kHugePage - head);
    ::madvise(base + head, size, MADV_HUGEPAGE);  // a hint: without THP the memory works the same
    return base + head;
  }
#endif
  auto* p = static_cast<std::byte*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  return p;
}

void free_zeroed(std::byte* p, size_t bytes) noexcept {
  if (!p) return;
#if defined(__linux__)
  if (bytes >= kMappedFrom) {
    ::munmap(p, mapped_size(bytes));
    return;
  }
#endif
  std::free(p);
}

}  // namespace qmoe
