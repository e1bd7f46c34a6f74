// The attention input stage (Backend::attention_prepare) in one launch: per token,
// one warp per query head (split query / gate, RMS norm, rope) and one per KV head
// (RMS norm and rope of k, then k and v rounded into the F16 caches). A decode step
// ran these as seven small kernels (two slices, two norms, two ropes, kv_store).
// A warp, not a block, per head: a prompt has tokens x heads of them (gpt-oss-20b:
// 512 x 72 a layer), and a block each made the launch a long queue of blocks that
// mostly waited on their barriers (87 us a layer, PERFORMANCE.md session 30). Each
// warp holds its head's row in shared memory: rope pairs dims across lanes.
// Only the loads of the head's row and of the gate or v wait for the previous kernel:
// the position, the rope's angles, the norm's weights and the projections' biases
// (gpt-oss: three adds a layer fewer) come before the wait.
#include <cuda_fp16.h>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

constexpr int kWarps = 4;  // heads a block
constexpr int kMaxHeadDim = 512;

struct PrepareParams {
  const float* qp;      // {2D, Hq, n} (query then gate per head) with gate, else {D, Hq, n}
  const float* k;       // {D, Hkv, n}
  const float* v;       // {D, Hkv, n}
  const float* q_norm;  // {D} or null
  const float* k_norm;  // {D} or null
  const int32_t* pos;   // {n}
  const float* freq_factors;  // {n_rot / 2} or null
  float* q;             // {D, Hq, n}, may alias qp without gate
  float* gate;          // {D, Hq, n} or null
  __half* kc;           // {D, Hkv, n_ctx}
  __half* vc;
  float eps, theta, freq_scale;
  int D, Hq, Hkv, n_ctx, n_rot, n_tokens;
  bool neox;
  const float* q_bias;  // {2D or D, Hq} (qp's rows) or null; last, so that the others keep their places
  const float* k_bias;  // {D, Hkv} or null
  const float* v_bias;  // {D, Hkv} or null
};
// One token for each of several sequences: token t's caches.
struct PrepareSeqsParams : PrepareParams {
  __half* kcs[kAttentionMaxSeqs];
  __half* vcs[kAttentionMaxSeqs];
};
__device__ __forceinline__ __half* k_cache_of(const PrepareParams& p, int) { return p.kc; }
__device__ __forceinline__ __half* v_cache_of(const PrepareParams& p, int) { return p.vc; }
__device__ __forceinline__ __half* k_cache_of(const PrepareSeqsParams& p, int t) { return p.kcs[t]; }
__device__ __forceinline__ __half* v_cache_of(const PrepareSeqsParams& p, int t) { return p.vcs[t]; }

// P dims a lane: head sizes up to 32 P. kBias: some projection has a bias (an instance of
// its own: with the bias code the flagship's step ran 2.1% slower on an H200, session 67).
template <class Params, int P, bool kBias>
__global__ void __launch_bounds__(32 * kWarps) attention_prepare_kernel(const __grid_constant__ Params p) {
  __shared__ float rows[kWarps][32 * P];
  __shared__ float inv_freq[kMaxHeadDim / 2];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, D = p.D, H = p.Hq + p.Hkv, half = p.n_rot / 2;
  // ---- before the wait: what no kernel of the step writes. The rope's frequencies, the
  // positions (copied in before the step's first kernel), the angles, the norm's weights
  // and the biases.
  for (int j = threadIdx.x; j < half; j += blockDim.x)
    inv_freq[j] = rope_inv_freq(p.theta, p.freq_scale, p.freq_factors, j, p.n_rot);
  __syncthreads();
  const int item = blockIdx.x * kWarps + warp;
  if (item >= p.n_tokens * H) return;
  const int t = item / H, h = item % H;
  const bool is_q = h < p.Hq;
  const int64_t head = is_q ? static_cast<int64_t>(t) * p.Hq + h : static_cast<int64_t>(t) * p.Hkv + (h - p.Hq);
  const float* src = is_q ? p.qp + head * (p.gate ? 2 * D : D) : p.k + head * D;
  const float* w = is_q ? p.q_norm : p.k_norm;
  // The biases of the head's row and of what goes out beside it (the gate, or v).
  const int64_t bias_row = is_q ? static_cast<int64_t>(h) * (p.gate ? 2 * D : D) : static_cast<int64_t>(h - p.Hq) * D;
  const float* bias = is_q ? p.q_bias : p.k_bias;
  const float* bias_beside = is_q ? (p.gate && p.q_bias ? p.q_bias + D : nullptr) : p.v_bias;
  float* row = rows[warp];

  const int position = p.pos[t];
  float wv[P], cs[P], sn[P], b[P], b_beside[P];
#pragma unroll
  for (int u = 0; u < P; ++u) {
    const int d = lane + 32 * u;
    wv[u] = w && d < D ? w[d] : 1.0f;
    b[u] = kBias && bias && d < D ? bias[bias_row + d] : 0.0f;
    b_beside[u] = kBias && bias_beside && d < D ? bias_beside[bias_row + d] : 0.0f;
    cs[u] = 1.0f, sn[u] = 0.0f;
    if (d < p.n_rot) sincosf(static_cast<float>(position) * inv_freq[p.neox ? d % half : d / 2], &sn[u], &cs[u]);
  }
  pdl_begin();
  if (!is_q && position < 0) return;
  const int64_t cache_row = kv_row(position, p.n_ctx);

  // ---- the head's row and what goes out beside it (the gate, or v), in one round trip ----
  float x[P], other[P];
  const float* beside = is_q ? (p.gate ? src + D : nullptr) : p.v + head * D;
#pragma unroll
  for (int u = 0; u < P; ++u) {
    const int d = lane + 32 * u;
    x[u] = d < D ? (kBias ? src[d] + b[u] : src[d]) : 0.0f;
    other[u] = beside && d < D ? (kBias ? beside[d] + b_beside[u] : beside[d]) : 0.0f;
  }
  float ss = 0;
#pragma unroll
  for (int u = 0; u < P; ++u) ss += x[u] * x[u];
  const float inv = w ? rsqrtf(warp_sum(ss) / D + p.eps) : 1.0f;
#pragma unroll
  for (int u = 0; u < P; ++u) {
    const int d = lane + 32 * u;
    if (d < D) row[d] = w ? x[u] * inv * wv[u] : x[u];
  }
  __syncwarp();  // rope pairs dims held by other lanes

#pragma unroll
  for (int u = 0; u < P; ++u) {
    const int d = lane + 32 * u;
    if (d >= D) continue;
    float out = row[d];
    if (d < p.n_rot) {
      const int j = p.neox ? d % half : d / 2;
      const int2 i = rope_dims(p.neox, j, half);
      const float a = row[i.x], b = row[i.y];
      out = d == i.x ? a * cs[u] - b * sn[u] : a * sn[u] + b * cs[u];
    }
    if (is_q) {
      p.q[head * D + d] = out;
      if (p.gate) p.gate[head * D + d] = other[u];
    } else {
      const int64_t at = (cache_row * p.Hkv + (h - p.Hq)) * D + d;
      k_cache_of(p, t)[at] = __float2half_rn(out);
      v_cache_of(p, t)[at] = __float2half_rn(other[u]);
    }
  }
}

