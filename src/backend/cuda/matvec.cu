// matvec (y = x·wᵀ for at most 8 tokens), several weights over the same x in one
// launch (matvec_many), and embed (rows of a table dequantized), all instantiated
// for every weight type.
#include <vector>

#include "backend/cuda/kernels.h"
#include "backend/cuda/matvec.cuh"

namespace zinc::cuda {
namespace {

// Small launches (a few thousand rows) split each row's groups between the block's
// warps, so many warps are in flight, and add the warps' parts in a fixed order;
// large ones give each warp its own rows and stage more of them at once.
constexpr int kWarps = 4;
constexpr int kRowsPerWarp = 2;  // rows in flight together
constexpr int kSplitGroups = 4, kWholeGroups = 8;  // staged groups per pass
constexpr int kSplitMaxRows = 4096;
constexpr int kMaxJobs = 4;

// One weight of a launch.
struct MatvecJob {
  const uint8_t* w;  // {in, rows} blocks
  size_t row_bytes;
  float* y;  // {rows, n}
  int rows, first_block;
  bool f32;     // an F32 weight riding along a launch of another type
  bool staged;  // see stageable()
};
struct MatvecParams {
  MatvecJob jobs[kMaxJobs];
  int n_jobs, blocks;
  const float* x;  // {in, n}
  int in, n;
  bool split;  // a block's warps share its kRowsPerWarp rows (else each has its own)
};

template <DType T>
__device__ __forceinline__ void job_rows(const MatvecJob& j, const MatvecParams& p, int r0, uint4* stage,
                                         float (&part)[kWarps][kRowsPerWarp][kMaxDotTokens]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (!p.split) r0 += warp * kRowsPerWarp;
  const uint8_t* rows[kRowsPerWarp];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) rows[i] = j.w + static_cast<size_t>(min(r0 + i, j.rows - 1)) * j.row_bytes;
  float acc[kRowsPerWarp][kMaxDotTokens] = {};
  const DenseX x{p.x, p.in};
  if (p.split) rows_dot_auto<T, kRowsPerWarp, kSplitGroups>(j.staged, rows, p.in, warp, kWarps, x, p.n, acc, stage);
  else rows_dot_auto<T, kRowsPerWarp, kWholeGroups>(j.staged, rows, p.in, 0, 1, x, p.n, acc, stage);
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i)
#pragma unroll
    for (int t = 0; t < kMaxDotTokens; ++t) {
      if (t < p.n) {
        const float s = warp_sum(acc[i][t]);
        if (lane == 0) {
          if (p.split) part[warp][i][t] = s;
          else if (r0 + i < j.rows) j.y[static_cast<int64_t>(t) * j.rows + r0 + i] = s;
        }
      }
    }
  if (!p.split) return;
  __syncthreads();
  const int i = threadIdx.x / kMaxDotTokens, t = threadIdx.x % kMaxDotTokens;
  if (i < kRowsPerWarp && t < p.n && r0 + i < j.rows) {
    float s = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += part[w][i][t];
    j.y[static_cast<int64_t>(t) * j.rows + r0 + i] = s;
  }
}

template <DType T>
__global__ void __launch_bounds__(32 * kWarps) matvec_kernel(const __grid_constant__ MatvecParams p) {
  pdl_begin();
  __shared__ uint4 stage[kWarps][stage_vecs<T, kRowsPerWarp, kWholeGroups>()];
  __shared__ float part[kWarps][kRowsPerWarp][kMaxDotTokens];
  int j = 0;
  while (j + 1 < p.n_jobs && static_cast<int>(blockIdx.x) >= p.jobs[j + 1].first_block) ++j;
  const MatvecJob& job = p.jobs[j];
  const int r0 = (blockIdx.x - job.first_block) * kRowsPerWarp * (p.split ? 1 : kWarps), warp = threadIdx.x / 32;
  if constexpr (T != DType::F32) {
    if (job.f32) {
      job_rows<DType::F32>(job, p, r0, stage[warp], part);
      return;
    }
  }
  job_rows<T>(job, p, r0, stage[warp], part);
}

