// y = x·wᵀ for many tokens on the tensor cores.
//
// The kernels here (not matmul_tiled's) are launched with PDL (cuda_common.cuh): the
// pipelined tiles and the F32 tiles issue their first weight loads before they wait.
//
// matmul_batched: for kFewMinTokens to kFewMaxTokens tokens the weights matmul_few
// takes go there (matmul_few.cu), and up to kMatvecMaxTokens the others through
// matvec_many (at one token, up to kFewMaxF32Weights F32 weights ride along
// matmul_few's launch instead). From kDenseGemmMinTokens tokens, quantized and F16
// weights go through DenseGemm (f16 expansion + cuBLAS). Between, one launch over one or more
// weights of the same input and quantized type (pipe::for_type): x is rounded to f16 once, each
// block takes 128 rows of one weight x 64 tokens (Q6_K: 32) through the pipelined tile
// product of mma_pipe.cuh. At any length F32 weights
// (routers, GDN gates: few rows whose top-k choices and gates are sensitive to
// rounding) take one f32 launch of their own on the CUDA cores, k split over warps.
//
// matmul_tiled: any weight type through mma_tile.cuh, 128 weight rows x 64 tokens
// per block (32 when that leaves too few blocks to fill the GPU), the weights
// dequantized to bf16 once per token tile; the fallback for the rest.
#include <algorithm>
#include <vector>

#include "backend/cuda/dense_gemm.h"
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

// Pairs: each group of 4 stored in the order (0, 2, 1, 3) (the pipelined tiles' rows).
template <bool Pairs>
__global__ void to_f16_kernel(const float* x, __half* y, int64_t groups) {
  pdl_begin();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= groups) return;
  const float4 a = reinterpret_cast<const float4*>(x)[2 * i], b = reinterpret_cast<const float4*>(x)[2 * i + 1];
  reinterpret_cast<uint4*>(y)[i] =
      Pairs ? make_uint4(pack_f16_clamped(a.x, a.z), pack_f16_clamped(a.y, a.w), pack_f16_clamped(b.x, b.z),
                         pack_f16_clamped(b.y, b.w))
            : make_uint4(pack_f16_clamped(a.x, a.y), pack_f16_clamped(a.z, a.w), pack_f16_clamped(b.x, b.y),
                         pack_f16_clamped(b.z, b.w));
}

// Tokens per block: 64, or 32 when 64 leaves fewer blocks than about two per SM; up
// to 16 k-slices when even that leaves the SMs short (several-sequence decode: the
// 2048-row output projections were 64 blocks with 4, PERFORMANCE.md session 33).
constexpr int kManyTokens = 64, kManyTokensNarrow = 32, kManyMaxSplits = 16;
constexpr int kMaxMany = 8;      // weights per launch

// Small grids split k into slices (blockIdx.z) that write partial sums, {out, n}
// per slice; split_sum_kernel then adds them in slice order.
struct ManyWeight {
  const uint8_t* w;  // {in, out}
  size_t row_bytes;
  float* y;     // {out, n}
  float* part;  // {out, n, splits} (splits > 1)
  int out;
  int tile0;  // first row tile (blockIdx.x) of this weight
};
struct ManyParams {
  ManyWeight w[kMaxMany];
  int count, in, n, splits;
  const __half* xb;  // x as the pipelined tiles' f16 token rows
};

// grid (row tiles of all weights, token tiles, k-slices).
template <DType T, int BN>
__global__ void __launch_bounds__(pipe::kThreads, 2) matmul_many_kernel(const __grid_constant__ ManyParams p) {
  extern __shared__ __align__(16) uint8_t smem[];
  int wi = 0;
  while (wi + 1 < p.count && p.w[wi + 1].tile0 <= static_cast<int>(blockIdx.x)) ++wi;
  const ManyWeight& w = p.w[wi];
  const int row0 = (blockIdx.x - w.tile0) * pipe::kRows, tok0 = blockIdx.y * BN;
  const int span = p.in / p.splits, k0 = blockIdx.z * span;
  const size_t a_skip = static_cast<size_t>(k0 / Dequant<T>::kBlockElems) * Dequant<T>::kBlockBytes;
  float acc[BN / 8][4];
  pipe::product<T, BN, true>(
      smem,
      [&](int r) { return row0 + r < w.out ? w.w + static_cast<size_t>(row0 + r) * w.row_bytes + a_skip : nullptr; },
      [&](int j) { return tok0 + j < p.n ? p.xb + static_cast<size_t>(tok0 + j) * p.in + k0 : nullptr; }, w.w, span,
      acc);
  float* out = p.splits == 1 ? w.y : w.part + static_cast<int64_t>(blockIdx.z) * p.n * w.out;
#pragma unroll
  for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = row0 + pipe::acc_row(i), t = tok0 + pipe::acc_token(nt, i);
      if (r < w.out && t < p.n) out[static_cast<int64_t>(t) * w.out + r] = acc[nt][i];
    }
}

