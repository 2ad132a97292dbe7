#pragma once
// Memory ceilings measured in the same run as the MoE rows, over buffers far larger than the L3,
// on the cpu backend's own thread pool (so the same threads as the forward), once in memory with
// the packed weights' page policy (transparent huge pages where offered) and once on 4 KB pages,
// which is what weights read in place from other memory sit on.
#include <string>

namespace qmoe::bench {

struct Ceilings {
  // Bytes per second, best of several trials.
  double copy_gbps;     // STREAM-like copy, huge pages: (bytes read + bytes written) / time
  double read_gbps;     // streaming read (XOR-reduce), huge pages: bytes read / time
  double copy_4k_gbps;  // the same on 4 KB pages
  double read_4k_gbps;
  int threads;  // the pool's threads they ran on

  // "read 45.4 GB/s (4 KB pages 31.4), copy ... on 2 threads"
  std::string to_string() const;
};

Ceilings measure_ceilings();

}  // namespace qmoe::bench
