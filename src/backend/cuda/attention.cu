// Causal GQA attention over F16 KV caches for a few queries (decode: one sequence's,
// or one query for each of several sequences), flash-decoding style: the cache is cut
// into chunks, and one block per (chunk, KV head, token) runs an online softmax for
// all the query heads of the KV head's group (up to kMaxGroup of them) and writes a
// partial (max, sum, weighted V) per head; a second kernel merges the partials and
// applies the output gate. Each K/V row is read once per group rather than once per
// query head: the decode step at depth is a stream over the cache. The grid depends
// on the cache size only, never on the positions (which live on the device), so a
// captured decode step replays at any position: each block finds its chunk from its
// query's position (chunk_of), and blocks past the position exit at once.
//
// The products run on tensor cores (mma m16n8k16, f16 in, f32 accumulate). The
// group's heads are the rows of a 16-row tile twice over: rows 0-7 hold each head's
// query in f16 and rows 8-15 the f16 of what that rounding lost, so a head's score
// is the sum of its two rows and keeps about 22 bits of q (K is exactly f16). P V
// takes the same shape: rows 0-7 hold the probabilities in f16, rows 8-15 their
// rest. The split costs no extra products, since a group has at most 8 heads.
#include <cuda_fp16.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <stdexcept>
#include <type_traits>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma_f16.cuh"

namespace zinc::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxGroup = 8;     // query heads per block: rows 0-7 of the tile
constexpr int kTileKeys = 16;    // keys per warp tile: the m16n8k16 k of P V
constexpr int kStages = 2;       // tiles of a warp in flight (its own ring)
constexpr int kMaxSplits = 512;  // chunks of one cache (the merge keeps their weights in shared memory)
constexpr int kRoundKeys = kWarps * kTileKeys;  // a chunk is whole rounds of the block's warps
constexpr int kMinChunk = kRoundKeys;
constexpr int kMergeWarps = 8;
constexpr int kMergeDims = 64;  // dims per merge block: 2 per lane
constexpr float kLog2e = 1.4426950408889634f;

struct AttentionParams {
  const float* q;      // {D, Hq, n}
  const __half* kc;    // {D, Hkv, n_ctx}
  const __half* vc;
  const int32_t* pos;  // {n}
  const float* gate;   // {D, Hq, n}: y *= sigmoid(gate), or null
  const float* sinks;  // {Hq}: one more softmax logit per head with no value, or null
  float* partials;     // {D + 2, splits, Hq, n}: max, sum, then D weighted values
  float* y;            // {D, Hq, n}
  float scale;
  int window;  // > 0: a query sees only its last `window` positions
  int D, Hq, Hkv, n, n_ctx, splits;  // splits: blocks per (KV head block, token) along the cache
  int head_blocks;  // blocks per KV head: ceil(group / kMaxGroup)
};
// One token for each of several sequences: token t's caches (the single-sequence
// parameters stay as small as they were).
struct AttentionSeqsParams : AttentionParams {
  const __half* kcs[kAttentionMaxSeqs];
  const __half* vcs[kAttentionMaxSeqs];
};
__device__ __forceinline__ const __half* k_cache_of(const AttentionParams& p, int) { return p.kc; }
__device__ __forceinline__ const __half* v_cache_of(const AttentionParams& p, int) { return p.vc; }
__device__ __forceinline__ const __half* k_cache_of(const AttentionSeqsParams& p, int t) { return p.kcs[t]; }
__device__ __forceinline__ const __half* v_cache_of(const AttentionSeqsParams& p, int t) { return p.vcs[t]; }

int head_blocks_for(const AttentionShape& s) {
  return static_cast<int>(ceil_div(s.n_head / s.n_head_kv, int64_t{kMaxGroup}));
}

// Shared memory of a split block: each warp's ring of K and V tiles (rows padded by
// 16 bytes so that ldmatrix's rows hit distinct banks), then the query fragments.
template <int D>
struct SplitSmem {
  __half k[kWarps][kStages][kTileKeys][D + 8];
  __half v[kWarps][kStages][kTileKeys][D + 8];
  uint4 q[D / 16][32];  // the A fragment of k-step kk for each lane
};
// After the keys: each warp's softmax state and unnormalized outputs (in the rings' place).
template <int D>
struct SplitCombine {
  float m[kWarps][kMaxGroup], l[kWarps][kMaxGroup];
  float o[kWarps][kMaxGroup][D];
};