// Partial sums of k-slices: y[i] = part[0][i] + part[1][i] + ... for each weight.
struct SplitSum {
  const float* part;
  float* y;
  int64_t size, elem0;  // elem0: this weight's first element in the launch's numbering
};
struct SplitSumParams {
  SplitSum w[kMaxMany];
  int count, splits;
};
__global__ void split_sum_kernel(const __grid_constant__ SplitSumParams p, int64_t total) {
  pdl_begin();
  const int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (e >= total) return;
  int wi = 0;
  while (wi + 1 < p.count && p.w[wi + 1].elem0 <= e) ++wi;
  const SplitSum& w = p.w[wi];
  const int64_t i = e - w.elem0;
  float sum = 0.0f;
  for (int s = 0; s < p.splits; ++s) sum += w.part[s * w.size + i];
  w.y[i] = sum;
}

// F32 weights on the CUDA cores, in f32: a block takes 64 rows x 64 tokens over
// one k-slice (4 x 4 outputs per thread, 16-k tiles through shared memory). The rows
// are few (32 to 257 per call), so the launch splits k into up to 32 slices to fill
// the GPU (the router's 4 row tiles: 128 blocks; with 8 slices several-sequence decode
// was 5% slower, PERFORMANCE.md session 17); the slices' partial sums are then added
// in a fixed order.
constexpr int kF32Tile = 64, kF32K = 16, kF32MaxSplits = 32;
struct F32Weight {
  const float* w;  // {in, out}
  float* y;        // {out, n}
  float* part;     // {out, n, splits} (splits > 1)
  int out, tile0;  // tile0: first row tile (blockIdx.x)
};
struct F32Params {
  F32Weight w[kMaxMany];
  int count, in, n, splits;
  const float* x;  // {in, n}
};

// k-slices (a power of two up to max_splits, each a whole number of `step`s) for a
// launch of `blocks` blocks per slice, as many as keep the launch within `slots`
// blocks.
constexpr int kMinBlocks = 264;     // the pipelined tiles: two blocks per SM (132 SMs: H100, H200)
constexpr int kF32Slots = 4 * 132;  // the f32 tiles: four per SM
// The pipelined tiles split up to two waves' worth: at 32 sequences the Q8_0
// projections took 1180 us a step against 1254 at one wave (PERFORMANCE.md, session 51).
constexpr int kManySlots = 2 * kMinBlocks;
int k_splits(int blocks, int in, int step, int max_splits, int slots) {
  int splits = 1;
  while (splits < max_splits && 2 * blocks * splits <= slots && in % (2 * splits * step) == 0) splits *= 2;
  return splits;
}

