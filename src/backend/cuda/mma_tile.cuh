// The tensor-core tile product shared by the prefill kernels (matmul_tiled.cu,
// moe_grouped.cu): a block of 8 warps computes 128 weight rows x BN tokens. Each
// k-step of 64 dequantizes the weight tile (any block type, through Dequant::load8)
// to bf16 in shared memory, loads the token tile as bf16, and multiplies them with
// mma.sync m16n8k16 (bf16 in, f32 accumulate). The weights are read once per BN
// tokens; the bf16 rounding of both operands is the price (about 1e-3 relative).
// With Split (F32 weights: routers, gates, whose top-k choice is sensitive to
// rounding) each operand is a sum hi + lo of two bf16 values and the product takes
// hi·hi + hi·lo + lo·hi, which keeps about 16 bits of mantissa.
//
// Warp w owns two 16-row slices of the tile, rows [16v, 16v+16) and [64+16v, 80+16v)
// with v = w % 4, and half of the BN tokens (w / 4). With gate rows in the first 64
// and up rows in the last 64, a gate value and its up value land in the same thread
// (the fused SwiGLU epilogue).
#pragma once

#include <cuda_bf16.h>

#include "backend/cuda/dequant.cuh"
#include "backend/cuda/mma_f16.cuh"

namespace zinc::cuda::mma {

constexpr int kThreads = 256;
constexpr int kRows = 128;         // weight rows per tile, two halves of 64
constexpr int kHalf = 64;
constexpr int kK = 64;             // k per step
constexpr int kStride = kK + 8;    // bf16 per shared row: 144 bytes, so ldmatrix rows hit distinct banks
constexpr int kGroups = kK / 8;    // 8-element groups per row and step
constexpr int kRowsPerPass = kThreads / kGroups;  // 32

template <int BN, bool Split>
struct Smem {
  static constexpr int kParts = Split ? 2 : 1;  // hi, lo
  __nv_bfloat16 a[kParts][kRows][kStride];
  __nv_bfloat16 b[kParts][BN][kStride];
};

// Two bf16 in one word, `first` in the low half (the element with the lower index).
__device__ __forceinline__ uint32_t pack_bf16(float first, float second) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(first, second);
  return *reinterpret_cast<const uint32_t*>(&v);
}
__device__ __forceinline__ uint4 pack8(const float* v) {
  return make_uint4(pack_bf16(v[0], v[1]), pack_bf16(v[2], v[3]), pack_bf16(v[4], v[5]), pack_bf16(v[6], v[7]));
}
// v = hi + lo: hi its bf16 rounding, lo the bf16 rounding of the rest (v is overwritten with the rest).
__device__ __forceinline__ void split8(float* v, uint4& hi, uint4& lo) {
  hi = pack8(v);
  const uint32_t h[4] = {hi.x, hi.y, hi.z, hi.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[2 * i] -= __uint_as_float(h[i] << 16);
    v[2 * i + 1] -= __uint_as_float(h[i] & 0xffff0000u);
  }
  lo = pack8(v);
}

__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The weight rows of a tile: half h's row i is base[h] + i * row_bytes, valid for i < valid[h].
struct ARows {
  const uint8_t* base[2];
  size_t row_bytes;
  int valid[2];
};

// Token rows of a tile, one pointer per row this thread loads (null: padding).
template <class X, int BN>
struct BRows {
  const X* row[BN / kRowsPerPass];
};

// 8 elements [e, e + 8) of a token row as bf16 hi (and lo with Split); zeros past k_len.
template <bool Split>
__device__ __forceinline__ void load_x8(const float* row, int e, int k_len, uint4& hi, uint4& lo) {
  float v[8] = {};
  if (row && e < k_len) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(row + e));
    const float4 b = __ldg(reinterpret_cast<const float4*>(row + e + 4));
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  }
  if constexpr (Split) split8(v, hi, lo);
  else hi = pack8(v);
}
template <bool Split>
__device__ __forceinline__ void load_x8(const __nv_bfloat16* row, int e, int k_len, uint4& hi, uint4&) {
  static_assert(!Split, "bf16 token rows have no low part");
  hi = row && e < k_len ? __ldg(reinterpret_cast<const uint4*>(row + e)) : make_uint4(0, 0, 0, 0);
}

// Row (within the tile) of the i-th weight group this thread loads, and of its i-th token group.
__device__ __forceinline__ int load_row(int i) { return static_cast<int>(threadIdx.x) / kGroups + kRowsPerPass * i; }

