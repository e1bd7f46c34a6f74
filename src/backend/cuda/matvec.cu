// matvec (y = x·wᵀ for at most 8 tokens), several weights over the same x in one
// launch (matvec_many), and embed (rows of a table dequantized), all instantiated
// for every weight type.
#include <algorithm>
#include <vector>

#include "backend/cuda/kernels.h"
#include "backend/cuda/matvec.cuh"

namespace zinc::cuda {
namespace {

// Weights whose rows are 16-byte aligned (nearly all) are staged: a block's
// kStagedRows rows are copied into shared memory with cp.async, a chunk of whole
// 256-element groups at a time with two chunks in flight, and each warp
// dequantizes its rows from there. The first copies are issued before the kernel
// waits for the previous one (weights never depend on it), overlapping that
// kernel's tail. Other rows (F32, odd sizes) are read directly by blocks of their
// own; small launches of those split each row's groups between the warps.
constexpr int kWarps = 4;
constexpr int kRowsPerWarp = 2;  // rows sharing each activation load
constexpr int kStagedRows = kWarps * kRowsPerWarp;
constexpr int kStageChunkBytes = 20 * 1024;  // one of the two chunk buffers, at most
constexpr int kBlocksPerSM = 6;              // __launch_bounds__: 80 registers
constexpr int kDirectGroups = 2;             // direct rows: groups per pass and row
constexpr int kSplitMaxRows = 4096;
constexpr int kMaxJobs = 4;

// 16-byte vectors of one row's slot in a chunk buffer: its groups plus the
// misalignment of their start and end.
template <DType T>
constexpr int chunk_slot_vecs(int groups) {
  return groups * bytes_per_256<T>() / 16 + 2;
}
template <DType T>
constexpr int max_chunk_groups() {
  int c = 1;
  while (kStagedRows * chunk_slot_vecs<T>(c + 1) * 16 <= kStageChunkBytes) ++c;
  return c;
}

// One weight of a launch; its blocks start at `first_block`.
struct MatvecJob {
  const uint8_t* w;  // {in, rows} blocks
  size_t row_bytes;
  float* y;  // {rows, n}
  int rows, first_block, rows_per_block;
  bool f32;     // an F32 weight riding along a launch of another type
  bool staged;  // see stageable()
  bool split;   // direct rows: the block's warps share its kRowsPerWarp rows
};
struct MatvecParams {
  MatvecJob jobs[kMaxJobs];
  int n_jobs, blocks;
  const float* x;  // {in, n}
  int in, n;
  int chunk_groups;  // staged: groups per chunk
};

// acc[r][t] += this lane's 8 elements of row r's 256-element group (at group[r],
// in shared memory) · x_t, for tokens t < n at x + t · stride.
template <DType T, int N>
__device__ __forceinline__ void group_dot(const uint8_t* const (&group)[kRowsPerWarp], const float* x,
                                          int64_t stride, int n, float (&acc)[kRowsPerWarp][N]) {
  const int lane = threadIdx.x % 32;
  float w[kRowsPerWarp][8], scale[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    if constexpr (T == DType::Q8_0) {
      // The 8 codes share one block scale: multiply once, after the dot.
      const uint8_t* b = group[r] + lane / 4 * Dequant<T>::kBlockBytes;
      scale[r] = half_to_float(load_u16(b));
      uint2 q = load_bytes8<2>(b + 2 + lane % 4 * 8);
      q.x ^= 0x80808080u, q.y ^= 0x80808080u;
#pragma unroll
      for (int i = 0; i < 8; ++i) w[r][i] = code_as_float(q, i, 128.0f);
    } else {
      scale[r] = 1.0f;
      Dequant<T>::load8(group[r], lane * 8, w[r]);
    }
  }
#pragma unroll
  for (int t = 0; t < N; ++t) {
    if (t < n) {
      float xv[8];
      load_floats8(x + t * stride, xv);
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        float s = 0;
#pragma unroll
        for (int i = 0; i < 8; ++i) s += w[r][i] * xv[i];
        acc[r][t] += s * scale[r];
      }
    }
  }
}

// Staged rows r0 .. r0 + kStagedRows of job j.
template <DType T, int N>
__device__ __forceinline__ void staged_rows(const MatvecJob& j, const MatvecParams& p, int r0, uint4* stage) {
  constexpr int kGB = bytes_per_256<T>();
  const int n_groups = p.in / 256, C = p.chunk_groups, slot = chunk_slot_vecs<T>(C);
  const int n_chunks = (n_groups + C - 1) / C;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const auto issue = [&](int c) {
    if (c < n_chunks) {
      uint4* buf = stage + (c % 2) * kStagedRows * slot;
      const int first = c * C * kGB / 16, count = (min((c + 1) * C, n_groups) * kGB + 15) / 16 - first;
#pragma unroll
      for (int r = 0; r < kStagedRows; ++r) {
        const auto* row = reinterpret_cast<const uint4*>(j.w + static_cast<size_t>(min(r0 + r, j.rows - 1)) * j.row_bytes);
        for (int v = threadIdx.x; v < count; v += blockDim.x) cp_async16(buf + r * slot + v, row + first + v);
      }
    }
    cp_async_commit();  // an empty group past the end keeps the wait counts uniform
  };
  issue(0);
  issue(1);
  pdl_begin();

  float acc[kRowsPerWarp][N] = {};
  for (int c = 0; c < n_chunks; ++c) {
    cp_async_wait<1>();
    __syncthreads();
    const uint8_t* buf = reinterpret_cast<const uint8_t*>(stage + (c % 2) * kStagedRows * slot);
    const int g0 = c * C, g1 = min(g0 + C, n_groups), skew = g0 * kGB % 16;
    for (int g = g0; g < g1; ++g) {
      const uint8_t* group[kRowsPerWarp];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) group[r] = buf + (warp * kRowsPerWarp + r) * slot * 16 + skew + (g - g0) * kGB;
      group_dot<T, N>(group, p.x + g * 256 + lane * 8, p.in, p.n, acc);
    }
    __syncthreads();  // this buffer is refilled next
    issue(c + 2);
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int row = r0 + warp * kRowsPerWarp + r;
#pragma unroll
    for (int t = 0; t < N; ++t) {
      if (t < p.n) {
        const float s = warp_sum(acc[r][t]);
        if (lane == 0 && row < j.rows) j.y[static_cast<int64_t>(t) * j.rows + row] = s;
      }
    }
  }
}