__global__ void __launch_bounds__(256) matmul_f32_kernel(const __grid_constant__ F32Params p) {
  __shared__ __align__(16) float ws[kF32K][kF32Tile + 4];
  __shared__ __align__(16) float xs[kF32K][kF32Tile + 4];
  int wi = 0;
  while (wi + 1 < p.count && p.w[wi + 1].tile0 <= static_cast<int>(blockIdx.x)) ++wi;
  const F32Weight& w = p.w[wi];
  const int row0 = (blockIdx.x - w.tile0) * kF32Tile, tok0 = blockIdx.y * kF32Tile;
  const int span = p.in / p.splits, k_begin = blockIdx.z * span;
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;           // outputs: rows 4ty.., tokens 4tx..
  const int lr = threadIdx.x / 4, lk = 4 * (threadIdx.x % 4);        // loads: row / token lr, k lk..lk+3
  // Rows and tokens past the end read the last one; their outputs are never stored.
  const float* wrow = w.w + static_cast<int64_t>(min(row0 + lr, w.out - 1)) * p.in + k_begin + lk;
  const float* xrow = p.x + static_cast<int64_t>(min(tok0 + lr, p.n - 1)) * p.in + k_begin + lk;
  float acc[4][4] = {};
  float4 a = __ldg(reinterpret_cast<const float4*>(wrow));  // weights: before the wait
  pdl_begin();
  float4 b = __ldg(reinterpret_cast<const float4*>(xrow));
  for (int k = 0; k < span; k += kF32K) {
    __syncthreads();  // the previous tile is read
    ws[lk][lr] = a.x, ws[lk + 1][lr] = a.y, ws[lk + 2][lr] = a.z, ws[lk + 3][lr] = a.w;
    xs[lk][lr] = b.x, xs[lk + 1][lr] = b.y, xs[lk + 2][lr] = b.z, xs[lk + 3][lr] = b.w;
    __syncthreads();
    if (k + kF32K < span) {  // the next tile's loads overlap this one's math
      a = __ldg(reinterpret_cast<const float4*>(wrow + k + kF32K));
      b = __ldg(reinterpret_cast<const float4*>(xrow + k + kF32K));
    }
#pragma unroll
    for (int kk = 0; kk < kF32K; ++kk) {
      const float4 av = *reinterpret_cast<const float4*>(&ws[kk][4 * ty]);
      const float4 bv = *reinterpret_cast<const float4*>(&xs[kk][4 * tx]);
      const float ar[4] = {av.x, av.y, av.z, av.w}, br[4] = {bv.x, bv.y, bv.z, bv.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(ar[i], br[j], acc[i][j]);
    }
  }
  float* out = p.splits == 1 ? w.y : w.part + static_cast<int64_t>(blockIdx.z) * p.n * w.out;
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = row0 + 4 * ty + i, tok = tok0 + 4 * tx + j;
      if (row < w.out && tok < p.n) out[static_cast<int64_t>(tok) * w.out + row] = acc[i][j];
    }
}

template <DType T>
void launch_many(const ManyParams& p, int row_tiles, int bn, cudaStream_t s) {
  constexpr int kWide = kManyTokens, kNarrow = kManyTokensNarrow;
  if constexpr (kWide <= pipe::kMaxTokens<T>)
    if (bn == kWide)
      return pipe::launch_pdl<T, kWide, matmul_many_kernel<T, kWide>>(dim3(row_tiles, ceil_div(p.n, kWide), p.splits),
                                                                      s, p);
  pipe::launch_pdl<T, kNarrow, matmul_many_kernel<T, kNarrow>>(dim3(row_tiles, ceil_div(p.n, kNarrow), p.splits), s, p);
}

// The type of a pipelined launch: the first weight's that is not F32.
DType pipelined_type(std::span<const Tensor> w) {
  for (const Tensor& t : w)
    if (t.type != DType::F32) return t.type;
  return DType::F32;
}

}  // namespace

void to_bf16(const float* x, __nv_bfloat16* y, int64_t count, cudaStream_t s) {
  to_bf16_kernel<<<ceil_div(count / 8, 256), 256, 0, s>>>(x, y, count / 8);
  ZINC_CUDA_LAUNCHED("to_bf16");
}

void to_f16_pairs(const float* x, __half* y, int64_t count, cudaStream_t s) {
  launch_pdl(to_f16_kernel<true>, ceil_div(count / 8, 256), 256, s, x, y, count / 8);
  ZINC_CUDA_LAUNCHED("to_f16_pairs");
}

void to_f16(const float* x, __half* y, int64_t count, cudaStream_t s) {
  to_f16_kernel<false><<<ceil_div(count / 8, 256), 256, 0, s>>>(x, y, count / 8);
  ZINC_CUDA_LAUNCHED("to_f16");
}