int resident_split_blocks(int64_t head_dim);

// The grid: one wave of blocks on the GPU (a block past the first wave could not
// start copying its rows while the kernel before it runs), and no more than the
// cache has chunks of kMinChunk keys.
int splits_for(const AttentionShape& s) {
  const int64_t others = s.n_head_kv * head_blocks_for(s) * s.n_tokens;
  const int64_t max_splits = std::clamp<int64_t>(resident_split_blocks(s.head_dim) / others, 1, kMaxSplits);
  return static_cast<int>(std::clamp<int64_t>((s.n_ctx + kMinChunk - 1) / kMinChunk, 1, max_splits));
}

// The keys [first, end) query t sees: all up to its position, or with a sliding
// window the last `window` of them.
struct KeyRange {
  int first, end;
};
__device__ __forceinline__ KeyRange keys_of(const AttentionParams& p, int t) {
  const int end = p.pos[t] + 1;
  return {p.window > 0 ? max(0, end - p.window) : 0, end};
}

// The chunk of a query that sees `len` keys: its keys spread over the grid's splits
// in whole rounds, at least kMinChunk. It follows the position (on the device), not
// the cache size, so a long cache at a short position still spreads over many
// blocks (a captured step replays at any position).
__device__ __forceinline__ int chunk_of(const AttentionParams& p, int len) {
  const int c = (len + p.splits - 1) / p.splits;
  return max(kMinChunk, (c + kRoundKeys - 1) / kRoundKeys * kRoundKeys);
}

