#pragma once
// GPTQ v1 zero points that AutoGPTQ's packer overflowed.
//
// v1 ("gptq") qzeros hold z - 1 in each bits-wide field, LSB first (gptq.cpp). AutoGPTQ 0.7.1's
// packer (auto_gptq/nn_modules/qlinear/qlinear_cuda.py and qlinear_cuda_old.py, QuantLinear.pack)
// computes z - 1 as an int, casts it to uint32 and ORs it in shifted without masking, so z = 0
// becomes 0xffffffff << (bits * field): all ones in its own field AND in every field above it in
// the 32-bit word. At 4 bits, true zeros [0, 13, 4, 10, 3, 4, 7, 15] (fields 0..7) pack as
// 0xffffffff.
//
// What such a word still says: a field of all ones would be z = 2^bits, which no quantizer gives
// (GPTQ's z = round(-min / scale) is at most 2^bits - 1), so the lowest all-ones field held z = 0
// and reads back exactly under the v1 rule, (field + 1) & mask = 0. When every field above it is
// all ones too, their zero points were overwritten and are lost; qmoe reads them by the same rule,
// as 0, which is also what qlinear_cuda_old's CPU path reads (qlinear_cuda's masks before adding
// 1 and reads 2^bits, outside the code range). A writer that masks (qmoe's own) writes the same
// word when all those zero points really are 0; the two cannot be told apart, so such a word is
// reported as overflowed. When some field above the lowest all-ones one is not all ones, nothing
// spilled into it and nothing is lost.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "format/expert_names.hpp"
#include "format/model_config.hpp"
#include "format/safetensors.hpp"

namespace qmoe::format {

// One 32-bit qzeros word whose zero point of 0 overwrote the fields above it.
struct ZeroOverflow {
  int64_t group = 0;
  int64_t word = 0;  // output channels word * pf .. word * pf + pf - 1 (pf = 32 / bits)
  int field = 0;     // its lowest all-ones field: output channel word * pf + field has zero 0
  int lost = 0;      // the fields above it (pf - 1 - field >= 1), whose zero points are lost
};

// The overflowed words of one projection's v1 qzeros, I32 [G, words] little-endian, in order.
std::vector<ZeroOverflow> find_zero_overflows(std::span<const std::byte> qzeros, int64_t G,
                                              int64_t words, int bits);

// Throws Error naming `tensor` and the first overflowed word (group, output channels, why) when
// v1 qzeros hold one: the strict reading (OpenOptions::strict_zeros).
void refuse_zero_overflows(std::span<const std::byte> qzeros, int64_t G, int64_t words, int bits,
                           const std::string& tensor);

// The overflowed words of one expert projection in one group, for `qmoe inspect`.
struct GroupZeroOverflow {
  int64_t expert = 0;
  std::string projection;  // "gate_proj", "w1", ...
  int64_t group = 0;
  int64_t words = 0;
  int64_t lost_channels = 0;  // output channels whose zero points were overwritten
};

// A checkpoint's GPTQ v1 qzeros read from its files again: the canonical layer no longer shows
// which zero points were lost. Reads nothing when `dir` holds another format.
class ZeroOverflowScan {
 public:
  explicit ZeroOverflowScan(const std::filesystem::path& dir);
  // Every expert projection of `layer` that holds v1 qzeros, group by group.
  std::vector<GroupZeroOverflow> layer(int layer) const;

 private:
  std::optional<TensorStore> store_;  // only for a GPTQ v1 checkpoint
  ExpertLayout layout_;
  QuantConfig quant_;
};

}  // namespace qmoe::format
