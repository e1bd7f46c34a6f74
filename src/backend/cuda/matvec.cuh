// Weight-row dot products for few tokens: one warp streams a row of quantized
// blocks (each lane dequantizes 8 consecutive elements per 256-element stride, so a
// warp reads whole blocks, coalesced) and multiplies it with up to 8 activation
// rows, which stay in L1/L2 since every warp of the grid reads them.
#pragma once

#include "backend/cuda/dequant.cuh"

namespace zinc::cuda {

inline constexpr int kMaxDotTokens = 8;

// acc[t] (lane-partial) += row · x_t for t < n; x_t = x + t * x_stride, length `in`.
template <DType T>
__device__ __forceinline__ void row_dot_partial(const uint8_t* row, int in, const float* x, int64_t x_stride,
                                                int n, float (&acc)[kMaxDotTokens]) {
  const int lane = threadIdx.x % 32;
#pragma unroll 2
  for (int e0 = lane * 8; e0 < in; e0 += 256) {
    float w[8];
    Dequant<T>::load8(row, e0, w);
#pragma unroll
    for (int t = 0; t < kMaxDotTokens; ++t) {
      if (t < n) {
        const float4* xp = reinterpret_cast<const float4*>(x + t * x_stride + e0);
        const float4 a = __ldg(xp), b = __ldg(xp + 1);
        acc[t] += w[0] * a.x + w[1] * a.y + w[2] * a.z + w[3] * a.w + w[4] * b.x + w[5] * b.y + w[6] * b.z +
                  w[7] * b.w;
      }
    }
  }
}

}  // namespace zinc::cuda