// Warp w takes tiles w, w + kWarps, ... of 16 keys of the block's chunk [s0, s1),
// each through its own ring of kStages slots filled with 16-byte cp.async copies, so
// no warp waits for another until the end. The first kStages tiles' rows of keys
// below `fresh` are copied before the kernel waits for the previous one (earlier
// passes wrote them; attention_prepare writes the batch's own rows, from `fresh` on):
// the rest follow after the wait.
template <int D, class Params>
__global__ void __launch_bounds__(32 * kWarps, 1) attention_split_kernel(const __grid_constant__ Params p) {
  extern __shared__ uint4 smem_raw[];
  static_assert(sizeof(SplitCombine<D>) <= sizeof(SplitSmem<D>));
  auto& sh = *reinterpret_cast<SplitSmem<D>*>(smem_raw);
  const int split = blockIdx.x, t = blockIdx.z;
  const int G = p.Hq / p.Hkv, kvh = blockIdx.y / p.head_blocks;
  const int h0 = kvh * G + blockIdx.y % p.head_blocks * kMaxGroup, heads = min(kMaxGroup, (kvh + 1) * G - h0);
  // Keys from `fresh` on are copied after the wait. Several queries of one sequence
  // copy everything after it: they may be a later piece of a chunk over a sliding
  // window's ring (blocks::attention), whose earlier piece's rows, below the queries'
  // positions, an earlier kernel of the same pass may still be writing.
  int fresh = p.pos[t];
  if constexpr (!std::is_same_v<Params, AttentionSeqsParams>)
    if (p.n > 1) fresh = 0;
  const KeyRange keys = keys_of(p, t);
  const int chunk = chunk_of(p, keys.end - keys.first), s0 = keys.first + split * chunk;
  if (s0 >= keys.end) {  // the merge reads only splits below the range's end
    pdl_begin();
    return;
  }
  const int s1 = min(s0 + chunk, keys.end);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, qg = lane / 4, qc = lane % 4;
  const int tiles = ((s1 - s0 + kTileKeys - 1) / kTileKeys - warp + kWarps - 1) / kWarps;  // this warp's
  const int64_t row_stride = static_cast<int64_t>(p.Hkv) * D;
  const __half* kc = k_cache_of(p, t) + kvh * D;
  const __half* vc = v_cache_of(p, t) + kvh * D;

  const auto tile_base = [&](int i) { return s0 + (warp + i * kWarps) * kTileKeys; };  // first key of tile i
  // Key s0's cache row; the chunk spans no more keys than the cache has rows, so a
  // ring wraps at most once within it.
  const int s0_row = kv_row(s0, p.n_ctx);
  // Copies the rows of the warp's tile i whose keys are in [lo, hi); rows past the
  // chunk repeat its last key (finite values, masked below).
  constexpr int kVecs = D / 8;  // 16-byte pieces per row
  constexpr int kAnyKey = 0x7fffffff;
  const auto issue = [&](int i, int lo, int hi) {
    if (i >= tiles) return;
#pragma unroll 4
    for (int e = lane; e < kTileKeys * kVecs; e += 32) {
      const int r = e / kVecs, c = e % kVecs * 8, key = min(tile_base(i) + r, s1 - 1);
      if (key < lo || key >= hi) continue;
      const int64_t at = kv_row_after(s0_row, key - s0, p.n_ctx) * row_stride + c;
      cp_async16(&sh.k[warp][i % kStages][r][c], kc + at);
      cp_async16(&sh.v[warp][i % kStages][r][c], vc + at);
    }
  };
#pragma unroll
  for (int i = 0; i < kStages; ++i) {
    issue(i, 0, fresh);
    cp_async_commit();
  }
  pdl_begin();
  // The warp's first tiles may hold the batch's own rows (only the block of the last chunk).
  bool has_fresh = false;
#pragma unroll
  for (int i = 0; i < kStages; ++i) {
    has_fresh |= i < tiles && min(tile_base(i) + kTileKeys, s1) > fresh;
    issue(i, fresh, kAnyKey);
  }
  cp_async_commit();

  // The query fragments, pre-scaled so that the softmax can use exp2: lane (qg, qc)
  // holds rows qg (f16) and qg + 8 (rest) at dims 2qc, 2qc + 1 and 8 more.
  for (int e = threadIdx.x; e < D / 16 * 32; e += 32 * kWarps) {
    const int kk = e / 32, g = e % 32 / 4, c = kk * 16 + e % 4 * 2;
    float2 a = make_float2(0, 0), b = make_float2(0, 0);
    if (g < heads) {
      const float* qh = p.q + (static_cast<int64_t>(t) * p.Hq + h0 + g) * D + c;
      a = *reinterpret_cast<const float2*>(qh);
      b = *reinterpret_cast<const float2*>(qh + 8);
    }
    const float f = p.scale * kLog2e;
    a.x *= f, a.y *= f, b.x *= f, b.y *= f;
    const uint32_t ah = pack_half2(a.x, a.y), bh = pack_half2(b.x, b.y);
    sh.q[kk][e % 32] = make_uint4(ah, pack_half2_rest(a.x, a.y, ah), bh, pack_half2_rest(b.x, b.y, bh));
  }
  __syncthreads();

  float acc[D / 8][4] = {};
  float m_run = -INFINITY, l_run = 0;  // head qg's, over this warp's keys (l: this lane's part)
  for (int i = 0; i < tiles; ++i) {
    if (i == 0 && has_fresh) cp_async_wait<0>();
    else if (i < kStages) cp_async_wait<kStages>();
    else cp_async_wait<kStages - 1>();
    __syncwarp();
    const int slot = i % kStages, base = tile_base(i);

    // S = Q Kᵀ: two n-tiles of 8 keys; a head's score is its row plus its rest's.
    float s[2][4] = {};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint4 qa = sh.q[kk][lane];
      const uint32_t a[4] = {qa.x, qa.y, qa.z, qa.w};
      uint32_t b[4];
      ldmatrix_x4(b, &sh.k[warp][slot][(lane & 7) + ((lane >> 4) << 3)][kk * 16 + ((lane >> 3) & 1) * 8]);
      mma_f16(s[0], a, b[0], b[1]);
      mma_f16(s[1], a, b[2], b[3]);
    }
    float sc[2][2], tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int key = base + 8 * j + 2 * qc + e;
        sc[j][e] = key < s1 ? s[j][e] + s[j][e + 2] : -INFINITY;
        tile_max = fmaxf(tile_max, sc[j][e]);
      }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    const float m_new = fmaxf(m_run, tile_max), corr = exp2f(m_run - m_new);  // key `base` is in range
    m_run = m_new;
    l_run *= corr;
    uint32_t pa[4];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const float p0 = exp2f(sc[j][0] - m_new), p1 = exp2f(sc[j][1] - m_new);
      l_run += p0 + p1;
      pa[2 * j] = pack_half2(p0, p1);
      pa[2 * j + 1] = pack_half2_rest(p0, p1, pa[2 * j]);
    }
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[j][e] *= corr;
    // O += P V (rows 0-7 the probabilities' f16, rows 8-15 their rest).
