// Weight-row dot products for few tokens: one warp streams a row of quantized
// blocks (each lane dequantizes 8 consecutive elements per 256-element stride, so a
// warp reads whole blocks, coalesced) and multiplies it with up to 8 activation
// rows, which stay in L1/L2 since every warp of the grid reads them.
#pragma once

#include "backend/cuda/dequant.cuh"

namespace zinc::cuda {

inline constexpr int kMaxDotTokens = 8;

// acc[t] (lane-partial) += row · x_t for t < n; x_t = x + t * x_stride, length `in`.
// All weight loads of a pass (kBatch strides of 256 elements, the whole row of most
// projections) are issued before any arithmetic, then each token's activation loads:
// a lone warp's row is latency-bound, so the loads must be in flight together.
template <DType T>
__device__ __forceinline__ void row_dot_partial(const uint8_t* row, int in, const float* x, int64_t x_stride,
                                                int n, float (&acc)[kMaxDotTokens]) {
  constexpr int kBatch = 8;
  const int lane = threadIdx.x % 32;
  for (int base = lane * 8; base < in; base += 256 * kBatch) {
    float w[kBatch][8];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      if (base + 256 * b < in) {
        Dequant<T>::load8(row, base + 256 * b, w[b]);
      } else {
#pragma unroll
        for (int i = 0; i < 8; ++i) w[b][i] = 0.0f;
      }
    }
#pragma unroll
    for (int t = 0; t < kMaxDotTokens; ++t) {
      if (t < n) {
        float4 xa[kBatch], xb[kBatch];
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
          const int e0 = base + 256 * b;
          const float4* xp = reinterpret_cast<const float4*>(x + t * x_stride + e0);
          xa[b] = e0 < in ? __ldg(xp) : make_float4(0, 0, 0, 0);
          xb[b] = e0 < in ? __ldg(xp + 1) : make_float4(0, 0, 0, 0);
        }
#pragma unroll
        for (int b = 0; b < kBatch; ++b)
          acc[t] += w[b][0] * xa[b].x + w[b][1] * xa[b].y + w[b][2] * xa[b].z + w[b][3] * xa[b].w +
                    w[b][4] * xb[b].x + w[b][5] * xb[b].y + w[b][6] * xb[b].z + w[b][7] * xb[b].w;
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
