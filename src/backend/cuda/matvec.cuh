// Weight-row dot products for few tokens (decode): one warp computes its share of R
// weight rows at once against up to 8 activation rows.
//
// A lone warp's row is latency-bound, so a pass issues all of its weight loads
// before any arithmetic. Rows that are 16-byte aligned (most: a row of 256-element
// groups usually is) are copied a few groups at a time into the warp's slice of
// shared memory with 16-byte streaming loads, then dequantized from there: few load
// instructions per byte, whatever the block format's own alignment (a 34-byte Q8_0
// block is only 2-byte aligned). Other rows are dequantized straight from global
// memory. Activations are read through the X policy (plain rows, rows per weight
// row, or silu(g)·u on the fly), cached in L1 since every warp reads them.
#pragma once

#include "backend/cuda/dequant.cuh"

namespace zinc::cuda {

inline constexpr int kMaxDotTokens = 8;

// Bytes of 256 consecutive elements (a "group": whole blocks of every type) of type T.
template <DType T>
constexpr int bytes_per_256() {
  return Dequant<T>::kBlockBytes * (256 / Dequant<T>::kBlockElems);
}
// 16-byte vectors of shared memory per staged group: its bytes plus the misalignment
// of its start (a group of 210-byte Q6_K blocks starts anywhere on an even byte).
template <DType T>
constexpr int group_slot_vecs() {
  return bytes_per_256<T>() / 16 + 2;
}
// Shared memory for rows_dot: R rows of kGroups staged groups per warp.
template <DType T, int R, int kGroups>
constexpr int stage_vecs() {
  return T == DType::F32 ? 1 : R * kGroups * group_slot_vecs<T>();
}

// True when rows of `in` elements and row_bytes starting at base can be staged:
// whole groups, 16-byte aligned rows.
inline bool stageable(const void* base, size_t row_bytes, int64_t in) {
  return (reinterpret_cast<uintptr_t>(base) | row_bytes) % 16 == 0 && in % 256 == 0;
}

__device__ __forceinline__ void load_floats8(const float* p, float (&v)[8]) {
  const float4 a = __ldg(reinterpret_cast<const float4*>(p)), b = __ldg(reinterpret_cast<const float4*>(p) + 1);
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

// Activations: token t at x + t * stride, the same for every weight row.
struct DenseX {
  const float* x;
  int64_t stride;
  __device__ void load8(int, int t, int e, float (&v)[8]) const { load_floats8(x + t * stride + e, v); }
};
// One activation row (one token) per weight row r.
template <int R>
struct PerRowX {
  const float* x[R];
  __device__ void load8(int r, int, int e, float (&v)[8]) const { load_floats8(x[r] + e, v); }
};
// silu(g) · u formed on the fly, token t at g/u + t * stride.
struct SwigluX {
  const float* g;
  const float* u;
  int64_t stride;
  __device__ void load8(int, int t, int e, float (&v)[8]) const {
    float a[8], b[8];
    load_floats8(g + t * stride + e, a);
    load_floats8(u + t * stride + e, b);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = silu(a[i]) * b[i];
  }
};

// acc[r][t] (lane partials) += the part of row r · x(r, t) in this warp's groups
// g_first, g_first + g_step, ... (a row may be split over g_step warps), t < n.
// Groups go kGroups at a time; staged, all of their bytes are first copied into
// `stage` (stage_vecs<T, R, kGroups>() vectors for this warp) with 16-byte loads.
// N (<= kMaxDotTokens) bounds n at compile time: token loops are unrolled, and a
// token past n still costs its predicated-off instructions.
template <DType T, int R, int kGroups, bool kStaged, class X, int N = kMaxDotTokens>
__device__ __forceinline__ void rows_dot(const uint8_t* const (&rows)[R], int in, int g_first, int g_step, const X& x,
                                         int n, float (&acc)[R][kMaxDotTokens], uint4* stage) {
  constexpr int kGB = bytes_per_256<T>(), kSlot = group_slot_vecs<T>();
  constexpr int kVecsPerLane = (kGroups * kSlot + 31) / 32;
  const int lane = threadIdx.x % 32, n_groups = (in + 255) / 256;
  for (int k0 = 0; g_first + k0 * g_step < n_groups; k0 += kGroups) {
    const uint8_t* src[R][kStaged ? kGroups : 1];
    if constexpr (kStaged) {
      uint4 buf[R][kVecsPerLane];
#pragma unroll
      for (int i = 0; i < kVecsPerLane; ++i) {
        const int v = lane + 32 * i, k = v / kSlot, w = v % kSlot, G = g_first + (k0 + k) * g_step;
        const int first = G * kGB / 16, count = ((G + 1) * kGB + 15) / 16 - first;
        if (k < kGroups && G < n_groups && w < count) {
#pragma unroll
          for (int r = 0; r < R; ++r) buf[r][i] = __ldcs(reinterpret_cast<const uint4*>(rows[r]) + first + w);
        }
      }
#pragma unroll
      for (int i = 0; i < kVecsPerLane; ++i) {
        const int v = lane + 32 * i;
        if (v < kGroups * kSlot) {
#pragma unroll
          for (int r = 0; r < R; ++r) stage[r * kGroups * kSlot + v] = buf[r][i];
        }
      }
      __syncwarp();
#pragma unroll
      for (int k = 0; k < kGroups; ++k) {
        const int G = g_first + (k0 + k) * g_step;
#pragma unroll
        for (int r = 0; r < R; ++r)
          src[r][k] = reinterpret_cast<const uint8_t*>(stage + (r * kGroups + k) * kSlot) + G * kGB % 16;
      }
    }
    // Staged rows are dequantized group by group (shared memory is close); rows read
    // from global memory get all of a pass's loads issued first.
    float w[R][kStaged ? 1 : kGroups][8];
    if constexpr (!kStaged) {
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
    }
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const int G = g_first + (k0 + k) * g_step, e = G * 256 + lane * 8;
      if (e < in) {
        if constexpr (kStaged) {
#pragma unroll
          for (int r = 0; r < R; ++r) Dequant<T>::load8(src[r][k], lane * 8, w[r][0]);  // a group holds whole blocks
        }
#pragma unroll
        for (int t = 0; t < N; ++t) {
          if (t < n) {
#pragma unroll
            for (int r = 0; r < R; ++r) {
              float xv[8];
              x.load8(r, t, e, xv);
              const float* wr = w[r][kStaged ? 0 : k];
              float s = 0;
#pragma unroll
              for (int i = 0; i < 8; ++i) s += wr[i] * xv[i];
              acc[r][t] += s;
            }
          }
        }
      }
    }
    if constexpr (kStaged) __syncwarp();  // the next pass overwrites the stage
  }
}

// rows_dot through shared memory when the rows allow it (`staged`, from
// stageable()); F32 rows are always read directly (their loads are 16 bytes).
template <DType T, int R, int kGroups, class X>
__device__ __forceinline__ void rows_dot_auto(bool staged, const uint8_t* const (&rows)[R], int in, int g_first,
                                              int g_step, const X& x, int n, float (&acc)[R][kMaxDotTokens],
                                              uint4* stage) {
  if constexpr (T != DType::F32) {
    if (staged) {
      rows_dot<T, R, kGroups, true>(rows, in, g_first, g_step, x, n, acc, stage);
      return;
    }
  }
  rows_dot<T, R, (R < 8 ? 8 / R : 1), false>(rows, in, g_first, g_step, x, n, acc, stage);  // 8 rows' groups in flight
}

}  // namespace zinc::cuda
