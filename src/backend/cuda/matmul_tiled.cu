// y = x·wᵀ for many tokens on the tensor cores.
//
// matmul_batched: one launch over one or more weights of the same input (Q8_0,
// Q4_K or Q5_K, plus any F32 ones): x is rounded to bf16 once, each block takes
// 128 rows of one weight x 64 tokens through the pipelined tile product of
// mma_pipe.cuh; F32 weights (routers, small gates) take the split hi + lo form of
// mma_tile.cuh, which keeps f32-level accuracy.
//
// matmul_tiled: any weight type through mma_tile.cuh, 128 weight rows x 64 tokens
// per block (32 when that leaves too few blocks to fill the GPU), the weights
// dequantized to bf16 once per token tile; the fallback for the rest.
#include <vector>

#include "backend/cuda/kernels.h"
#include "backend/cuda/mma_pipe.cuh"
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

__global__ void to_bf16_kernel(const float* x, __nv_bfloat16* y, int64_t groups) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= groups) return;
  const float4 a = reinterpret_cast<const float4*>(x)[2 * i], b = reinterpret_cast<const float4*>(x)[2 * i + 1];
  reinterpret_cast<uint4*>(y)[i] = make_uint4(mma::pack_bf16(a.x, a.y), mma::pack_bf16(a.z, a.w),
                                              mma::pack_bf16(b.x, b.y), mma::pack_bf16(b.z, b.w));
}

constexpr int kManyTokens = 64;  // tokens per block
constexpr int kMaxMany = 8;      // weights per launch

struct ManyWeight {
  const uint8_t* w;  // {in, out}
  size_t row_bytes;
  float* y;  // {out, n}
  int out;
  int tile0;  // first row tile (blockIdx.x) of this weight
  bool split;  // F32: the split hi + lo tiles
};
struct ManyParams {
  ManyWeight w[kMaxMany];
  int count, in, n;
  const float* x;           // {in, n}
  const __nv_bfloat16* xb;  // x in bf16
};

// F32 weights: two 32-token halves of the split tile product.
__device__ void many_split(const ManyWeight& w, const ManyParams& p, int row0, int tok0, uint8_t* smem) {
  auto& sh = *reinterpret_cast<mma::Smem<32, true>*>(smem);
  const mma::ARows a{{w.w + static_cast<size_t>(row0) * w.row_bytes,
                      w.w + static_cast<size_t>(row0 + mma::kHalf) * w.row_bytes},
                     w.row_bytes,
                     {min(mma::kHalf, w.out - row0), min(mma::kHalf, w.out - row0 - mma::kHalf)}};
  for (int half = 0; half < kManyTokens / 32; ++half) {
    const int t0 = tok0 + 32 * half;
    mma::BRows<float, 32> b;
    b.row[0] = t0 + mma::load_row(0) < p.n ? p.x + static_cast<int64_t>(t0 + mma::load_row(0)) * p.in : nullptr;
    float acc[2][2][4];
    mma::tile_product<DType::F32, 32, true>(sh, a, b, p.in, acc);
#pragma unroll
    for (int s = 0; s < 2; ++s)
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int r = row0 + mma::acc_row(s, i), t = t0 + mma::acc_token<32>(j, i);
          if (r < w.out && t < p.n) w.y[static_cast<int64_t>(t) * w.out + r] = acc[s][j][i];
        }
  }
}

// grid (row tiles of all weights, token tiles): blocks of F32 weights take the split
// path, the others (type T) the pipelined one.
template <DType T>
__global__ void __launch_bounds__(pipe::kThreads, 2) matmul_many_kernel(const __grid_constant__ ManyParams p) {
  extern __shared__ __align__(16) uint8_t smem[];
  int wi = 0;
  while (wi + 1 < p.count && p.w[wi + 1].tile0 <= static_cast<int>(blockIdx.x)) ++wi;
  const ManyWeight& w = p.w[wi];
  const int row0 = (blockIdx.x - w.tile0) * pipe::kRows, tok0 = blockIdx.y * kManyTokens;
  if (w.split) {
    many_split(w, p, row0, tok0, smem);
    return;
  }
  float acc[kManyTokens / 8][4];
  pipe::product<T, kManyTokens>(
      smem,
      [&](int r) { return row0 + r < w.out ? w.w + static_cast<size_t>(row0 + r) * w.row_bytes : nullptr; },
      [&](int j) { return tok0 + j < p.n ? p.xb + static_cast<size_t>(tok0 + j) * p.in : nullptr; }, w.w, p.in, acc);
#pragma unroll
  for (int nt = 0; nt < kManyTokens / 8; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = row0 + pipe::acc_row(i), t = tok0 + pipe::acc_token(nt, i);
      if (r < w.out && t < p.n) w.y[static_cast<int64_t>(t) * w.out + r] = acc[nt][i];
    }
}

