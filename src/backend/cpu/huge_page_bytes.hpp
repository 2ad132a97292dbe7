#pragma once
// Host memory for packed weights, backed by transparent huge pages where the kernel offers them.
// A decode step jumps between experts chosen at random, megabytes apart: with 4 KB pages almost
// every panel starts with a TLB miss, and in a VM each miss is a two-level page walk. The
// benchmarks' memory ceilings also ask for the opposite (4 KB pages only), to show what the
// huge pages are worth.
#include <cstddef>
#include <cstdint>
#include <memory>

namespace qmoe::cpu {

class HugePageBytes {
 public:
  HugePageBytes() = default;
  enum class Pages { huge, small_only };
  // Uninitialized; aligned to 2 MiB and advised as huge pages (MADV_HUGEPAGE) on Linux, or with
  // Pages::small_only as never huge (MADV_NOHUGEPAGE).
  explicit HugePageBytes(size_t size, Pages pages = Pages::huge);

  uint8_t* data() { return bytes_.get(); }
  const uint8_t* data() const { return bytes_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t[], Free> bytes_;
  size_t size_ = 0;
};

}  // namespace qmoe::cpu