// acc[s][j][*]: slice s of this warp's rows, its token n-tile j, in the mma C layout
// (see acc_row / acc_token).
template <DType T, int BN, bool Split, class X>
__device__ __forceinline__ void tile_product(Smem<BN, Split>& sh, const ARows& a, const BRows<X, BN>& b, int k_len,
                                             float (&acc)[2][BN / 16][4]) {
  constexpr int kAPer = kRows / kRowsPerPass, kBPer = BN / kRowsPerPass, kParts = Split ? 2 : 1;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = threadIdx.x % kGroups;
  const int slice = 16 * (warp % 4), tok = (warp / 4) * (BN / 2);
#pragma unroll
  for (int s = 0; s < 2; ++s)
#pragma unroll
    for (int j = 0; j < BN / 16; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[s][j][i] = 0.0f;

  const uint8_t* arow[kAPer];
#pragma unroll
  for (int i = 0; i < kAPer; ++i) {
    const int h = i / (kHalf / kRowsPerPass), ri = load_row(i) - h * kHalf;  // h known at compile time
    arow[i] = ri < a.valid[h] ? a.base[h] + static_cast<size_t>(ri) * a.row_bytes : nullptr;
  }

  for (int k0 = 0; k0 < k_len; k0 += kK) {
    const int e = k0 + 8 * g;
    uint4 av[kParts][kAPer], bv[kParts][kBPer];
#pragma unroll
    for (int i = 0; i < kAPer; ++i) {
      float v[8] = {};
      if (arow[i] && e < k_len) Dequant<T>::load8(arow[i], e, v);
      if constexpr (Split) split8(v, av[0][i], av[kParts - 1][i]);
      else av[0][i] = pack8(v);
    }
#pragma unroll
    for (int i = 0; i < kBPer; ++i) load_x8<Split>(b.row[i], e, k_len, bv[0][i], bv[kParts - 1][i]);
    __syncthreads();  // the previous step's fragments are read
#pragma unroll
    for (int p = 0; p < kParts; ++p) {
#pragma unroll
      for (int i = 0; i < kAPer; ++i) *reinterpret_cast<uint4*>(&sh.a[p][load_row(i)][8 * g]) = av[p][i];
#pragma unroll
      for (int i = 0; i < kBPer; ++i) *reinterpret_cast<uint4*>(&sh.b[p][load_row(i)][8 * g]) = bv[p][i];
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kK; kk += 16) {
      uint32_t af[kParts][2][4];
#pragma unroll
      for (int p = 0; p < kParts; ++p)
#pragma unroll
        for (int s = 0; s < 2; ++s)
          ldmatrix_x4(af[p][s], &sh.a[p][s * kHalf + slice + lane % 16][kk + (lane / 16) * 8]);
#pragma unroll
      for (int jb = 0; jb < BN / 32; ++jb) {
        uint32_t bf[kParts][4];  // tokens tok + 16jb..: b0, b1 of n-tile 2jb, then of 2jb+1
#pragma unroll
        for (int p = 0; p < kParts; ++p)
          ldmatrix_x4(bf[p], &sh.b[p][tok + 16 * jb + (lane & 7) + ((lane >> 4) << 3)][kk + ((lane >> 3) & 1) * 8]);
#pragma unroll
        for (int s = 0; s < 2; ++s) {
          if constexpr (Split) {  // small terms first
            mma_bf16(acc[s][2 * jb], af[1][s], bf[0][0], bf[0][1]);
            mma_bf16(acc[s][2 * jb + 1], af[1][s], bf[0][2], bf[0][3]);
            mma_bf16(acc[s][2 * jb], af[0][s], bf[1][0], bf[1][1]);
            mma_bf16(acc[s][2 * jb + 1], af[0][s], bf[1][2], bf[1][3]);
          }
          mma_bf16(acc[s][2 * jb], af[0][s], bf[0][0], bf[0][1]);
          mma_bf16(acc[s][2 * jb + 1], af[0][s], bf[0][2], bf[0][3]);
        }
      }
    }
  }
}

// Tile coordinates of accumulator element acc[s][j][i] of this thread.
__device__ __forceinline__ int acc_row(int s, int i) {
  return s * kHalf + 16 * (static_cast<int>(threadIdx.x) / 32 % 4) + (threadIdx.x % 32) / 4 + 8 * (i / 2);
}
template <int BN>
__device__ __forceinline__ int acc_token(int j, int i) {
  return (static_cast<int>(threadIdx.x) / 128) * (BN / 2) + 8 * j + 2 * (threadIdx.x % 4) + (i % 2);
}

}  // namespace zinc::cuda::mma
