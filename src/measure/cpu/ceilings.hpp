#pragma once
// Memory ceilings measured in the same run as the MoE rows, over buffers far larger than the L3,
// on the cpu backend's own thread pool (so the same threads as the forward) and in memory with
// the same page policy as the packed weights.
namespace qmoe::bench {

struct Ceilings {
  double copy_gbps;  // STREAM-like copy: (bytes read + bytes written) / time, best of several
  double read_gbps;  // streaming read (XOR-reduce): bytes read / time, best of several
};

Ceilings measure_ceilings();

}  // namespace qmoe::bench
