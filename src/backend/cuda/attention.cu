// Causal GQA attention over F16 KV caches for a few queries (decode), flash-decoding
// style: the cache is cut into chunks, and one block per (chunk, KV head, token) runs
// an online softmax for all the query heads of the KV head's group (up to
// kMaxGroup of them) and writes a partial (max, sum, weighted V) per head; a second
// kernel merges the partials and applies the output gate. Each K/V row is read once
// per group rather than once per query head, in 16-byte loads: the decode step at
// depth is a stream over the cache. The grid depends on the cache size only, never
// on the positions (which live on the device), so a captured decode step replays
// at any position: blocks past a query's position exit at once.
#include <cuda_fp16.h>

#include <algorithm>
#include <cfloat>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxHeadDim = 256;
constexpr int kMaxGroup = 8;     // query heads per block
constexpr int kTile = 4;         // keys in flight per lane group and step
constexpr int kMaxSplits = 256;  // chunks of one cache (the merge keeps their weights in shared memory)
constexpr int kMergeWarps = kMaxSplits / 32;  // a merge thread per split for the maxima
constexpr int kMergeDims = 64;                // dims per merge block: 2 per lane

struct AttentionParams {
  const float* q;      // {D, Hq, n}
  const __half* kc;    // {D, Hkv, n_ctx}
  const __half* vc;
  const int32_t* pos;  // {n}
  const float* gate;   // {D, Hq, n}: y *= sigmoid(gate), or null
  float* partials;     // {D + 2, splits, Hq, n}: max, sum, then D weighted values
  float* y;            // {D, Hq, n}
  float scale;
  int D, Hq, Hkv, n, n_ctx, chunk, splits;
  int head_blocks;  // blocks per KV head: ceil(group / kMaxGroup)
};

int head_blocks_for(const AttentionShape& s) {
  return static_cast<int>(ceil_div(s.n_head / s.n_head_kv, int64_t{kMaxGroup}));
}

int chunk_for(const AttentionShape& s) {
  // About four blocks per SM of a large GPU for one decoded token, fewer and longer
  // chunks when more tokens or heads already give parallelism; at least 64 keys each.
  const int64_t others = s.n_head_kv * head_blocks_for(s) * s.n_tokens;
  const int64_t max_splits = std::clamp<int64_t>(512 / others, 1, kMaxSplits);
  int64_t chunk = 64;
  while ((s.n_ctx + chunk - 1) / chunk > max_splits) chunk *= 2;
  return static_cast<int>(chunk);
}

__device__ __forceinline__ void widen8(const uint4& raw, float (&f)[8]) {
  const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 v = __half22float2(h[i]);
    f[2 * i] = v.x, f[2 * i + 1] = v.y;
  }
}

