// matmul_tiled: y = x·wᵀ for many tokens on the tensor cores. A block computes a
// 64 (weight rows) x 64 (tokens) tile: each k-step dequantizes a 64x32 weight tile
// and loads a 64x32 activation tile into shared memory (f32), and 4 warps multiply
// them with WMMA tf32 in the "3xTF32" split (a = hi + lo; hi·hi + hi·lo + lo·hi),
// which keeps f32-level accuracy: the weights are read once per 64 tokens, so the
// extra tensor-core work is cheap next to the dequantization.
#include <mma.h>

#include "backend/cuda/dequant.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

using namespace nvcuda;

constexpr int kTileRows = 64, kTileTokens = 64, kTileK = 32;
constexpr int kPad = 4;  // row stride 36 floats: fragment rows land in different banks, 32-byte aligned
constexpr int kThreads = 128;

struct TiledParams {
  const uint8_t* w;  // {in, out}
  size_t row_bytes;
  const float* x;  // {in, n}
  float* y;        // {out, n}
  int in, out, n;
};

union TiledShared {
  struct {
    float w[kTileRows][kTileK + kPad];
    float x[kTileTokens][kTileK + kPad];
  } in;
  float y[kTileTokens][kTileRows + kPad];  // the output tile, token-major like y
};

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;

template <class Frag>
__device__ void split_tf32(Frag& hi, Frag& lo) {
#pragma unroll
  for (int i = 0; i < hi.num_elements; ++i) {
    const float v = hi.x[i];
    hi.x[i] = wmma::__float_to_tf32(v);
    lo.x[i] = wmma::__float_to_tf32(v - hi.x[i]);
  }
}

template <DType T>
__global__ void __launch_bounds__(kThreads) matmul_tiled_kernel(const __grid_constant__ TiledParams p) {
  __shared__ __align__(128) TiledShared sh;
  const int row0 = blockIdx.x * kTileRows, tok0 = blockIdx.y * kTileTokens;
  const int warp = threadIdx.x / 32, wr = (warp / 2) * 32, wt = (warp % 2) * 32;
  FragC acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  for (int k0 = 0; k0 < p.in; k0 += kTileK) {
    // Weight tile: 64 rows x 4 groups of 8, two groups per thread.
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int idx = threadIdx.x + i * kThreads, r = idx / 4, e = k0 + (idx % 4) * 8;
      float v[8] = {};
      if (row0 + r < p.out && e < p.in) Dequant<T>::load8(p.w + static_cast<size_t>(row0 + r) * p.row_bytes, e, v);
#pragma unroll
      for (int j = 0; j < 8; ++j) sh.in.w[r][(idx % 4) * 8 + j] = v[j];
    }
    // Activation tile: 64 tokens x 8 float4, four per thread.
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int idx = threadIdx.x + i * kThreads, t = idx / 8, e = k0 + (idx % 8) * 4;
      float4 v = make_float4(0, 0, 0, 0);
      if (tok0 + t < p.n && e < p.in) v = __ldg(reinterpret_cast<const float4*>(p.x + static_cast<int64_t>(tok0 + t) * p.in + e));
      float* d = &sh.in.x[t][(idx % 8) * 4];
      d[0] = v.x, d[1] = v.y, d[2] = v.z, d[3] = v.w;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTileK; kk += 8) {
      FragA a_hi[2], a_lo[2];
      FragB b_hi[2], b_lo[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        wmma::load_matrix_sync(a_hi[i], &sh.in.w[wr + 16 * i][kk], kTileK + kPad);
        split_tf32(a_hi[i], a_lo[i]);
        wmma::load_matrix_sync(b_hi[i], &sh.in.x[wt + 16 * i][kk], kTileK + kPad);
        split_tf32(b_hi[i], b_lo[i]);
      }
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          wmma::mma_sync(acc[i][j], a_lo[i], b_hi[j], acc[i][j]);
          wmma::mma_sync(acc[i][j], a_hi[i], b_lo[j], acc[i][j]);
          wmma::mma_sync(acc[i][j], a_hi[i], b_hi[j], acc[i][j]);
        }
    }
    __syncthreads();
  }
  // C(row, token) stored column-major = token-major, as y is laid out.
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(&sh.y[wt + 16 * j][wr + 16 * i], acc[i][j], kTileRows + kPad, wmma::mem_col_major);
  __syncthreads();
  for (int idx = threadIdx.x; idx < kTileRows * kTileTokens; idx += kThreads) {
    const int t = idx / kTileRows, r = idx % kTileRows;
    if (tok0 + t < p.n && row0 + r < p.out) p.y[static_cast<int64_t>(tok0 + t) * p.out + row0 + r] = sh.y[t][r];
  }
}

}  // namespace

void matmul_tiled(const Tensor& w, const Tensor& x, const Tensor& y, cudaStream_t s) {
  TiledParams p{static_cast<const uint8_t*>(w.data), w.row_bytes(), x.as<const float>(), y.as<float>(),
                static_cast<int>(w.ne[0]), static_cast<int>(w.rows()), static_cast<int>(x.rows())};
  const dim3 grid(ceil_div(p.out, kTileRows), ceil_div(p.n, kTileTokens));
  dispatch_weight_type(w.type, [&](auto type) {
    matmul_tiled_kernel<decltype(type)::value><<<grid, kThreads, 0, s>>>(p);
  });
  ZINC_CUDA_LAUNCHED("matmul_tiled");
}

}  // namespace zinc::cuda
