// Causal GQA attention for prefill (many queries), flash-attention style over the F16
// caches {D, Hkv, n_ctx}. A block takes 64 query rows of one KV head, where row r is
// (token r / G, query head r % G of the group) with G = Hq / Hkv, so all the heads of a
// group share each K/V tile the block brings in. Tiles of 32 keys are copied with
// cp.async into one of two buffers while the other is used; Q Kᵀ and P V run on
// tensor cores (mma m16n8k16, f16 in, f32 accumulate) with an online softmax in f32.
// Q is split into an f16 value and an f16 remainder, S = Qh K + Ql K: K is exactly
// f16, so the scores keep about 22 bits of Q (plain f16 scores flipped a near tie in
// a tiny test model's prefill, gpu-check). Positions are read on the device: row r
// sees keys 0..pos[t] (with a sliding window only the last `window` of them), and the
// block walks the keys from its rows' first to their largest position.
// An optional output gate multiplies each output by sigmoid(gate).
#include <cuda_fp16.h>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma_f16.cuh"

namespace zinc::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kRows = 16 * kWarps;  // query rows per block, 16 per warp
constexpr int kKeys = 32;           // keys per tile
constexpr float kLog2e = 1.4426950408889634f;

struct PrefillParams {
  const float* q;      // {D, Hq, n}
  const __half* kc;    // {D, Hkv, n_ctx}
  const __half* vc;
  const int32_t* pos;  // {n}
  const float* gate;   // {D, Hq, n} or null
  const float* sinks;  // {Hq} or null: one more softmax logit per head, with no value
  float* y;            // {D, Hq, n}
  float scale;
  int Hq, Hkv, n, n_ctx;
  int window;  // > 0: row r sees keys pos[t] - window + 1 .. pos[t] only
};

template <int D>
struct Smem {
  __half q[kRows][D + 8];  // 16 bytes of padding: ldmatrix rows hit distinct banks
  __half q_lo[kRows][D + 8];
  __half k[2][kKeys][D + 8];  // two buffers: the next tile arrives while this one is used
  __half v[2][kKeys][D + 8];
  int row_pos[kRows];        // last key each row sees, -1 for padding rows
  int row_first[kRows];      // first key each row sees
  int block_end[kWarps], block_begin[kWarps];
};

// Four floats as f16 (hi) and the f16 of what that rounding lost (lo).
__device__ __forceinline__ void split_half4(float4 x, uint2& hi, uint2& lo) {
  hi = make_uint2(pack_half2(x.x, x.y), pack_half2(x.z, x.w));
  lo = make_uint2(pack_half2_rest(x.x, x.y, hi.x), pack_half2_rest(x.z, x.w, hi.y));
}
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  const auto d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// Starts copying rows [s0, s0 + kKeys) of one KV head of both caches into buffer
// `buf`; rows at or past `end` become zeros.
template <int D>
__device__ __forceinline__ void stage_tile(Smem<D>& sh, int buf, const PrefillParams& p, int kvh, int s0, int end) {
  constexpr int kVec = D / 8;
  // Key s0's cache row; a ring wraps at most once within a tile
  // (attention_prefill_supported: the cache has at least kKeys rows).
  const int s0_row = kv_row(s0, p.n_ctx);
#pragma unroll 4
  for (int e = threadIdx.x; e < kKeys * kVec; e += kThreads) {
    const int i = e / kVec, c8 = e % kVec * 8;
    const bool valid = s0 + i < end;
    const int64_t at = valid ? (static_cast<int64_t>(kv_row_after(s0_row, i, p.n_ctx)) * p.Hkv + kvh) * D + c8 : 0;
    cp_async16(&sh.k[buf][i][c8], p.kc + at, valid);
    cp_async16(&sh.v[buf][i][c8], p.vc + at, valid);
  }
}

