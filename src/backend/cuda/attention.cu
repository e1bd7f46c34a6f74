// Causal GQA attention over F32 KV caches, flash-decoding style: the cache is cut
// into fixed chunks, one block per (chunk, query head, token) runs an online softmax
// over its chunk and writes a partial (max, sum, weighted V); a second kernel merges
// the partials. The grid depends on the cache size only, never on the positions
// (which live on the device), so a captured decode step replays at any position:
// blocks past a query's position exit at once.
#include <cfloat>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxHeadDim = 256;
constexpr int kPerLane = kMaxHeadDim / 32;

struct AttentionParams {
  const float* q;   // {D, Hq, n}
  const float* kc;  // {D, Hkv, n_ctx}
  const float* vc;
  const int32_t* pos;  // {n}
  float* partials;     // {D + 2, splits, Hq, n}: max, sum, then D weighted values
  float* y;            // {D, Hq, n}
  float scale;
  int D, Hq, Hkv, n, n_ctx, chunk, splits;
};

int chunk_for(const AttentionShape& s) {
  // Enough splits to fill the GPU when decoding one token; fewer, longer chunks
  // when many tokens already give parallelism.
  const int64_t max_splits = s.n_tokens == 1 ? 128 : 16;
  int64_t chunk = 256;
  while ((s.n_ctx + chunk - 1) / chunk > max_splits) chunk *= 2;
  return static_cast<int>(chunk);
}

__global__ void __launch_bounds__(32 * kWarps) attention_chunk_kernel(const __grid_constant__ AttentionParams p) {
  __shared__ float m_sh[kWarps], l_sh[kWarps];
  __shared__ float acc_sh[kWarps][kMaxHeadDim];
  const int split = blockIdx.x, h = blockIdx.y, t = blockIdx.z;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int len = p.pos[t] + 1;
  const int s0 = split * p.chunk;
  if (s0 >= len) return;  // the merge reads only splits below len
  const int s1 = min(s0 + p.chunk, len);
  const int kvh = h / (p.Hq / p.Hkv);
  const float* qh = p.q + (static_cast<int64_t>(t) * p.Hq + h) * p.D;
  float qv[kPerLane], acc[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int d = lane + 32 * i;
    qv[i] = d < p.D ? qh[d] * p.scale : 0.0f;
    acc[i] = 0.0f;
  }
  float m = -FLT_MAX, l = 0;
  for (int s = s0 + warp; s < s1; s += kWarps) {
    const int64_t row = (static_cast<int64_t>(s) * p.Hkv + kvh) * p.D;
    float dot = 0;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d < p.D) dot += qv[i] * p.kc[row + d];
    }
    dot = warp_sum(dot);
    const float m_new = fmaxf(m, dot);
    const float corr = __expf(m - m_new), e = __expf(dot - m_new);
    l = l * corr + e;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d < p.D) acc[i] = acc[i] * corr + e * p.vc[row + d];
    }
    m = m_new;
  }
  if (lane == 0) m_sh[warp] = m, l_sh[warp] = l;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i)
    if (lane + 32 * i < p.D) acc_sh[warp][lane + 32 * i] = acc[i];
  __syncthreads();
  float mx = -FLT_MAX;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, m_sh[w]);
  float* out = p.partials + ((static_cast<int64_t>(t) * p.Hq + h) * p.splits + split) * (p.D + 2);
  if (threadIdx.x == 0) {
    float sum = 0;
    for (int w = 0; w < kWarps; ++w) sum += l_sh[w] * __expf(m_sh[w] - mx);
    out[0] = mx, out[1] = sum;
  }
  for (int d = threadIdx.x; d < p.D; d += blockDim.x) {
    float a = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) a += acc_sh[w][d] * __expf(m_sh[w] - mx);
    out[2 + d] = a;
  }
}

// One block per (query head, token): merges the partials of the splits that hold keys.
__global__ void attention_merge_kernel(const __grid_constant__ AttentionParams p) {
  const int h = blockIdx.x, t = blockIdx.y;
  const int used = min((p.pos[t] + p.chunk) / p.chunk, p.splits);  // splits with s0 <= pos
  const float* part = p.partials + (static_cast<int64_t>(t) * p.Hq + h) * p.splits * (p.D + 2);
  float mx = -FLT_MAX;
  for (int sp = 0; sp < used; ++sp) mx = fmaxf(mx, part[sp * (p.D + 2)]);
  float sum = 0;
  for (int sp = 0; sp < used; ++sp) sum += part[sp * (p.D + 2) + 1] * __expf(part[sp * (p.D + 2)] - mx);
  float* yh = p.y + (static_cast<int64_t>(t) * p.Hq + h) * p.D;
  for (int d = threadIdx.x; d < p.D; d += blockDim.x) {
    float a = 0;
    for (int sp = 0; sp < used; ++sp) a += part[sp * (p.D + 2) + 2 + d] * __expf(part[sp * (p.D + 2)] - mx);
    yh[d] = a / sum;
  }
}

__global__ void kv_store_kernel(const float* k, const float* v, float* kc, float* vc, const int32_t* pos, int64_t row,
                                int64_t n_ctx) {
  const int t = blockIdx.y;
  const int p = pos[t];
  if (p < 0 || p >= n_ctx) return;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < row;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    kc[p * row + i] = k[t * row + i];
    vc[p * row + i] = v[t * row + i];
  }
}

}  // namespace

void kv_store(const float* k, const float* v, float* k_cache, float* v_cache, const int32_t* pos, int64_t row,
              int64_t n, int64_t n_ctx, cudaStream_t s) {
  const dim3 grid(std::min(ceil_div(row, 256), 16), static_cast<unsigned>(n));
  kv_store_kernel<<<grid, 256, 0, s>>>(k, v, k_cache, v_cache, pos, row, n_ctx);
  ZINC_CUDA_LAUNCHED("kv_store");
}

size_t attention_partials_floats(const AttentionShape& s) {
  const int64_t splits = (s.n_ctx + chunk_for(s) - 1) / chunk_for(s);
  return static_cast<size_t>(splits * s.n_head * s.n_tokens * (s.head_dim + 2));
}

void attention(const AttentionShape& s, const float* q, const float* k_cache, const float* v_cache,
               const int32_t* pos, float scale, float* partials, float* y, cudaStream_t st) {
  if (s.head_dim > kMaxHeadDim) throw std::invalid_argument("cuda attention: head_dim above 256");
  const int chunk = chunk_for(s);
  AttentionParams p{q,
                    k_cache,
                    v_cache,
                    pos,
                    partials,
                    y,
                    scale,
                    static_cast<int>(s.head_dim),
                    static_cast<int>(s.n_head),
                    static_cast<int>(s.n_head_kv),
                    static_cast<int>(s.n_tokens),
                    static_cast<int>(s.n_ctx),
                    chunk,
                    ceil_div(s.n_ctx, chunk)};
  const dim3 grid(p.splits, p.Hq, p.n);
  attention_chunk_kernel<<<grid, 32 * kWarps, 0, st>>>(p);
  ZINC_CUDA_LAUNCHED("attention_chunk");
  attention_merge_kernel<<<dim3(p.Hq, p.n), 128, 0, st>>>(p);
  ZINC_CUDA_LAUNCHED("attention_merge");
}

}  // namespace zinc::cuda
