// matmul_tiled: y = x·wᵀ for many tokens on the tensor cores, through the tile
// product of mma_tile.cuh: 128 weight rows x 64 tokens per block (32 when that
// leaves too few blocks to fill the GPU), the weights dequantized to bf16 once per
// token tile. F32 weights (routers, small gates) take the split hi + lo form with
// 32-token tiles, which keeps f32-level accuracy.
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma_tile.cuh"

namespace zinc::cuda {
namespace {

struct TiledParams {
  const uint8_t* w;  // {in, out}
  size_t row_bytes;
  const float* x;  // {in, n}
  float* y;        // {out, n}
  int in, out, n;
};

template <DType T, int BN, bool Split>
__global__ void __launch_bounds__(mma::kThreads) matmul_mma_kernel(const __grid_constant__ TiledParams p) {
  __shared__ __align__(16) mma::Smem<BN, Split> sh;
  const int row0 = blockIdx.x * mma::kRows, tok0 = blockIdx.y * BN;
  const mma::ARows a{{p.w + static_cast<size_t>(row0) * p.row_bytes,
                      p.w + static_cast<size_t>(row0 + mma::kHalf) * p.row_bytes},
                     p.row_bytes,
                     {min(mma::kHalf, p.out - row0), min(mma::kHalf, p.out - row0 - mma::kHalf)}};
  mma::BRows<float, BN> b;
#pragma unroll
  for (int i = 0; i < BN / mma::kRowsPerPass; ++i) {
    const int t = tok0 + mma::load_row(i);
    b.row[i] = t < p.n ? p.x + static_cast<int64_t>(t) * p.in : nullptr;
  }
  float acc[2][BN / 16][4];
  mma::tile_product<T, BN, Split>(sh, a, b, p.in, acc);
#pragma unroll
  for (int s = 0; s < 2; ++s)
#pragma unroll
    for (int j = 0; j < BN / 16; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = row0 + mma::acc_row(s, i), t = tok0 + mma::acc_token<BN>(j, i);
        if (r < p.out && t < p.n) p.y[static_cast<int64_t>(t) * p.out + r] = acc[s][j][i];
      }
}

template <DType T, int BN, bool Split>
void launch(const TiledParams& p, cudaStream_t s) {
  matmul_mma_kernel<T, BN, Split><<<dim3(ceil_div(p.out, mma::kRows), ceil_div(p.n, BN)), mma::kThreads, 0, s>>>(p);
}

}  // namespace

void matmul_tiled(const Tensor& w, const Tensor& x, const Tensor& y, cudaStream_t s) {
  const TiledParams p{static_cast<const uint8_t*>(w.data), w.row_bytes(), x.as<const float>(), y.as<float>(),
                      static_cast<int>(w.ne[0]), static_cast<int>(w.rows()), static_cast<int>(x.rows())};
  // 64-token tiles unless that leaves fewer than about two blocks per multiprocessor.
  constexpr int64_t kWideTileMinBlocks = 256;
  const bool wide = static_cast<int64_t>(ceil_div(p.out, mma::kRows)) * ceil_div(p.n, 64) >= kWideTileMinBlocks;
  dispatch_weight_type(w.type, [&](auto type) {
    constexpr DType T = decltype(type)::value;
    if constexpr (T == DType::F32) launch<T, 32, true>(p, s);
    else if (wide) launch<T, 64, false>(p, s);
    else launch<T, 32, false>(p, s);
  });
  ZINC_CUDA_LAUNCHED("matmul_tiled");
}

}  // namespace zinc::cuda