#pragma unroll
    for (int d0 = 0; d0 < D; d0 += 16) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, &sh.v[warp][slot][(lane & 7) + ((lane >> 3) & 1) * 8][d0 + (lane >> 4) * 8]);
      mma_f16(acc[d0 / 8], pa, b[0], b[1]);
      mma_f16(acc[d0 / 8 + 1], pa, b[2], b[3]);
    }
    __syncwarp();  // every lane is done with the slot
    issue(i + kStages, 0, kAnyKey);
    cp_async_commit();
  }

  // Combine the warps' partial softmaxes (in the rings' place).
  cp_async_wait<0>();
  __syncthreads();
  auto& cb = *reinterpret_cast<SplitCombine<D>*>(smem_raw);
  l_run += __shfl_xor_sync(0xffffffffu, l_run, 1);
  l_run += __shfl_xor_sync(0xffffffffu, l_run, 2);
  if (qc == 0) cb.m[warp][qg] = m_run * (1.0f / kLog2e), cb.l[warp][qg] = l_run;  // natural-log units
#pragma unroll
  for (int j = 0; j < D / 8; ++j)
    *reinterpret_cast<float2*>(&cb.o[warp][qg][8 * j + 2 * qc]) =
        make_float2(acc[j][0] + acc[j][2], acc[j][1] + acc[j][3]);
  __syncthreads();
  for (int i = threadIdx.x; i < heads * D; i += blockDim.x) {
    const int g = i / D, d = i % D;
    float mx = -FLT_MAX;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, cb.m[w][g]);
    float a = 0, sum = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float f = __expf(cb.m[w][g] - mx);  // 0 for a warp without keys
      a += cb.o[w][g][d] * f;
      sum += cb.l[w][g] * f;
    }
    float* out = p.partials + ((static_cast<int64_t>(t) * p.Hq + h0 + g) * p.splits + split) * (D + 2);
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
  __shared__ float weight[kMaxSplits];
  __shared__ float red[32];
  __shared__ float2 acc_sh[kMergeWarps][kMergeDims / 2];
  const int h = blockIdx.x, t = blockIdx.y, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  // The positions were copied in before the step's first kernel: the split count is
  // known before the wait, which only the partials and the gate need.
  const KeyRange keys = keys_of(p, t);
  const int len = keys.end - keys.first;
  const int chunk = chunk_of(p, len), used = (len + chunk - 1) / chunk;  // splits with s0 < the range's end
  pdl_begin();
  // Warp 0 writes the outputs: their gate values load beside the splits' maxima.
  const int d = blockIdx.z * kMergeDims + 2 * lane;
  const int64_t at = (static_cast<int64_t>(t) * p.Hq + h) * p.D + d;
  float2 gate = make_float2(0, 0);
  if (p.gate && warp == 0 && d < p.D) gate = make_float2(p.gate[at], p.gate[at + 1]);
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
  float sum = block_sum(l_w, red);  // syncs: weight[] is written
  float keep = 1;  // the share of the keys' weight a sink leaves
  if (p.sinks) {
    const float sink = p.sinks[h], m = fmaxf(mx, sink);
    keep = __expf(mx - m);
    sum = sum * keep + __expf(sink - m);
  }
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
    const float inv = keep / sum;
    for (int e = 0; e < 2; ++e) {
      const float v = (e == 0 ? a.x : a.y) * inv;
      p.y[at + e] = p.gate ? v * sigmoid(e == 0 ? gate.x : gate.y) : v;
    }
  }
}

__global__ void kv_store_kernel(const float* k, const float* v, __half* kc, __half* vc, const int32_t* pos,
                                int64_t row, int64_t n_ctx) {
  pdl_begin();
  const int t = blockIdx.y;
  const int p = pos[t];
  if (p < 0) return;
  const int64_t at = kv_row(p, static_cast<int>(n_ctx)) * row;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < row;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    kc[at + i] = __float2half_rn(k[t * row + i]);
    vc[at + i] = __float2half_rn(v[t * row + i]);
  }
}