namespace {

// How matmul_batched splits its weights: the pipelined launch, the F32 launch (each
// with its k-slices and partial sums) and the rest. `scratch` null: only sizes.
struct BatchedPlan {
  ManyParams many{};
  F32Params f32{};
  SplitSumParams many_sum{}, f32_sum{}, few_sum{};
  int many_tiles = 0, many_bn = kManyTokens, f32_tiles = 0;
  DType type = DType::F32;
  std::vector<size_t> few;     // weights for matmul_few
  std::vector<float*> few_parts;  // their partial sums when matmul_few splits their rows (one token)
  std::vector<size_t> few_f32; // one token: F32 weights riding along matmul_few's first launch
  std::vector<size_t> matvec;  // up to kMatvecMaxTokens tokens: the weights matmul_few does not take
  std::vector<size_t> dense;  // weights for DenseGemm
  std::vector<size_t> rest;   // weights for matmul_tiled
  size_t w16 = 0;             // scratch offset of DenseGemm's f16 weight
  size_t bytes = 0;           // scratch: f16 x, DenseGemm's weight, the partial sums
};

// Places the partial sums of `count` weights (outs[i] rows each) after `bytes`.
template <class W>
SplitSumParams place_partials(W* w, int count, int splits, int n, void* scratch, size_t& bytes) {
  SplitSumParams sum{};
  sum.count = count, sum.splits = splits;
  int64_t elem = 0;
  for (int i = 0; i < count && splits > 1; ++i) {
    const int64_t size = static_cast<int64_t>(n) * w[i].out;
    w[i].part = scratch ? reinterpret_cast<float*>(static_cast<char*>(scratch) + bytes) : nullptr;
    sum.w[i] = {w[i].part, w[i].y, size, elem};
    elem += size;
    bytes += sizeof(float) * splits * size;
  }
  return sum;
}

BatchedPlan plan_batched(std::span<const Tensor> w, const Tensor& x, std::span<const Tensor> y, void* scratch) {
  BatchedPlan b;
  b.type = pipelined_type(w);
  const int in = static_cast<int>(x.ne[0]), n = static_cast<int>(x.rows());
  b.many.in = b.f32.in = in, b.many.n = b.f32.n = n;
  b.many.xb = static_cast<const __half*>(scratch);
  b.f32.x = x.as<const float>();
  size_t w16_bytes = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const int out = static_cast<int>(w[i].rows());
    float* yi = y.empty() ? nullptr : y[i].as<float>();
    if (matmul_few_takes(w[i], n)) {
      b.few.push_back(i);
    } else if (n <= kMatvecMaxTokens) {
      b.matvec.push_back(i);
    } else if (DenseGemm::takes(w[i], n)) {
      b.dense.push_back(i);
      w16_bytes = std::max(w16_bytes, static_cast<size_t>(w[i].n_elements()) * 2);
    } else if (w[i].type == DType::F32 && b.f32.count < kMaxMany && in % kF32K == 0) {
      b.f32.w[b.f32.count++] = {w[i].as<const float>(), yi, nullptr, out, b.f32_tiles};
      b.f32_tiles += ceil_div(out, kF32Tile);
    } else if (w[i].type == b.type && b.many.count < kMaxMany &&
               pipe::takes(b.type, w[i].data, w[i].row_bytes(), w[i].ne[0])) {
      b.many.w[b.many.count++] = {static_cast<const uint8_t*>(w[i].data), w[i].row_bytes(), yi, nullptr, out,
                                  b.many_tiles};
      b.many_tiles += ceil_div(out, pipe::kRows);
    } else {
      b.rest.push_back(i);
    }
  }
  // At one token matmul_few's launch takes F32 weights beside its own.
  if (!b.few.empty() && n == 1) {
    std::vector<size_t> matvec;
    for (size_t i : b.matvec) {
      if (w[i].type == DType::F32 && b.few_f32.size() < kFewMaxF32Weights) b.few_f32.push_back(i);
      else matvec.push_back(i);
    }
    b.matvec = std::move(matvec);
  }
  // x in f16: pairs for the pipelined tiles or in order for DenseGemm, never both
  // (DenseGemm takes every weight the tiles would from kDenseGemmMinTokens tokens).
  b.bytes = (static_cast<size_t>(x.n_elements()) * 2 + 255) & ~size_t{255};
  b.w16 = b.bytes;
  b.bytes += (w16_bytes + 255) & ~size_t{255};
  // Rows matmul_few splits (one token): kMaxMany weights at most, each with its partial sums; the rest go to the
  // matvec.
  const int few_splits = b.few.empty() ? 1 : matmul_few_splits(in, n);
  if (few_splits > 1) {
    for (size_t k = kMaxMany; k < b.few.size(); ++k) b.matvec.push_back(b.few[k]);
    b.few.resize(std::min<size_t>(b.few.size(), kMaxMany));
    struct Part {
      float* y;
      float* part;
      int out;
    } parts[kMaxMany];
    for (size_t k = 0; k < b.few.size(); ++k)
      parts[k] = {y.empty() ? nullptr : y[b.few[k]].as<float>(), nullptr, static_cast<int>(w[b.few[k]].rows())};
    b.few_sum = place_partials(parts, static_cast<int>(b.few.size()), few_splits, n, scratch, b.bytes);
    for (size_t k = 0; k < b.few.size(); ++k) b.few_parts.push_back(parts[k].part);
  } else {
    b.few_parts.assign(b.few.size(), nullptr);
  }
  b.f32.splits = k_splits(b.f32_tiles * ceil_div(n, kF32Tile), in, kF32K, kF32MaxSplits, kF32Slots);
  b.f32_sum = place_partials(b.f32.w, b.f32.count, b.f32.splits, n, scratch, b.bytes);
  if (b.many.count > 0) {
    if (pipe::max_tokens(b.type) < kManyTokens || b.many_tiles * ceil_div(n, kManyTokens) < kMinBlocks)
      b.many_bn = kManyTokensNarrow;
    b.many.splits =
        k_splits(b.many_tiles * ceil_div(n, b.many_bn), in, pipe::chunk_elems(b.type), kManyMaxSplits, kManySlots);
    b.many_sum = place_partials(b.many.w, b.many.count, b.many.splits, n, scratch, b.bytes);
  }
  return b;
}

