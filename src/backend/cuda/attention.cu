// Causal GQA attention over F16 KV caches for a few queries (decode), flash-decoding
// style: the cache is cut into chunks, and one block per (chunk, KV head, token) runs
// an online softmax for all the query heads of the KV head's group (up to
// kMaxGroup of them) and writes a partial (max, sum, weighted V) per head; a second
// kernel merges the partials and applies the output gate. Each K/V row is read once
// per group rather than once per query head, in 16-byte loads: the decode step at
// depth is a stream over the cache. The grid depends on the cache size only, never
// on the positions (which live on the device), so a captured decode step replays
// at any position: each block finds its chunk from its query's position (chunk_of),
// and blocks past the position exit at once.
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
constexpr int kMaxSplits = 512;  // chunks of one cache (the merge keeps their weights in shared memory)
constexpr int kMinChunk = 64;    // keys per chunk, at least (and a multiple of it)
constexpr int kRoundKeys = 32;   // keys per round of a chunk: two rounds' rows are in shared memory
constexpr int kMergeWarps = 8;
constexpr int kMergeDims = 64;   // dims per merge block: 2 per lane

struct AttentionParams {
  const float* q;      // {D, Hq, n}
  const __half* kc;    // {D, Hkv, n_ctx}
  const __half* vc;
  const int32_t* pos;  // {n}
  const float* gate;   // {D, Hq, n}: y *= sigmoid(gate), or null
  float* partials;     // {D + 2, splits, Hq, n}: max, sum, then D weighted values
  float* y;            // {D, Hq, n}
  float scale;
  int D, Hq, Hkv, n, n_ctx, splits;  // splits: blocks per (KV head block, token) along the cache
  int head_blocks;  // blocks per KV head: ceil(group / kMaxGroup)
};

int head_blocks_for(const AttentionShape& s) {
  return static_cast<int>(ceil_div(s.n_head / s.n_head_kv, int64_t{kMaxGroup}));
}

int resident_split_blocks();

// The grid: one wave of blocks on the GPU (a block past the first wave could not
// start copying its rows while the kernel before it runs), and no more than the
// cache has chunks of kMinChunk keys.
int splits_for(const AttentionShape& s) {
  const int64_t others = s.n_head_kv * head_blocks_for(s) * s.n_tokens;
  const int64_t max_splits = std::clamp<int64_t>(resident_split_blocks() / others, 1, kMaxSplits);
  return static_cast<int>(std::clamp<int64_t>((s.n_ctx + kMinChunk - 1) / kMinChunk, 1, max_splits));
}

