// Activations as 16-bit integers for the decode dot products. Each run of 32
// elements becomes q = round(x / s) with s = max|x| / kQ16Max, kept as two planes of
// signed bytes, hi = (q + 128) >> 8 and lo = q - 256·hi, so x ≈ s·(256·hi + lo) to
// within 1/65278 of the run's largest element (f16 keeps 1/2048 of each element;
// llama.cpp's int8 activations 1/254 of the run's largest). A weight's integer codes
// then meet four elements per DP4A (twice: hi and lo) instead of a conversion and an
// FMA per element: Σ c·x ≈ s·(256·Σ c·hi + Σ c·lo), exact in int32 for 32 codes
// below 2^10.
#pragma once

#include "backend/cuda/cuda_common.cuh"

namespace zinc::cuda {

// The largest |q|: hi = (q + 128) >> 8 then stays within a signed byte.
inline constexpr float kQ16Max = 32639.0f;

struct Q16Words {
  uint32_t hi, lo;  // 4 elements' bytes, the first in the low byte
};

// 4 consecutive elements, inv = kQ16Max / (their run's max |x|). Adding 1.5·2^23 + 128
// leaves round(x·inv) + 128 in the low mantissa bits (|x·inv| <= kQ16Max), so the
// bytes are cut from the float's bits: byte 1 is hi, byte 0 is lo + 128.
__device__ __forceinline__ Q16Words q16_pack4(float4 v, float inv) {
  constexpr float kBias = 12582912.0f + 128.0f;
  const uint32_t b0 = __float_as_uint(fmaf(v.x, inv, kBias)), b1 = __float_as_uint(fmaf(v.y, inv, kBias));
  const uint32_t b2 = __float_as_uint(fmaf(v.z, inv, kBias)), b3 = __float_as_uint(fmaf(v.w, inv, kBias));
  const uint32_t t01 = __byte_perm(b0, b1, 0x5140), t23 = __byte_perm(b2, b3, 0x5140);  // lo0 lo1 hi0 hi1
  return {__byte_perm(t01, t23, 0x7632), __byte_perm(t01, t23, 0x5410) ^ 0x80808080u};
}

// One float4 per lane, a run per aligned group of 8 lanes (every lane of the warp
// takes part): the lane's words and its run's scale s. The run's max |x| is taken on
// the bits, so a NaN or infinity in the run makes s NaN or infinite and the dot
// products show it.
__device__ __forceinline__ Q16Words q16_quantize4(float4 v, float& scale) {
  const float amax = lanes_abs_max<8>(max(max(abs_bits(v.x), abs_bits(v.y)), max(abs_bits(v.z), abs_bits(v.w))));
  scale = amax / kQ16Max;
  return q16_pack4(v, amax > 0.0f ? kQ16Max / amax : 0.0f);
}

// Σ q of a lane's 4 elements (integer).
__device__ __forceinline__ int q16_sum4(Q16Words w) {
  return 256 * __dp4a(static_cast<int>(w.hi), 0x01010101, 0) + __dp4a(static_cast<int>(w.lo), 0x01010101, 0);
}

// Σ c·q over K words of 4 signed-byte codes each against x's words: 256·Σ c·hi + Σ c·lo.
template <int K>
__device__ __forceinline__ int q16_dot(const uint32_t (&c)[K], const uint32_t (&hi)[K], const uint32_t (&lo)[K]) {
  int h = 0, l = 0;
#pragma unroll
  for (int i = 0; i < K; ++i) {
    h = __dp4a(static_cast<int>(c[i]), static_cast<int>(hi[i]), h);
    l = __dp4a(static_cast<int>(c[i]), static_cast<int>(lo[i]), l);
  }
  return 256 * h + l;
}

}  // namespace zinc::cuda
