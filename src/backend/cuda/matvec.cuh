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
  // Unrolled so that several iterations' loads are in flight at once: rows are
  // short (a few KB), so latency, not bandwidth, bounds a lone warp.
#pragma unroll 4
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

// Lane-partial dots of two rows with the same single activation row x (MoE gate
// and up), in one loop so both rows' loads are in flight together.
template <DType T>
__device__ __forceinline__ void row_dot2_partial(const uint8_t* row_a, const uint8_t* row_b, int in, const float* x,
                                                 float& acc_a, float& acc_b) {
  const int lane = threadIdx.x % 32;
#pragma unroll 4
  for (int e0 = lane * 8; e0 < in; e0 += 256) {
    float a[8], b[8];
    Dequant<T>::load8(row_a, e0, a);
    Dequant<T>::load8(row_b, e0, b);
    const float4* xp = reinterpret_cast<const float4*>(x + e0);
    const float4 x0 = __ldg(xp), x1 = __ldg(xp + 1);
    acc_a += a[0] * x0.x + a[1] * x0.y + a[2] * x0.z + a[3] * x0.w + a[4] * x1.x + a[5] * x1.y + a[6] * x1.z + a[7] * x1.w;
    acc_b += b[0] * x0.x + b[1] * x0.y + b[2] * x0.z + b[3] * x0.w + b[4] * x1.x + b[5] * x1.y + b[6] * x1.z + b[7] * x1.w;
  }
}

}  // namespace zinc::cuda