// A warp takes every kWarps-th key of the chunk, each lane holding 8 dims of a row
// (lanes past D idle), and loads the kTile keys of a step before using any. Heads
// below 256 dims leave lanes idle; lanes splitting a warp between keys would need
// warp-uniform loop bounds for the shuffles.
__global__ void __launch_bounds__(32 * kWarps) attention_split_kernel(const __grid_constant__ AttentionParams p) {
  pdl_begin();
  __shared__ float m_sh[kWarps][kMaxGroup], l_sh[kWarps][kMaxGroup];
  __shared__ float acc_sh[kWarps][kMaxGroup][kMaxHeadDim];
  const int split = blockIdx.x, t = blockIdx.z;
  const int G = p.Hq / p.Hkv, kvh = blockIdx.y / p.head_blocks;
  const int h0 = kvh * G + blockIdx.y % p.head_blocks * kMaxGroup, heads = min(kMaxGroup, (kvh + 1) * G - h0);
  const int len = min(p.pos[t] + 1, p.n_ctx);
  const int s0 = split * p.chunk;
  if (s0 >= len) return;  // the merge reads only splits below len
  const int s1 = min(s0 + p.chunk, len);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, d0 = lane * 8;
  const bool dims = d0 < p.D;

  float q[kMaxGroup][8], acc[kMaxGroup][8], m[kMaxGroup], l[kMaxGroup];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    const bool on = g < heads && dims;
    const float* qh = p.q + (static_cast<int64_t>(t) * p.Hq + h0 + g) * p.D + d0;
    const float4 a = on ? *reinterpret_cast<const float4*>(qh) : make_float4(0, 0, 0, 0);
    const float4 b = on ? *reinterpret_cast<const float4*>(qh + 4) : make_float4(0, 0, 0, 0);
    const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
    for (int i = 0; i < 8; ++i) q[g][i] = v[i] * p.scale, acc[g][i] = 0;
    m[g] = -FLT_MAX, l[g] = 0;
  }

  const int64_t row_stride = static_cast<int64_t>(p.Hkv) * p.D;
  for (int s = s0 + warp; s < s1; s += kWarps * kTile) {
    uint4 kr[kTile], vr[kTile];
#pragma unroll
    for (int i = 0; i < kTile; ++i) {
      const int key = s + i * kWarps;
      const int64_t at = key * row_stride + kvh * p.D + d0;
      const bool on = key < s1 && dims;
      kr[i] = on ? __ldg(reinterpret_cast<const uint4*>(p.kc + at)) : make_uint4(0, 0, 0, 0);
      vr[i] = on ? __ldg(reinterpret_cast<const uint4*>(p.vc + at)) : make_uint4(0, 0, 0, 0);
    }
    float sc[kTile][kMaxGroup];
#pragma unroll
    for (int i = 0; i < kTile; ++i) {
      float k[8];
      widen8(kr[i], k);
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) {
        float d = 0;
#pragma unroll
        for (int e = 0; e < 8; ++e) d += q[g][e] * k[e];
        sc[i][g] = d;
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
      for (int i = 0; i < kTile; ++i)
#pragma unroll
        for (int g = 0; g < kMaxGroup; ++g) sc[i][g] += __shfl_xor_sync(0xffffffffu, sc[i][g], o);
    float v[kTile][8];
#pragma unroll
    for (int i = 0; i < kTile; ++i) widen8(vr[i], v[i]);
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) {
      float tile_max = sc[0][g];  // key s itself is always in range
#pragma unroll
      for (int i = 1; i < kTile; ++i)
        if (s + i * kWarps < s1) tile_max = fmaxf(tile_max, sc[i][g]);
      const float m_new = fmaxf(m[g], tile_max), corr = __expf(m[g] - m_new);
      float pr[kTile];
#pragma unroll
      for (int i = 0; i < kTile; ++i) pr[i] = s + i * kWarps < s1 ? __expf(sc[i][g] - m_new) : 0.0f;
      float tile_sum = 0;
#pragma unroll
      for (int i = 0; i < kTile; ++i) tile_sum += pr[i];
      l[g] = l[g] * corr + tile_sum;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        float a = acc[g][e] * corr;
#pragma unroll
        for (int i = 0; i < kTile; ++i) a += pr[i] * v[i][e];
        acc[g][e] = a;
      }
      m[g] = m_new;
    }
  }

  // Combine the warps' partial softmaxes.
  if (lane == 0)
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) m_sh[warp][g] = m[g], l_sh[warp][g] = l[g];
  if (dims)
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g)
#pragma unroll
      for (int e = 0; e < 8; ++e) acc_sh[warp][g][d0 + e] = acc[g][e];
  __syncthreads();
  for (int i = threadIdx.x; i < heads * p.D; i += blockDim.x) {
    const int g = i / p.D, d = i % p.D;
    float mx = -FLT_MAX;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, m_sh[w][g]);
    float a = 0, sum = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float f = __expf(m_sh[w][g] - mx);
      a += acc_sh[w][g][d] * f;
      sum += l_sh[w][g] * f;
    }
    float* out = p.partials + ((static_cast<int64_t>(t) * p.Hq + h0 + g) * p.splits + split) * (p.D + 2);
    if (d == 0) out[0] = mx, out[1] = sum;
    out[2 + d] = a;
  }
}

