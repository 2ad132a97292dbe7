#pragma once
// Small named wrappers around the PTX the expert GEMM needs, and the in-register dequantization
// of the codes of one mma step (layout.hpp says which code sits where).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda_mma/layout.hpp"

namespace qmoe::cuda_mma {

// Shared-memory addresses as the 32-bit offsets that cp.async and ld.shared take: computed once
// per warp, so each copy or read costs no address conversion.
__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared without registers or L1 (cp.async, sm_80+), and its group fences.
__device__ __forceinline__ void copy_async16(uint32_t dst_sh, const void* src_gl) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst_sh), "l"(src_gl));
}
__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int kPending>
__device__ __forceinline__ void copy_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending));
}

// Barrier `id` (1-15; 0 is __syncthreads) among `threads` threads, a multiple of 32.
__device__ __forceinline__ void sync_named(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ uint4 load_shared16(uint32_t src_sh) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(src_sh));
  return v;
}

__device__ __forceinline__ void store_shared16(uint32_t dst_sh, uint4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(dst_sh), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w));
}

// Read-only loads that ask L2 to fetch the whole 128-byte line: a strip's next groups of scales
// (zero points) sit in that line (layout.hpp), so the loads a group later hit L2, not DRAM.
__device__ __forceinline__ uint32_t load_line_hinted(const uint32_t* p) {
  uint32_t v;
  asm("ld.global.nc.L2::128B.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ uint32_t load_line_hinted(const uint16_t* p) {
  uint16_t v;
  asm("ld.global.nc.L2::128B.u16 %0, [%1];" : "=h"(v) : "l"(p));
  return v;
}

// (a & b) ^ c in one instruction.
__device__ __forceinline__ uint32_t and_xor(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0x6A;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

template <class T>
struct MmaType;

template <>
struct MmaType<__nv_bfloat16> {
  // 128 as bf16: its ulp is 1, so OR-ing a code c < 128 into the mantissa gives exactly 128 + c.
  static constexpr uint32_t kMagic = 0x4300;
  __device__ static __forceinline__ void mma(float c[4], const uint32_t a[4], uint32_t b0,
                                             uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  __device__ static __forceinline__ uint32_t sub2(uint32_t a, uint32_t b) {
    __nv_bfloat162 r =
        __hsub2(*reinterpret_cast<__nv_bfloat162*>(&a), *reinterpret_cast<__nv_bfloat162*>(&b));
    return *reinterpret_cast<uint32_t*>(&r);
  }
  __device__ static __forceinline__ uint32_t mul2(uint32_t a, uint32_t b) {
    __nv_bfloat162 r =
        __hmul2(*reinterpret_cast<__nv_bfloat162*>(&a), *reinterpret_cast<__nv_bfloat162*>(&b));
    return *reinterpret_cast<uint32_t*>(&r);
  }
  __device__ static __forceinline__ __nv_bfloat16 from_float(float v) {
    return __float2bfloat16_rn(v);
  }
};

template <>
struct MmaType<__half> {
  // 1024 as f16: ulp 1 up to 2048, so 1024 + c is exact for every 4 or 8-bit code.
  static constexpr uint32_t kMagic = 0x6400;
  __device__ static __forceinline__ void mma(float c[4], const uint32_t a[4], uint32_t b0,
                                             uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  __device__ static __forceinline__ uint32_t sub2(uint32_t a, uint32_t b) {
    __half2 r = __hsub2(*reinterpret_cast<__half2*>(&a), *reinterpret_cast<__half2*>(&b));
    return *reinterpret_cast<uint32_t*>(&r);
  }
  __device__ static __forceinline__ uint32_t mul2(uint32_t a, uint32_t b) {
    __half2 r = __hmul2(*reinterpret_cast<__half2*>(&a), *reinterpret_cast<__half2*>(&b));
    return *reinterpret_cast<uint32_t*>(&r);
  }
  __device__ static __forceinline__ __half from_float(float v) { return __float2half_rn(v); }
};

// What to subtract from the magic-biased codes of rows g (lo) and g + 8 (hi): magic + zero,
// as a 16-bit pair, or (int8 into bf16) as a float 2^23 + zero.
struct ZeroOffsets {
  uint32_t lo, hi;
  float flo, fhi;
};

template <class T>
__device__ __forceinline__ ZeroOffsets zero_offsets(uint32_t z_lo, uint32_t z_hi) {
  ZeroOffsets z;
  z.lo = (MmaType<T>::kMagic + z_lo) * 0x10001u;
  z.hi = (MmaType<T>::kMagic + z_hi) * 0x10001u;
  z.flo = 8388608.0f + float(z_lo);
  z.fhi = 8388608.0f + float(z_hi);
  return z;
}

// Codes of one step -> the A fragment (code - zero) as exact small integers in T. The scale is
// applied later, in fp32, to the accumulator of each group.
template <class T, WeightElement kElem>
struct Dequant;

template <class T>
struct Dequant<T, WeightElement::int4> {
  // word: nibble i and 4 + i are the two codes of register i, each XOR 8 (layout.hpp). The magic
  // exponent bits lie above the nibble, so XOR with magic | 8 both undoes the flip and adds the
  // magic: (nibble ^ 8) | magic, one instruction as before.
  __device__ static __forceinline__ void step(const uint32_t* words, const ZeroOffsets& z,
                                              uint32_t a[4]) {
    const uint32_t w = words[0];
    constexpr uint32_t magic_flip = (MmaType<T>::kMagic | 0x8u) * 0x10001u;
    a[0] = MmaType<T>::sub2(and_xor(w, 0x000f000fu, magic_flip), z.lo);
    a[1] = MmaType<T>::sub2(and_xor(w >> 4, 0x000f000fu, magic_flip), z.hi);
    a[2] = MmaType<T>::sub2(and_xor(w >> 8, 0x000f000fu, magic_flip), z.lo);
    a[3] = MmaType<T>::sub2(and_xor(w >> 12, 0x000f000fu, magic_flip), z.hi);
  }
};

template <>
struct Dequant<__half, WeightElement::int8> {
  // byte_perm places a code under the f16 exponent of 1024: [c0, 0x64, c1, 0x64].
  __device__ static __forceinline__ void step(const uint32_t* words, const ZeroOffsets& z,
                                              uint32_t a[4]) {
    a[0] = MmaType<__half>::sub2(__byte_perm(words[0], 0x64646464u, 0x4140), z.lo);
    a[1] = MmaType<__half>::sub2(__byte_perm(words[0], 0x64646464u, 0x4342), z.hi);
    a[2] = MmaType<__half>::sub2(__byte_perm(words[1], 0x64646464u, 0x4140), z.lo);
    a[3] = MmaType<__half>::sub2(__byte_perm(words[1], 0x64646464u, 0x4342), z.hi);
  }
};

template <>
struct Dequant<__nv_bfloat16, WeightElement::int8> {
  // bf16 has 8 significant bits, too few for 128 + c: go through fp32, where 2^23 + c is exact.
  __device__ static __forceinline__ uint32_t pair(uint32_t word, int byte, float zero) {
    const float lo = __uint_as_float(__byte_perm(word, 0x4B000000u, 0x7540 | byte)) - zero;
    const float hi = __uint_as_float(__byte_perm(word, 0x4B000000u, 0x7540 | (byte + 1))) - zero;
    __nv_bfloat162 r = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&r);
  }
  __device__ static __forceinline__ void step(const uint32_t* words, const ZeroOffsets& z,
                                              uint32_t a[4]) {
    a[0] = pair(words[0], 0, z.flo);
    a[1] = pair(words[0], 2, z.fhi);
    a[2] = pair(words[1], 0, z.flo);
    a[3] = pair(words[1], 2, z.fhi);
  }
};

// e2m1 codes (bit 3 sign, bits 2..1 exponent with bias 1, bit 0 mantissa; int4's nibble
// positions) -> their exact values in T. Placing a code's sign at bit 15 and its exponent and
// mantissa bits just below T's exponent field gives T's bits of value * 2^-(T's bias - 1), code
// 0.5 becoming a subnormal; one multiply by 2^(bias - 1) (2^14 for f16, 2^126 for bf16) makes
// every value exact and normal, so the mma and the group scale see plain e2m1 values.
template <class T>
struct E2m1Bits;
template <>
struct E2m1Bits<__half> {  // 5 exponent bits: eem at bits 11..9
  static constexpr int kShift = 3;
  static constexpr uint32_t kMask = 0x0e000e00u, kRebias = 0x74007400u;  // 2^14
};
template <>
struct E2m1Bits<__nv_bfloat16> {  // 8 exponent bits: eem at bits 8..6
  static constexpr int kShift = 6;
  static constexpr uint32_t kMask = 0x01c001c0u, kRebias = 0x7e807e80u;  // 2^126
};

template <class T>
struct Dequant<T, WeightElement::e2m1> {
  // Register i's codes are nibbles i and 4 + i (layout.hpp); moved to bits 15..12 and 31..28.
  template <int kRegister>
  __device__ static __forceinline__ uint32_t pair(uint32_t w) {
    const uint32_t top = w << (12 - 4 * kRegister);
    const uint32_t bits = (top & 0x80008000u) | ((top >> E2m1Bits<T>::kShift) & E2m1Bits<T>::kMask);
    return MmaType<T>::mul2(bits, E2m1Bits<T>::kRebias);
  }
  __device__ static __forceinline__ void step(const uint32_t* words, const ZeroOffsets&,
                                              uint32_t a[4]) {
    a[0] = pair<0>(words[0]);
    a[1] = pair<1>(words[0]);
    a[2] = pair<2>(words[0]);
    a[3] = pair<3>(words[0]);
  }
};

// v rounded to T, in both halves of a register.
template <class T>
__device__ __forceinline__ uint32_t splat(float v) {
  const T h = MmaType<T>::from_float(v);
  return uint32_t(*reinterpret_cast<const uint16_t*>(&h)) * 0x10001u;
}

// A (lo = row g, hi = row g + 8) pair of 16-bit scales -> fp32.
__device__ __forceinline__ float2 unpack_scales(uint32_t pair, bool bf16) {
  if (bf16) return make_float2(__uint_as_float(pair << 16), __uint_as_float(pair & 0xffff0000u));
  return __half22float2(*reinterpret_cast<const __half2*>(&pair));
}

}  // namespace qmoe::cuda_mma