template <int D>
__global__ void __launch_bounds__(kThreads) attention_prefill_kernel(const __grid_constant__ PrefillParams p) {
  extern __shared__ float4 smem_raw[];
  auto& sh = *reinterpret_cast<Smem<D>*>(smem_raw);
  const int G = p.Hq / p.Hkv, kvh = blockIdx.y, r0 = blockIdx.x * kRows;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, qg = lane / 4, qc = lane % 4;

  // Queries, pre-scaled so the softmax can use exp2.
  const float qscale = p.scale * kLog2e;
  constexpr int kVec = D / 4;
  for (int e = threadIdx.x; e < kRows * kVec; e += kThreads) {
    const int r = e / kVec, c4 = e % kVec * 4, row = r0 + r;
    float4 v = make_float4(0, 0, 0, 0);
    if (row < p.n * G) {
      const int t = row / G, h = kvh * G + row % G;
      v = __ldg(reinterpret_cast<const float4*>(p.q + (static_cast<int64_t>(t) * p.Hq + h) * D + c4));
    }
    split_half4(make_float4(v.x * qscale, v.y * qscale, v.z * qscale, v.w * qscale),
                *reinterpret_cast<uint2*>(&sh.q[r][c4]), *reinterpret_cast<uint2*>(&sh.q_lo[r][c4]));
  }
  if (threadIdx.x < kRows) {
    const int row = r0 + threadIdx.x;
    const int last = row < p.n * G ? p.pos[row / G] : -1;
    const int first = p.window > 0 ? max(0, last - p.window + 1) : 0;
    sh.row_pos[threadIdx.x] = last;
    sh.row_first[threadIdx.x] = first;
    const int m = __reduce_max_sync(0xffffffffu, last);
    // Padding rows (last -1) see nothing and do not hold the block's start back.
    const int f = static_cast<int>(__reduce_min_sync(0xffffffffu, last < 0 ? 0x7fffffffu : first));
    if (lane == 0) sh.block_end[warp] = m + 1, sh.block_begin[warp] = f;
  }
  __syncthreads();
  int end = 0, begin = 0x7fffffff;
#pragma unroll
  for (int w = 0; w < kRows / 32; ++w) end = max(end, sh.block_end[w]), begin = min(begin, sh.block_begin[w]);
  begin = begin >= end ? 0 : begin / kKeys * kKeys;  // whole tiles from the first key any row sees
  const int my_pos[2] = {sh.row_pos[16 * warp + qg], sh.row_pos[16 * warp + qg + 8]};
  const int my_first[2] = {sh.row_first[16 * warp + qg], sh.row_first[16 * warp + qg + 8]};

  float acc[D / 8][4] = {};
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0, 0};
  stage_tile(sh, 0, p, kvh, begin, end);
  for (int s0 = begin, buf = 0; s0 < end; s0 += kKeys, buf ^= 1) {
    cp_async_wait_all();
    __syncthreads();  // the tile has arrived, and every warp is done with the other buffer
    if (s0 + kKeys < end) stage_tile(sh, buf ^ 1, p, kvh, s0 + kKeys, end);

    // S = Q Kᵀ for this warp's 16 rows and the tile's 64 keys.
    float s[kKeys / 8][4] = {};
#pragma unroll
    for (int k0 = 0; k0 < D; k0 += 16) {
      uint32_t a[4], a_lo[4];
      ldmatrix_x4(a, &sh.q[16 * warp + lane % 16][k0 + (lane / 16) * 8]);
      ldmatrix_x4(a_lo, &sh.q_lo[16 * warp + lane % 16][k0 + (lane / 16) * 8]);
#pragma unroll
      for (int jb = 0; jb < kKeys / 16; ++jb) {
        uint32_t b[4];  // keys 16jb..: b0, b1 of n-tile 2jb, then of 2jb+1
        const int key = 16 * jb + (lane & 7) + ((lane >> 4) << 3), dim = k0 + ((lane >> 3) & 1) * 8;
        ldmatrix_x4(b, &sh.k[buf][key][dim]);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          mma_f16(s[2 * jb + h], a_lo, b[2 * h], b[2 * h + 1]);
          mma_f16(s[2 * jb + h], a, b[2 * h], b[2 * h + 1]);
        }
      }
    }

    // Mask, then the online softmax (each row's 64 scores sit in the 4 lanes of a quad).
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < kKeys / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = s0 + 8 * j + 2 * qc + e % 2;
        if (key > my_pos[e / 2] || key < my_first[e / 2]) s[j][e] = -INFINITY;
        tile_max[e / 2] = fmaxf(tile_max[e / 2], s[j][e]);
      }
    float base[2], corr[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
      const float m_new = fmaxf(m_run[r], tile_max[r]);
      base[r] = m_new == -INFINITY ? 0.0f : m_new;  // a row with no key yet keeps zeros
      corr[r] = exp2f(m_run[r] - base[r]);
      m_run[r] = m_new;
      l_run[r] *= corr[r];
    }
    uint32_t pa[kKeys / 16][4];