// Block (query head, token, slice of kMergeDims dims): merges the partials of the
// splits that hold keys, then applies the output gate. Each warp sums every
// kMergeWarps-th split (a lane holds 2 dims), and the warps' sums are added in a
// fixed order, so a deep cache's hundreds of splits are read by many warps at once.
__global__ void __launch_bounds__(32 * kMergeWarps) attention_merge_kernel(const __grid_constant__ AttentionParams p) {
  pdl_begin();
  __shared__ float weight[kMaxSplits];
  __shared__ float red[32];
  __shared__ float2 acc_sh[kMergeWarps][kMergeDims / 2];
  const int h = blockIdx.x, t = blockIdx.y, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int len = min(p.pos[t] + 1, p.n_ctx);
  const int used = min((len + p.chunk - 1) / p.chunk, p.splits);  // splits with s0 < len
  const int64_t stride = p.D + 2;
  const float* part = p.partials + (static_cast<int64_t>(t) * p.Hq + h) * p.splits * stride;
  // The splits' maxima (one per thread: kMaxSplits <= blockDim), then their weights.
  const int sp = threadIdx.x;
  const float m_sp = sp < used ? part[sp * stride] : -FLT_MAX;
  const float mx = block_max(m_sp, red);
  const float w = sp < used ? __expf(m_sp - mx) : 0.0f;
  if (sp < kMaxSplits) weight[sp] = w;
  const float sum = block_sum(sp < used ? part[sp * stride + 1] * w : 0.0f, red);  // syncs: weight[] is written
  const int d = blockIdx.z * kMergeDims + 2 * lane;
  float2 acc = make_float2(0, 0);
  if (d < p.D) {
    const float* col = part + 2 + d;
#pragma unroll 4
    for (int s = warp; s < used; s += kMergeWarps) {
      const float2 v = *reinterpret_cast<const float2*>(col + s * stride);
      acc.x += v.x * weight[s], acc.y += v.y * weight[s];
    }
  }
  acc_sh[warp][lane] = acc;
  __syncthreads();
  if (warp == 0 && d < p.D) {
    float2 a = acc_sh[0][lane];
    for (int w2 = 1; w2 < kMergeWarps; ++w2) a.x += acc_sh[w2][lane].x, a.y += acc_sh[w2][lane].y;
    const float inv = 1.0f / sum;
    const int64_t at = (static_cast<int64_t>(t) * p.Hq + h) * p.D + d;
    for (int e = 0; e < 2; ++e) {
      const float v = (e == 0 ? a.x : a.y) * inv;
      p.y[at + e] = p.gate ? v * sigmoid(p.gate[at + e]) : v;
    }
  }
}

__global__ void kv_store_kernel(const float* k, const float* v, __half* kc, __half* vc, const int32_t* pos,
                                int64_t row, int64_t n_ctx) {
  pdl_begin();
  const int t = blockIdx.y;
  const int p = pos[t];
  if (p < 0 || p >= n_ctx) return;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < row;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    kc[p * row + i] = __float2half_rn(k[t * row + i]);
    vc[p * row + i] = __float2half_rn(v[t * row + i]);
  }
}

}  // namespace

void kv_store(const float* k, const float* v, uint16_t* k_cache, uint16_t* v_cache, const int32_t* pos, int64_t row,
              int64_t n, int64_t n_ctx, cudaStream_t s) {
  const dim3 grid(std::min(ceil_div(row, 256), 16), static_cast<unsigned>(n));
  launch_pdl(kv_store_kernel, grid, 256, s, k, v, reinterpret_cast<__half*>(k_cache),
             reinterpret_cast<__half*>(v_cache), pos, row, n_ctx);
  ZINC_CUDA_LAUNCHED("kv_store");
}

bool attention_split_supported(const AttentionShape& s) { return s.head_dim % 8 == 0 && s.head_dim <= kMaxHeadDim; }

size_t attention_partials_floats(const AttentionShape& s) {
  const int64_t splits = (s.n_ctx + chunk_for(s) - 1) / chunk_for(s);
  return static_cast<size_t>(splits * s.n_head * s.n_tokens * (s.head_dim + 2));
}

void attention(const AttentionShape& s, const float* q, const uint16_t* k_cache, const uint16_t* v_cache,
               const int32_t* pos, float scale, const float* gate, float* partials, float* y, cudaStream_t st) {
  if (!attention_split_supported(s)) throw std::invalid_argument("cuda attention: head_dim must be a multiple of 8 up to 256");
  const int chunk = chunk_for(s);
  const AttentionParams p{q,
                          reinterpret_cast<const __half*>(k_cache),
                          reinterpret_cast<const __half*>(v_cache),
                          pos,
                          gate,
                          partials,
                          y,
                          scale,
                          static_cast<int>(s.head_dim),
                          static_cast<int>(s.n_head),
                          static_cast<int>(s.n_head_kv),
                          static_cast<int>(s.n_tokens),
                          static_cast<int>(s.n_ctx),
                          chunk,
                          ceil_div(s.n_ctx, chunk),
                          head_blocks_for(s)};
  const dim3 grid(p.splits, p.Hkv * p.head_blocks, p.n);
  launch_pdl(attention_split_kernel, grid, 32 * kWarps, st, p);
  ZINC_CUDA_LAUNCHED("attention_split");
  launch_pdl(attention_merge_kernel, dim3(p.Hq, p.n, ceil_div(p.D, kMergeDims)), 32 * kMergeWarps, st, p);
  ZINC_CUDA_LAUNCHED("attention_merge");
}

}  // namespace zinc::cuda