template <int D>
int resident_split_blocks_for() {
  static const int blocks = [] {
    allow_smem<attention_split_kernel<D, AttentionSeqsParams>>(sizeof(SplitSmem<D>));
    return resident_blocks<attention_split_kernel<D, AttentionParams>>(32 * kWarps, sizeof(SplitSmem<D>));
  }();
  return blocks;
}

// Head sizes of the split kernel: those of the supported models and their tiny tests.
template <class F>
void dispatch_head_dim(int64_t head_dim, F&& f) {
  switch (head_dim) {
    case 32: return f(std::integral_constant<int, 32>{});
    case 64: return f(std::integral_constant<int, 64>{});
    case 128: return f(std::integral_constant<int, 128>{});
    case 256: return f(std::integral_constant<int, 256>{});
    default: throw std::invalid_argument("cuda attention: head_dim must be 32, 64, 128 or 256");
  }
}

int resident_split_blocks(int64_t head_dim) {
  int blocks = 0;
  dispatch_head_dim(head_dim, [&](auto d) { blocks = resident_split_blocks_for<decltype(d)::value>(); });
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

bool attention_split_supported(const AttentionShape& s) {
  return s.head_dim == 32 || s.head_dim == 64 || s.head_dim == 128 || s.head_dim == 256;
}

size_t attention_partials_floats(const AttentionShape& s) {
  const int64_t splits = splits_for(s);
  return static_cast<size_t>(splits * s.n_head * s.n_tokens * (s.head_dim + 2));
}

void attention(const AttentionShape& s, const float* q, const uint16_t* const* k_caches,
               const uint16_t* const* v_caches, int n_seqs, const int32_t* pos, float scale, int window,
               const float* gate, const float* sinks, float* partials, float* y, cudaStream_t st) {
  if (n_seqs < 1 || n_seqs > kAttentionMaxSeqs || (n_seqs > 1 && n_seqs != s.n_tokens))
    throw std::invalid_argument("cuda attention: one sequence, or one token for each of at most 16");
  AttentionSeqsParams p{};
  p.q = q, p.pos = pos, p.gate = gate, p.sinks = sinks, p.partials = partials, p.y = y, p.scale = scale,
      p.window = window;
  p.D = static_cast<int>(s.head_dim), p.Hq = static_cast<int>(s.n_head), p.Hkv = static_cast<int>(s.n_head_kv);
  p.n = static_cast<int>(s.n_tokens), p.n_ctx = static_cast<int>(s.n_ctx), p.splits = splits_for(s);
  p.head_blocks = head_blocks_for(s);
  p.kc = reinterpret_cast<const __half*>(k_caches[0]), p.vc = reinterpret_cast<const __half*>(v_caches[0]);
  for (int i = 0; i < n_seqs; ++i)
    p.kcs[i] = reinterpret_cast<const __half*>(k_caches[i]), p.vcs[i] = reinterpret_cast<const __half*>(v_caches[i]);
  const AttentionParams& one = p;
  const dim3 grid(p.splits, p.Hkv * p.head_blocks, p.n);
  dispatch_head_dim(s.head_dim, [&](auto d) {
    constexpr int D = decltype(d)::value;
    resident_split_blocks_for<D>();  // also allows the kernels their shared memory
    if (n_seqs == 1)
      launch_pdl_smem(attention_split_kernel<D, AttentionParams>, grid, 32 * kWarps, sizeof(SplitSmem<D>), st, one);
    else
      launch_pdl_smem(attention_split_kernel<D, AttentionSeqsParams>, grid, 32 * kWarps, sizeof(SplitSmem<D>), st, p);
  });
  ZINC_CUDA_LAUNCHED("attention_split");
  launch_pdl(attention_merge_kernel, dim3(p.Hq, p.n, ceil_div(p.D, kMergeDims)), 32 * kMergeWarps, st, one);
  ZINC_CUDA_LAUNCHED("attention_merge");
}

}  // namespace zinc::cuda