template <DType T>
void launch_many(const ManyParams& p, int row_tiles, cudaStream_t s) {
  constexpr int bytes = std::max<int>(pipe::Config<T, kManyTokens>::kSmemBytes, sizeof(mma::Smem<32, true>));
  pipe::allow_smem<matmul_many_kernel<T>>(bytes);
  matmul_many_kernel<T><<<dim3(row_tiles, ceil_div(p.n, kManyTokens)), pipe::kThreads, bytes, s>>>(p);
}

// The weights type of a pipelined launch (F32 ones join any), or F32 when there is none.
DType pipelined_type(std::span<const Tensor> w) {
  for (const Tensor& t : w)
    if (t.type != DType::F32) return t.type;
  return DType::F32;
}

bool pipelined(const Tensor& w, DType t) {
  switch (t) {
    case DType::Q8_0: return pipe::fits<DType::Q8_0>(w.data, w.row_bytes(), w.ne[0]);
    case DType::Q4_K: return pipe::fits<DType::Q4_K>(w.data, w.row_bytes(), w.ne[0]);
    case DType::Q5_K: return pipe::fits<DType::Q5_K>(w.data, w.row_bytes(), w.ne[0]);
    default: return false;
  }
}

}  // namespace

void to_bf16(const float* x, __nv_bfloat16* y, int64_t count, cudaStream_t s) {
  to_bf16_kernel<<<ceil_div(count / 8, 256), 256, 0, s>>>(x, y, count / 8);
  ZINC_CUDA_LAUNCHED("to_bf16");
}

size_t matmul_batched_scratch_bytes(const Tensor& x) { return static_cast<size_t>(x.n_elements()) * 2; }

void matmul_batched(std::span<const Tensor> w, const Tensor& x, std::span<const Tensor> y, void* scratch,
                    cudaStream_t s) {
  const DType t = pipelined_type(w);
  ManyParams p{};
  p.in = static_cast<int>(x.ne[0]), p.n = static_cast<int>(x.rows()), p.x = x.as<const float>();
  p.xb = static_cast<const __nv_bfloat16*>(scratch);
  int tiles = 0;
  std::vector<size_t> rest;  // weights for matmul_tiled
  for (size_t i = 0; i < w.size(); ++i) {
    const bool joins = t != DType::F32 && p.count < kMaxMany && (w[i].type == DType::F32 || w[i].type == t) &&
                       (w[i].type == DType::F32 || pipelined(w[i], t));
    if (!joins) {
      rest.push_back(i);
      continue;
    }
    const int out = static_cast<int>(w[i].rows());
    p.w[p.count++] = {static_cast<const uint8_t*>(w[i].data), w[i].row_bytes(), y[i].as<float>(), out, tiles,
                      w[i].type == DType::F32};
    tiles += ceil_div(out, pipe::kRows);
  }
  bool any_pipelined = false;
  for (int i = 0; i < p.count; ++i) any_pipelined |= !p.w[i].split;
  if (!any_pipelined) {  // nothing for the pipelined tiles: every weight its own launch
    for (size_t i = 0; i < w.size(); ++i) matmul_tiled(w[i], x, y[i], s);
    return;
  }
  to_bf16(x.as<const float>(), static_cast<__nv_bfloat16*>(scratch), x.n_elements(), s);
  if (t == DType::Q8_0) launch_many<DType::Q8_0>(p, tiles, s);
  else if (t == DType::Q4_K) launch_many<DType::Q4_K>(p, tiles, s);
  else launch_many<DType::Q5_K>(p, tiles, s);
  ZINC_CUDA_LAUNCHED("matmul_many_tiled");
  for (size_t i : rest) matmul_tiled(w[i], x, y[i], s);
}

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