#pragma unroll
    for (int j = 0; j < kKeys / 8; ++j) {
      float pr[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        pr[e] = exp2f(s[j][e] - base[e / 2]);
        l_run[e / 2] += pr[e];
      }
      // The C layout of two adjacent n-tiles is the A layout of one k-step of P V.
      pa[j / 2][(j % 2) * 2 + 0] = pack_half2(pr[0], pr[1]);
      pa[j / 2][(j % 2) * 2 + 1] = pack_half2(pr[2], pr[3]);
    }
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[j][e] *= corr[e / 2];

    // O += P V.
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk)
#pragma unroll
      for (int d0 = 0; d0 < D; d0 += 16) {
        uint32_t b[4];  // dims d0..: b0, b1 of n-tile d0/8, then of d0/8 + 1
        ldmatrix_x4_trans(b, &sh.v[buf][16 * kk + (lane & 7) + ((lane >> 3) & 1) * 8][d0 + (lane >> 4) * 8]);
        mma_f16(acc[d0 / 8], pa[kk], b[0], b[1]);
        mma_f16(acc[d0 / 8 + 1], pa[kk], b[2], b[3]);
      }
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = r0 + 16 * warp + qg + 8 * r;
    if (my_pos[r] < 0) continue;
    const int t = row / G, h = kvh * G + row % G;
    const int64_t at = (static_cast<int64_t>(t) * p.Hq + h) * D;
    float inv = 1.0f / l_run[r];
    if (p.sinks) {  // in the scores' log2 units, against the row's running maximum
      const float sink = p.sinks[h] * kLog2e, m = fmaxf(m_run[r], sink);
      const float keep = exp2f(m_run[r] - m);
      inv = keep / (l_run[r] * keep + exp2f(sink - m));
    }
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      float2 o = make_float2(acc[j][2 * r] * inv, acc[j][2 * r + 1] * inv);
      if (p.gate) {
        const float2 g = *reinterpret_cast<const float2*>(p.gate + at + 8 * j + 2 * qc);
        o.x *= sigmoid(g.x), o.y *= sigmoid(g.y);
      }
      *reinterpret_cast<float2*>(p.y + at + 8 * j + 2 * qc) = o;
    }
  }
}

template <int D>
void launch(const PrefillParams& p, cudaStream_t s) {
  constexpr size_t kBytes = sizeof(Smem<D>);
  allow_smem<attention_prefill_kernel<D>>(kBytes);
  const dim3 grid(ceil_div(static_cast<int64_t>(p.n) * (p.Hq / p.Hkv), kRows), p.Hkv);
  attention_prefill_kernel<D><<<grid, kThreads, kBytes, s>>>(p);
  ZINC_CUDA_LAUNCHED("attention_prefill");
}

}  // namespace

bool attention_prefill_supported(const AttentionShape& s) {
  return s.n_tokens >= kAttentionPrefillMinTokens && s.n_ctx >= kKeys &&
         (s.head_dim == 64 || s.head_dim == 128 || s.head_dim == 256);
}

void attention_prefill(const AttentionShape& s, const float* q, const uint16_t* k_cache, const uint16_t* v_cache,
                       const int32_t* pos, float scale, int window, const float* gate, const float* sinks, float* y,
                       cudaStream_t st) {
  const PrefillParams p{q,
                        reinterpret_cast<const __half*>(k_cache),
                        reinterpret_cast<const __half*>(v_cache),
                        pos,
                        gate,
                        sinks,
                        y,
                        scale,
                        static_cast<int>(s.n_head),
                        static_cast<int>(s.n_head_kv),
                        static_cast<int>(s.n_tokens),
                        static_cast<int>(s.n_ctx),
                        window};
  switch (s.head_dim) {
    case 64: launch<64>(p, st); break;
    case 128: launch<128>(p, st); break;
    case 256: launch<256>(p, st); break;
    default: throw std::invalid_argument("cuda attention_prefill: head_dim must be 64, 128 or 256");
  }
}

}  // namespace zinc::cuda
