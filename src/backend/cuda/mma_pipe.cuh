// The pipelined tensor-core tile product of the prefill kernels (matmul_tiled.cu,
// moe_grouped.cu) for the weight types whose k-chunks are whole 8- or 16-byte
// pieces (Q8_0, Q4_K, Q5_K): a block of 8 warps computes 128 weight rows x BN tokens
// (bf16 token rows, f32 accumulate).
//
// The raw weight bytes of a k-chunk (one K-quant super-block of 256, four Q8_0
// blocks) and the token rows' chunk are copied to shared memory with cp.async,
// kStages chunks in flight, so global latency overlaps the math of earlier chunks;
// one barrier per chunk. Each warp owns 16 weight rows and every token of the tile,
// and each thread dequantizes its own mma.sync A fragments straight from the staged
// bytes: every weight element is dequantized once per block, with no bf16 weight
// tile and no barrier between the k-steps of 64.
//
// k order: a product sums over k, so any order works as long as weights and tokens
// agree. Thread t (lane % 4) takes elements [8t, 8t + 8) and [32 + 8t, 40 + 8t) of
// each 64-step (for K-quants the low and high nibbles of the same 8 bytes) and
// feeds the 16 values, 4 at a time, to the 4 mma of the step as its k-columns
// 2t, 2t + 1, 2t + 8, 2t + 9. Token rows are read in the same order.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dequant.cuh"
#include "backend/cuda/mma_tile.cuh"

namespace zinc::cuda::pipe {

constexpr int kThreads = 256;
constexpr int kRows = 128;  // 16 per warp
// Shared memory of one block, so that two blocks fit on an H100/H200 multiprocessor
// (228 KiB, 1 KiB reserved per block).
constexpr int kSmemBudget = 113 * 1024;

template <DType T>
inline constexpr bool kPipelined = T == DType::Q8_0 || T == DType::Q4_K || T == DType::Q5_K;

// Staged bytes per weight row: the chunk padded (by at most 32) to 32 or 96 mod 128,
// so the 4 rows of a half-warp's 8-byte loads fall on distinct banks.
constexpr int a_stride(int chunk_bytes) {
  const int s = (chunk_bytes + 15) / 16 * 16;
  for (int p = s; p <= s + 32; p += 16)
    if (p % 128 == 32 || p % 128 == 96) return p;
  return s;
}

template <DType T, int BN>
struct Config {
  static constexpr int kChunk = Dequant<T>::kBlockElems == 256 ? 256 : 128;  // k per stage
  static constexpr int kChunkBytes = kChunk / Dequant<T>::kBlockElems * Dequant<T>::kBlockBytes;
  static constexpr int kPiece = kChunkBytes % 16 == 0 ? 16 : 8;  // cp.async size for weights
  static constexpr int kAPieces = kChunkBytes / kPiece;          // per weight row
  static constexpr int kAStride = a_stride(kChunkBytes);
  static constexpr int kBPieces = kChunk / 8;                    // 16-byte pieces per token row
  static constexpr int kStageBytes = kRows * kAStride + BN * kChunk * 2;
  static constexpr int kPtrBytes = (kRows + BN) * 8;             // the tile's row pointers
  static constexpr int kStages = std::min(3, (kSmemBudget - kPtrBytes) / kStageBytes);
  static constexpr int kSmemBytes = kStages * kStageBytes + kPtrBytes;
  static_assert(kChunkBytes % 8 == 0 && kStages >= 2 && BN % 16 == 0);
};

// Whether rows of `row_bytes` at `data` with k elements can be staged in pieces.
template <DType T>
bool fits(const void* data, size_t row_bytes, int64_t k) {
  using C = Config<T, 16>;
  return k % C::kChunk == 0 && row_bytes % C::kPiece == 0 && reinterpret_cast<uintptr_t>(data) % C::kPiece == 0;
}

// Copies `Bytes` from global src to shared dst, or zeros when !valid (src then unread).
template <int Bytes>
__device__ __forceinline__ void cp_async(void* dst, const void* src, bool valid) {
  const auto d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  if constexpr (Bytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(valid ? 16 : 0));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(d), "l"(src), "n"(Bytes),
                 "r"(valid ? Bytes : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(Pending));
}

// Token row j's 8-element group c sits at group c ^ 4 in odd rows: the 8 lanes of a
// 16-byte load phase (two rows, 4 groups each) then hit 8 distinct bank quads.
__device__ __forceinline__ int b_group(int j, int c) { return c ^ ((j & 1) << 2); }

template <DType T, int BN>
struct Tile {
  using C = Config<T, BN>;
  uint8_t* smem;
  const uint8_t* const* arows;        // [kRows], null: zeros
  const __nv_bfloat16* const* brows;  // [BN], null: zeros
  const void* any;                    // a valid global address for the zero copies

  __device__ uint8_t* stage(int i) const { return smem + i * C::kStageBytes; }