struct EmbedParams {
  const uint8_t* table;  // {d, vocab}
  size_t row_bytes;
  const int32_t* ids;  // {n}
  float* out;          // {d, n}
  int d, vocab;
};

template <DType T>
__global__ void embed_kernel(const __grid_constant__ EmbedParams p) {
  pdl_begin();
  const int e0 = (blockIdx.x * blockDim.x + threadIdx.x) * 8, t = blockIdx.y;
  if (e0 >= p.d) return;
  const int id = p.ids[t];
  float v[8];
  if (id >= 0 && id < p.vocab) {
    Dequant<T>::load8(p.table + static_cast<size_t>(id) * p.row_bytes, e0, v);
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = __int_as_float(0x7fc00000);  // an id out of range shows as NaN
  }
  float4* o = reinterpret_cast<float4*>(p.out + static_cast<int64_t>(t) * p.d + e0);
  o[0] = make_float4(v[0], v[1], v[2], v[3]);
  o[1] = make_float4(v[4], v[5], v[6], v[7]);
}

}  // namespace

void matvec_many(std::span<const Tensor> w, const Tensor& x, std::span<const Tensor> y, cudaStream_t s) {
  // Each launch takes the first pending weight's type plus any F32 weights (router,
  // small gates), at most kMaxJobs weights.
  std::vector<bool> done(w.size(), false);
  for (size_t first = 0; first < w.size(); ++first) {
    if (done[first]) continue;
    DType type = w[first].type;
    for (size_t i = first; i < w.size() && type == DType::F32; ++i)
      if (!done[i]) type = w[i].type;
    MatvecParams p{};
    p.x = x.as<const float>();
    p.in = static_cast<int>(x.ne[0]);
    p.n = static_cast<int>(x.rows());
    int rows = 0;
    for (size_t i = first, jobs = 0; i < w.size() && jobs < kMaxJobs; ++i)
      if (!done[i] && (w[i].type == type || w[i].type == DType::F32)) rows += static_cast<int>(w[i].rows()), ++jobs;
    p.split = rows <= kSplitMaxRows;
    const int rows_per_block = kRowsPerWarp * (p.split ? 1 : kWarps);
    for (size_t i = first; i < w.size() && p.n_jobs < kMaxJobs; ++i) {
      if (done[i] || (w[i].type != type && w[i].type != DType::F32)) continue;
      done[i] = true;
      MatvecJob& j = p.jobs[p.n_jobs++];
      j.w = static_cast<const uint8_t*>(w[i].data);
      j.row_bytes = w[i].row_bytes();
      j.y = y[i].as<float>();
      j.rows = static_cast<int>(w[i].rows());
      j.first_block = p.blocks;
      j.f32 = w[i].type == DType::F32 && type != DType::F32;
      j.staged = w[i].type != DType::F32 && stageable(j.w, j.row_bytes, p.in);
      p.blocks += ceil_div(j.rows, rows_per_block);
    }
    dispatch_weight_type(type, [&](auto t) {
      launch_pdl(matvec_kernel<decltype(t)::value>, p.blocks, 32 * kWarps, s, p);
    });
    ZINC_CUDA_LAUNCHED("matvec");
  }
}

void matvec(const Tensor& w, const Tensor& x, const Tensor& y, cudaStream_t s) {
  matvec_many(std::span<const Tensor>(&w, 1), x, std::span<const Tensor>(&y, 1), s);
}

void embed(const Tensor& table, const Tensor& ids, const Tensor& out, cudaStream_t s) {
  EmbedParams p{static_cast<const uint8_t*>(table.data), table.row_bytes(), ids.as<const int32_t>(), out.as<float>(),
                static_cast<int>(table.ne[0]), static_cast<int>(table.rows())};
  const dim3 grid(ceil_div(p.d / 8, 128), static_cast<unsigned>(ids.ne[0]));
  dispatch_weight_type(table.type,
                       [&](auto type) { launch_pdl(embed_kernel<decltype(type)::value>, grid, 128, s, p); });
  ZINC_CUDA_LAUNCHED("embed");
}

}  // namespace zinc::cuda