// Directly read rows from r0 of job j: each warp its own kRowsPerWarp rows, or
// (split) all warps the same rows, adding their parts in a fixed order.
template <DType T, int N>
__device__ __forceinline__ void direct_rows(const MatvecJob& j, const MatvecParams& p, int r0) {
  __shared__ float part[kWarps][kRowsPerWarp][kMaxDotTokens];
  pdl_begin();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (!j.split) r0 += warp * kRowsPerWarp;
  const uint8_t* rows[kRowsPerWarp];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) rows[i] = j.w + static_cast<size_t>(min(r0 + i, j.rows - 1)) * j.row_bytes;
  float acc[kRowsPerWarp][kMaxDotTokens] = {};
  if (j.split) rows_dot<T, kRowsPerWarp, kDirectGroups, N>(rows, p.in, warp, kWarps, p.x, p.in, p.n, acc);
  else rows_dot<T, kRowsPerWarp, kDirectGroups, N>(rows, p.in, 0, 1, p.x, p.in, p.n, acc);
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i)
#pragma unroll
    for (int t = 0; t < N; ++t) {
      if (t < p.n) {
        const float s = warp_sum(acc[i][t]);
        if (lane == 0) {
          if (j.split) part[warp][i][t] = s;
          else if (r0 + i < j.rows) j.y[static_cast<int64_t>(t) * j.rows + r0 + i] = s;
        }
      }
    }
  if (!j.split) return;
  __syncthreads();
  const int i = threadIdx.x / kMaxDotTokens, t = threadIdx.x % kMaxDotTokens;
  if (i < kRowsPerWarp && t < p.n && r0 + i < j.rows) {
    float s = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += part[w][i][t];
    j.y[static_cast<int64_t>(t) * j.rows + r0 + i] = s;
  }
}

// N: 1 (single-sequence decode) or kMaxDotTokens (any n up to it).
template <DType T, int N>
__global__ void __launch_bounds__(32 * kWarps, kBlocksPerSM) matvec_kernel(const __grid_constant__ MatvecParams p) {
  extern __shared__ uint4 stage[];
  int j = 0;
  while (j + 1 < p.n_jobs && static_cast<int>(blockIdx.x) >= p.jobs[j + 1].first_block) ++j;
  const MatvecJob& job = p.jobs[j];
  const int r0 = (blockIdx.x - job.first_block) * job.rows_per_block;
  if constexpr (T != DType::F32) {
    if (job.f32) return direct_rows<DType::F32, N>(job, p, r0);
    if (job.staged) return staged_rows<T, N>(job, p, r0, stage);
  }
  direct_rows<T, N>(job, p, r0);
}

template <DType T, int N>
void launch_matvec(MatvecParams& p, bool any_staged, cudaStream_t s) {
  size_t smem = 0;
  if constexpr (T != DType::F32) {
    if (any_staged) {
      p.chunk_groups = std::min(p.in / 256, max_chunk_groups<T>());
      smem = 2 * kStagedRows * chunk_slot_vecs<T>(p.chunk_groups) * 16;
    }
  }
  launch_pdl_smem(matvec_kernel<T, N>, p.blocks, 32 * kWarps, smem, s, p);
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
    bool any_staged = false;
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
      j.split = !j.staged && rows <= kSplitMaxRows;
      j.rows_per_block = j.split ? kRowsPerWarp : kStagedRows;
      any_staged |= j.staged;
      p.blocks += ceil_div(j.rows, j.rows_per_block);
    }
    dispatch_weight_type(type, [&](auto t) {
      constexpr DType T = decltype(t)::value;
      if (p.n == 1) launch_matvec<T, 1>(p, any_staged, s);
      else launch_matvec<T, kMaxDotTokens>(p, any_staged, s);
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