  __device__ void issue(int chunk, uint8_t* st) const {
#pragma unroll
    for (int q = threadIdx.x; q < kRows * C::kAPieces; q += kThreads) {
      const int r = q / C::kAPieces, p = q % C::kAPieces;
      const uint8_t* src = arows[r];
      cp_async<C::kPiece>(st + r * C::kAStride + p * C::kPiece,
                          src ? src + static_cast<size_t>(chunk) * C::kChunkBytes + p * C::kPiece : any, src != nullptr);
    }
    auto* sb = reinterpret_cast<__nv_bfloat16*>(st + kRows * C::kAStride);
#pragma unroll
    for (int q = threadIdx.x; q < BN * C::kBPieces; q += kThreads) {
      const int j = q / C::kBPieces, p = q % C::kBPieces;
      const __nv_bfloat16* src = brows[j];
      cp_async<16>(sb + j * C::kChunk + 8 * b_group(j, p),
                   src ? src + static_cast<size_t>(chunk) * C::kChunk + 8 * p : any, src != nullptr);
    }
  }

  // acc[nt][i]: rows 16·warp + lane / 4 + 8·(i / 2), token 8·nt + 2·(lane % 4) + i % 2.
  __device__ void compute(const uint8_t* st, float (&acc)[BN / 8][4]) const {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
    const uint8_t* r0 = st + (16 * warp + g) * C::kAStride;
    const uint8_t* r1 = r0 + 8 * C::kAStride;
    const auto* sb = reinterpret_cast<const __nv_bfloat16*>(st + kRows * C::kAStride);
#pragma unroll
    for (int j = 0; j < C::kChunk / 64; ++j) {
      const int e0 = 64 * j + 8 * t, e1 = e0 + 32;
      float v[4][8];  // row g's two runs, then row g + 8's
      Dequant<T>::load8(r0, e0, v[0]);
      Dequant<T>::load8(r0, e1, v[1]);
      Dequant<T>::load8(r1, e0, v[2]);
      Dequant<T>::load8(r1, e1, v[3]);
      uint32_t a[4][4];
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const int run = m / 2, o = 4 * (m % 2);
        a[m][0] = mma::pack_bf16(v[run][o], v[run][o + 1]);
        a[m][1] = mma::pack_bf16(v[2 + run][o], v[2 + run][o + 1]);
        a[m][2] = mma::pack_bf16(v[run][o + 2], v[run][o + 3]);
        a[m][3] = mma::pack_bf16(v[2 + run][o + 2], v[2 + run][o + 3]);
      }
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt) {
        const int tok = 8 * nt + g;
        const __nv_bfloat16* row = sb + tok * C::kChunk;
        const uint4 b0 = *reinterpret_cast<const uint4*>(row + 8 * b_group(tok, e0 / 8));
        const uint4 b1 = *reinterpret_cast<const uint4*>(row + 8 * b_group(tok, e1 / 8));
        mma::mma_bf16(acc[nt], a[0], b0.x, b0.y);
        mma::mma_bf16(acc[nt], a[1], b0.z, b0.w);
        mma::mma_bf16(acc[nt], a[2], b1.x, b1.y);
        mma::mma_bf16(acc[nt], a[3], b1.z, b1.w);
      }
    }
  }
};

// The tile product over k elements: a_row(r) gives weight row r of the tile (r <
// kRows) and b_row(j) token row j (j < BN), null for padding; `any` is any valid
// global address. smem holds Config<T, BN>::kSmemBytes (dynamic shared memory).
template <DType T, int BN, class ARow, class BRow>
__device__ __forceinline__ void product(uint8_t* smem, ARow a_row, BRow b_row, const void* any, int k,
                                        float (&acc)[BN / 8][4]) {
  using C = Config<T, BN>;
  auto** arows = reinterpret_cast<const uint8_t**>(smem + C::kStages * C::kStageBytes);
  auto** brows = reinterpret_cast<const __nv_bfloat16**>(arows + kRows);
  for (int r = threadIdx.x; r < kRows; r += kThreads) arows[r] = a_row(r);
  for (int j = threadIdx.x; j < BN; j += kThreads) brows[j] = b_row(j);
#pragma unroll
  for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[nt][i] = 0.0f;
  __syncthreads();
  const Tile<T, BN> tile{smem, arows, brows, any};
  const int chunks = k / C::kChunk;
#pragma unroll
  for (int s = 0; s < C::kStages - 1; ++s) {
    if (s < chunks) tile.issue(s, tile.stage(s));
    cp_async_commit();
  }
  for (int c = 0; c < chunks; ++c) {
    cp_async_wait<C::kStages - 2>();
    __syncthreads();  // chunk c is in for every thread; every thread is done with chunk c - 1's stage
    const int next = c + C::kStages - 1;
    if (next < chunks) tile.issue(next, tile.stage(next % C::kStages));
    cp_async_commit();
    tile.compute(tile.stage(c % C::kStages), acc);
  }
}

// Tile coordinates of acc[nt][i] (see Tile::compute).
__device__ __forceinline__ int acc_row(int i) {
  return 16 * (static_cast<int>(threadIdx.x) / 32) + (threadIdx.x % 32) / 4 + 8 * (i / 2);
}
__device__ __forceinline__ int acc_token(int nt, int i) { return 8 * nt + 2 * (threadIdx.x % 4) + i % 2; }

// Raises the dynamic shared memory limit of `Kernel` to `bytes`, once per kernel.
template <auto Kernel>
void allow_smem(int bytes) {
  static const bool done = [&] {
    ZINC_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    return true;
  }();
  (void)done;
}

}  // namespace zinc::cuda::pipe

namespace zinc::cuda {
// y = x rounded to bf16; count a multiple of 8 (matmul_tiled.cu).
void to_bf16(const float* x, __nv_bfloat16* y, int64_t count, cudaStream_t s);
}  // namespace zinc::cuda