template <int P, class Params>
void launch_prepare(const Params& p, cudaStream_t st) {
  const unsigned blocks =
      static_cast<unsigned>((static_cast<int64_t>(p.n_tokens) * (p.Hq + p.Hkv) + kWarps - 1) / kWarps);
  if (p.q_bias || p.k_bias || p.v_bias)
    launch_pdl(attention_prepare_kernel<Params, P, true>, dim3(blocks), dim3(32 * kWarps), st, p);
  else
    launch_pdl(attention_prepare_kernel<Params, P, false>, dim3(blocks), dim3(32 * kWarps), st, p);
}
template <class Params>
void launch_prepare(const Params& p, cudaStream_t st) {
  if (p.D <= 128) launch_prepare<4>(p, st);
  else if (p.D <= 256) launch_prepare<8>(p, st);
  else launch_prepare<16>(p, st);
}

}  // namespace

void attention_prepare(const AttentionShape& s, const float* qp, const float* k, const float* v, const QkvBias& bias,
                       const float* q_norm, const float* k_norm, float eps, const int32_t* pos, const RopeArgs& rope,
                       float* q, float* gate, uint16_t* const* k_caches, uint16_t* const* v_caches, int n_seqs,
                       cudaStream_t st) {
  if (s.head_dim > kMaxHeadDim) throw std::invalid_argument("cuda attention_prepare: head_dim above 512");
  if (n_seqs < 1 || n_seqs > kAttentionMaxSeqs || (n_seqs > 1 && n_seqs != s.n_tokens))
    throw std::invalid_argument("cuda attention_prepare: one sequence, or one token for each of at most 16");
  PrepareSeqsParams p{};
  p.qp = qp, p.k = k, p.v = v, p.q_norm = q_norm, p.k_norm = k_norm, p.pos = pos, p.freq_factors = rope.freq_factors;
  p.q_bias = bias.q, p.k_bias = bias.k, p.v_bias = bias.v;
  p.q = q, p.gate = gate, p.eps = eps, p.theta = rope.theta, p.freq_scale = rope.freq_scale;
  p.D = static_cast<int>(s.head_dim), p.Hq = static_cast<int>(s.n_head), p.Hkv = static_cast<int>(s.n_head_kv);
  p.n_ctx = static_cast<int>(s.n_ctx), p.n_rot = rope.n_rot, p.neox = rope.neox;
  p.n_tokens = static_cast<int>(s.n_tokens);
  p.kc = reinterpret_cast<__half*>(k_caches[0]), p.vc = reinterpret_cast<__half*>(v_caches[0]);
  for (int i = 0; i < n_seqs; ++i)
    p.kcs[i] = reinterpret_cast<__half*>(k_caches[i]), p.vcs[i] = reinterpret_cast<__half*>(v_caches[i]);
  if (n_seqs == 1) launch_prepare(PrepareParams(p), st);
  else launch_prepare(p, st);
  ZINC_CUDA_LAUNCHED("attention_prepare");
}

}  // namespace zinc::cuda
