#pragma once
// What the oracle needs to know of cuda-wgmma's MXFP4 re-coding (mxfp4_recode.hpp), without its
// CUDA headers: descriptors build in every configuration, CUDA or not.

namespace qmoe::cuda_wgmma {

// The largest difference between the e8m0 exponents of two nonzero blocks of one 64-channel
// window that the e4m3 re-coding holds exactly (LayerDesc::mxfp4_window_spread).
inline constexpr int kMxfp4WindowSpreadLimit = 14;

}  // namespace qmoe::cuda_wgmma
