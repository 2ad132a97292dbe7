#pragma once
// Zeroed host memory for Buffer. Large blocks are mapped straight from the kernel: its pages come
// zeroed, so nothing is written up front (a memset would fault in every page on one thread before
// the real writers start), and they are advised as transparent huge pages, so a 200 MB weight
// takes about a hundred page faults instead of fifty thousand.
#include <cstddef>

namespace qmoe {

// 64-byte aligned, all bytes zero; throws std::bad_alloc. Free with free_zeroed(p, bytes).
std::byte* allocate_zeroed(size_t bytes);
void free_zeroed(std::byte* p, size_t bytes) noexcept;

}  // namespace qmoe
