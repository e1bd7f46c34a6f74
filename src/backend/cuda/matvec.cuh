// Weight-row dot products read straight from global memory, for the rows matvec.cu
// cannot stage in shared memory (F32 rows, rows that are not 16-byte aligned or
// not whole 256-element groups): one warp computes its share of R weight rows at
// once against up to N activation rows. A lone warp's row is latency-bound, so a
// pass issues all of its weight loads before any arithmetic.
#pragma once

#include "backend/cuda/dequant.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {

inline constexpr int kMaxDotTokens = static_cast<int>(kMatvecMaxTokens);

// Bytes of 256 consecutive elements (a "group": whole blocks of every type) of type T.
template <DType T>
constexpr int bytes_per_256() {
  return Dequant<T>::kBlockBytes * (256 / Dequant<T>::kBlockElems);
}

// True when rows of `in` elements (row_bytes each, from base) can be staged by
// matvec.cu: whole groups in 16-byte aligned rows, or rows of a type with 32-element
// blocks of up to 8 chunks (16384 elements: a warp per chunk), copied from the 16-byte
// boundary below them (Gemma 3 270M's 640-wide rows are 680 bytes of Q8_0,
// gpt-oss-20b's 2880-wide ones 3060).
inline bool stageable(const void* base, size_t row_bytes, int64_t in, int64_t block_elems) {
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0) return false;
  return (row_bytes % 16 == 0 && in % 256 == 0) || (block_elems == 32 && in % 32 == 0 && in <= 16384);
}

// Activations a kernel formed in its shared memory (matvec.cu's fused norm), read with
// plain loads where a `const float*` is read through the read-only data path.
struct SharedFloats {
  const float* p;
  __device__ SharedFloats operator+(int64_t i) const { return {p + i}; }
};

__device__ __forceinline__ float4 load_float4(const float* p) { return __ldg(reinterpret_cast<const float4*>(p)); }
__device__ __forceinline__ float4 load_float4(SharedFloats s) { return *reinterpret_cast<const float4*>(s.p); }

template <class X>
__device__ __forceinline__ void load_floats8(X p, float (&v)[8]) {
  const float4 a = load_float4(p), b = load_float4(p + 4);
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

// acc[r][t] (lane partials) += the part of row r · x_t (x + t · stride) in this
// warp's groups g_first, g_first + g_step, ... (a row may be split over g_step
// warps), kGroups groups per pass, t < n. N (<= kMaxDotTokens) bounds n at compile
// time: token loops are unrolled, and a token past n still costs its predicated-off
// instructions.
template <DType T, int R, int kGroups, int N, class X = const float*>
__device__ __forceinline__ void rows_dot(const uint8_t* const (&rows)[R], int in, int g_first, int g_step, X x,
                                         int64_t stride, int n, float (&acc)[R][kMaxDotTokens]) {
  const int lane = threadIdx.x % 32, n_groups = (in + 255) / 256;
  for (int k0 = 0; g_first + k0 * g_step < n_groups; k0 += kGroups) {
    float w[R][kGroups][8];
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const int e = (g_first + (k0 + k) * g_step) * 256 + lane * 8;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (e < in) {
          Dequant<T>::load8(rows[r], e, w[r][k]);
        } else {
#pragma unroll
          for (int i = 0; i < 8; ++i) w[r][k][i] = 0.0f;
        }
      }
    }
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const int e = (g_first + (k0 + k) * g_step) * 256 + lane * 8;
      if (e < in) {
#pragma unroll
        for (int t = 0; t < N; ++t) {
          if (t < n) {
            float xv[8];
            load_floats8(x + t * stride + e, xv);
#pragma unroll
            for (int r = 0; r < R; ++r) {
              float s = 0;
#pragma unroll
              for (int i = 0; i < 8; ++i) s += w[r][k][i] * xv[i];
              acc[r][t] += s;
            }
          }
        }
      }
    }
  }
}

}  // namespace zinc::cuda