// The chunk of a query that sees `len` keys: its keys spread over the grid's splits
// in whole rounds, at least kMinChunk. It follows the position (on the device), not
// the cache size, so a long cache at a short position still spreads over many
// blocks (a captured step replays at any position).
__device__ __forceinline__ int chunk_of(const AttentionParams& p, int len) {
  const int c = (len + p.splits - 1) / p.splits;
  return max(kMinChunk, (c + kRoundKeys - 1) / kRoundKeys * kRoundKeys);
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
//
// The chunk goes in rounds of kRoundKeys keys. The first two rounds' rows are copied
// to shared memory before the kernel waits for the previous one (attention_prepare,
// which writes only the batch's own rows), so they stream in while that kernel
// runs; later rounds (chunks longer than two rounds) and the batch's own rows are
// read from the cache, a tile of keys in flight per warp.
__global__ void __launch_bounds__(32 * kWarps) attention_split_kernel(const __grid_constant__ AttentionParams p) {
  extern __shared__ uint4 kv_stage[];  // two rounds of K rows, then two of V rows
  __shared__ float m_sh[kWarps][kMaxGroup], l_sh[kWarps][kMaxGroup];
  __shared__ float acc_sh[kWarps][kMaxGroup][kMaxHeadDim];
  const int split = blockIdx.x, t = blockIdx.z;
  const int G = p.Hq / p.Hkv, kvh = blockIdx.y / p.head_blocks;
  const int h0 = kvh * G + blockIdx.y % p.head_blocks * kMaxGroup, heads = min(kMaxGroup, (kvh + 1) * G - h0);
  // Rows from the batch's first position on are written by the previous kernel; the
  // positions themselves were written by the host before the step.
  int fresh = p.pos[t];
  for (int u = 0; u < p.n; ++u) fresh = min(fresh, p.pos[u]);
  const int len = min(p.pos[t] + 1, p.n_ctx);
  const int chunk = chunk_of(p, len), s0 = split * chunk;
  if (s0 >= len) {  // the merge reads only splits below len
    pdl_begin();
    return;
  }
  const int s1 = min(s0 + chunk, len);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, d0 = lane * 8;
  const bool dims = d0 < p.D;
  const int64_t row_stride = static_cast<int64_t>(p.Hkv) * p.D;
  __half* k_s = reinterpret_cast<__half*>(kv_stage);  // [2][kRoundKeys][D]
  __half* v_s = k_s + 2 * kRoundKeys * p.D;
  const int rounds = (s1 - s0 + kRoundKeys - 1) / kRoundKeys;
  // Copies round r's old rows into buffer r (a warp per row, a lane per 16 bytes).
  const auto stage_round = [&](int r) {
    const int a = s0 + r * kRoundKeys, b = min(min(s1, fresh), a + kRoundKeys), n_rows = max(b - a, 0);
    for (int row = warp; row < 2 * n_rows; row += kWarps) {
      const bool is_v = row >= n_rows;
      const int key = a + (is_v ? row - n_rows : row);
      if (lane < p.D / 8)
        cp_async16((is_v ? v_s : k_s) + (r * kRoundKeys + key - a) * p.D + lane * 8,
                   (is_v ? p.vc : p.kc) + key * row_stride + kvh * p.D + lane * 8);
    }
    cp_async_commit();
  };
  stage_round(0);
  stage_round(1);
  pdl_begin();

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

  for (int r = 0; r < rounds; ++r) {
    const int k0 = s0 + r * kRoundKeys, k1 = min(s1, k0 + kRoundKeys);
    const __half* kb = k_s + min(r, 1) * kRoundKeys * p.D;
    const __half* vb = v_s + min(r, 1) * kRoundKeys * p.D;
    if (r < 2) {  // staged rounds
      r == 0 ? cp_async_wait<1>() : cp_async_wait<0>();
      __syncthreads();
    }
    for (int s = k0 + warp; s < k1; s += kWarps * kTile) {
      uint4 kr[kTile], vr[kTile];
#pragma unroll
      for (int i = 0; i < kTile; ++i) {
        const int key = s + i * kWarps;
        kr[i] = vr[i] = make_uint4(0, 0, 0, 0);
        if (key < k1 && dims && r < 2 && key < fresh) {
          kr[i] = *reinterpret_cast<const uint4*>(kb + (key - k0) * p.D + d0);
          vr[i] = *reinterpret_cast<const uint4*>(vb + (key - k0) * p.D + d0);
        } else if (key < k1 && dims) {
          const int64_t at = key * row_stride + kvh * p.D + d0;
          kr[i] = __ldg(reinterpret_cast<const uint4*>(p.kc + at));
          vr[i] = __ldg(reinterpret_cast<const uint4*>(p.vc + at));
        }
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
          if (s + i * kWarps < k1) tile_max = fmaxf(tile_max, sc[i][g]);
        const float m_new = fmaxf(m[g], tile_max), corr = __expf(m[g] - m_new);
        float pr[kTile];
#pragma unroll
        for (int i = 0; i < kTile; ++i) pr[i] = s + i * kWarps < k1 ? __expf(sc[i][g] - m_new) : 0.0f;
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
// kMergeWarps-th split (a lane holds 2 dims, eight splits' loads in flight), and
// the warps' sums are added in a fixed order, so a deep cache's hundreds of splits
// are read by many warps at once.
__global__ void __launch_bounds__(32 * kMergeWarps) attention_merge_kernel(const __grid_constant__ AttentionParams p) {
  pdl_begin();
  __shared__ float weight[kMaxSplits];
  __shared__ float red[32];
  __shared__ float2 acc_sh[kMergeWarps][kMergeDims / 2];
  const int h = blockIdx.x, t = blockIdx.y, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int len = min(p.pos[t] + 1, p.n_ctx);
  const int chunk = chunk_of(p, len), used = (len + chunk - 1) / chunk;  // splits with s0 < len
  const int64_t stride = p.D + 2;
  const float* part = p.partials + (static_cast<int64_t>(t) * p.Hq + h) * p.splits * stride;
  // The splits' maxima and sums (two splits per thread), then their weights.
  static_assert(kMaxSplits == 2 * 32 * kMergeWarps, "two splits per merge thread");
  float m_sp[2], l_sp[2];
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const int sp = threadIdx.x + u * blockDim.x;
    m_sp[u] = sp < used ? part[sp * stride] : -FLT_MAX;
    l_sp[u] = sp < used ? part[sp * stride + 1] : 0.0f;
  }
  const float mx = block_max(fmaxf(m_sp[0], m_sp[1]), red);
  float l_w = 0;
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const int sp = threadIdx.x + u * blockDim.x;
    const float w = sp < used ? __expf(m_sp[u] - mx) : 0.0f;
    weight[sp] = w;
    l_w += l_sp[u] * w;
  }
  const float sum = block_sum(l_w, red);  // syncs: weight[] is written
  const int d = blockIdx.z * kMergeDims + 2 * lane;
  float2 acc = make_float2(0, 0);
  if (d < p.D) {
    const float* col = part + 2 + d;
    constexpr int kBatch = 8;  // splits loaded before any is added
    for (int s = warp; s < used; s += kBatch * kMergeWarps) {
      float2 v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int su = s + u * kMergeWarps;
        v[u] = su < used ? *reinterpret_cast<const float2*>(col + su * stride) : make_float2(0, 0);
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int su = s + u * kMergeWarps;
        if (su < used) acc.x += v[u].x * weight[su], acc.y += v[u].y * weight[su];
      }
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

// Dynamic shared memory of a split block: two rounds of K rows and of V rows.
constexpr size_t split_stage_bytes(int64_t D) { return 2 * 2 * kRoundKeys * D * sizeof(__half); }

int resident_split_blocks() {
  static const int blocks = resident_blocks(attention_split_kernel, 32 * kWarps, split_stage_bytes(kMaxHeadDim));
  return blocks;
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
  const int64_t splits = splits_for(s);
  return static_cast<size_t>(splits * s.n_head * s.n_tokens * (s.head_dim + 2));
}

void attention(const AttentionShape& s, const float* q, const uint16_t* k_cache, const uint16_t* v_cache,
               const int32_t* pos, float scale, const float* gate, float* partials, float* y, cudaStream_t st) {
  if (!attention_split_supported(s)) throw std::invalid_argument("cuda attention: head_dim must be a multiple of 8 up to 256");
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
                          splits_for(s),
                          head_blocks_for(s)};
  const dim3 grid(p.splits, p.Hkv * p.head_blocks, p.n);
  resident_split_blocks();  // also allows the kernel its shared memory
  launch_pdl_smem(attention_split_kernel, grid, 32 * kWarps, split_stage_bytes(p.D), st, p);
  ZINC_CUDA_LAUNCHED("attention_split");
  launch_pdl(attention_merge_kernel, dim3(p.Hq, p.n, ceil_div(p.D, kMergeDims)), 32 * kMergeWarps, st, p);
  ZINC_CUDA_LAUNCHED("attention_merge");
}

}  // namespace zinc::cuda