// The tensors t[i] for i in `which`, in that order.
std::vector<Tensor> picked(std::span<const Tensor> t, const std::vector<size_t>& which) {
  std::vector<Tensor> out;
  for (size_t i : which) out.push_back(t[i]);
  return out;
}

void sum_splits(const SplitSumParams& p, cudaStream_t s) {
  if (p.splits <= 1) return;
  const SplitSum& last = p.w[p.count - 1];
  const int64_t total = last.elem0 + last.size;
  launch_pdl(split_sum_kernel, ceil_div(total, 256), 256, s, p, total);
  ZINC_CUDA_LAUNCHED("split_sum");
}

}  // namespace

size_t matmul_batched_scratch_bytes(std::span<const Tensor> w, const Tensor& x) {
  return plan_batched(w, x, {}, nullptr).bytes;
}

void matmul_batched(std::span<const Tensor> w, const Tensor& x, std::span<const Tensor> y, void* scratch,
                    const DenseGemm& dense, cudaStream_t s) {
  const BatchedPlan b = plan_batched(w, x, y, scratch);
  if (!b.dense.empty()) {
    auto* x16 = static_cast<__half*>(scratch);
    auto* w16 = reinterpret_cast<__half*>(static_cast<char*>(scratch) + b.w16);
    to_f16(x.as<const float>(), x16, x.n_elements(), s);
    for (size_t i : b.dense) dense.run(w[i], x16, y[i].as<float>(), w16, x.rows(), s);
  }
  if (b.f32.count > 0) {
    launch_pdl(matmul_f32_kernel, dim3(b.f32_tiles, ceil_div(b.f32.n, kF32Tile), b.f32.splits), 256, s, b.f32);
    ZINC_CUDA_LAUNCHED("matmul_f32");
    sum_splits(b.f32_sum, s);
  }
  // matmul_few reads a lone token's x in f32.
  const bool lone = x.rows() == 1;
  if ((!b.few.empty() && !lone) || b.many.count > 0)
    to_f16_pairs(x.as<const float>(), static_cast<__half*>(scratch), x.n_elements(), s);
  if (!b.few.empty())
    matmul_few(picked(w, b.few), picked(w, b.few_f32), x.as<const float>(),
               lone ? nullptr : static_cast<const __half*>(scratch), x.ne[0], x.rows(), picked(y, b.few), b.few_parts,
               picked(y, b.few_f32), s);
  sum_splits(b.few_sum, s);
  if (b.many.count > 0) {
    pipe::for_type(b.type, [&](auto type) { launch_many<decltype(type)::value>(b.many, b.many_tiles, b.many_bn, s); });
    ZINC_CUDA_LAUNCHED("matmul_many_tiled");
    sum_splits(b.many_sum, s);
  }
  for (size_t i : b.rest) matmul_tiled(w[i], x, y[i], s);
  if (!b.matvec.empty()) matvec_many(picked(w, b.matvec), x, picked(y, b.matvec), s);
}

bool matmul_batched_takes(std::span<const Tensor> w, int64_t n) {
  if (n > kMatvecMaxTokens) return true;
  if (n < kFewMinTokens) return false;
  if (n == 1) {
    int64_t rows = 0;
    for (const Tensor& t : w) rows += matmul_few_takes(t, n) ? t.rows() : 0;
    return rows >= kFewOneTokenMinRows;
  }
  return std::any_of(w.begin(), w.end(), [&](const Tensor& t) { return matmul_few_takes(t, n); });
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
