// The Gated DeltaNet input stage in one launch: causal conv + SiLU of the fused qkv
// projection, its split into q, k, v, the per-head L2 norms of q and k, and the
// gates g, beta. A block takes one head (or the gates) over a run of tokens. At
// decode each piece is a few kilobytes, so separate launches (seven of them) would
// cost far more than their work; in prefill the fusion saves writing the conv output
// and reading it back three times (split, then two norms).
#include <stdexcept>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kPerThread = 4;      // channels of a head per thread: heads up to 512 wide
constexpr int kMaxConvKernel = 8;  // as the standalone conv kernel
constexpr int kDecodeTokens = static_cast<int>(kGdnPrepareMaxTokens);  // one run, conv state written back
constexpr int kRunTokens = 16;  // prefill: tokens per block; the conv state is updated by a launch after

// Input j of channel c, counting the K-1 conv-state columns first.
__device__ __forceinline__ float conv_input(const float* x, const float* state, int C, int K, int c, int64_t j) {
  return j < K - 1 ? state[j * C + c] : x[(j - (K - 1)) * C + c];
}

struct GdnPrepareParams {
  const float* qkv;  // {C, n}
  const float* conv_w;  // {K, C}
  float* conv_state;    // {C, K-1}, oldest first
  const float* a;       // {H, n}
  const float* b;       // {H, n}
  const float* dt_bias;  // {H}
  const float* a_neg;    // {H}
  float* q;     // {dk, Hk, n}
  float* k;     // {dk, Hk, n}
  float* v;     // {dv, H, n}
  float* g;     // {H, n}
  float* beta;  // {H, n}
  float eps;
  int n, H, Hk, dk, dv, K;
};

// grid (2·Hk + H + 1, token runs of kTokens). Block b < 2·Hk + H: one head of q
// (b < Hk), k or v; the last: the gates. With kSingleRun (all tokens in one run) the
// block also writes its channels' conv state back.
template <int kTokens, bool kSingleRun>
__global__ void __launch_bounds__(kThreads) gdn_prepare_kernel(const __grid_constant__ GdnPrepareParams p) {
  pdl_begin();
  __shared__ float red[32];
  const int blk = blockIdx.x, C = 2 * p.Hk * p.dk + p.H * p.dv;
  const int t0 = blockIdx.y * kTokens, t_end = min(p.n, t0 + kTokens);
  if (blk == 2 * p.Hk + p.H) {
    for (int i = t0 * p.H + threadIdx.x; i < t_end * p.H; i += blockDim.x) {
      const float x = p.a[i] + p.dt_bias[i % p.H];
      const float softplus = x > 20.0f ? x : log1pf(expf(x));  // torch's threshold
      p.g[i] = softplus * p.a_neg[i % p.H];
      p.beta[i] = 1.0f / (1.0f + expf(-p.b[i]));
    }
    return;
  }
  const bool is_v = blk >= 2 * p.Hk;
  const int width = is_v ? p.dv : p.dk;
  const int c0 = is_v ? 2 * p.Hk * p.dk + (blk - 2 * p.Hk) * p.dv : blk * p.dk;
  float* out;
  int64_t out_stride;  // between tokens
  if (is_v) out = p.v + (blk - 2 * p.Hk) * p.dv, out_stride = static_cast<int64_t>(p.H) * p.dv;
  else out = (blk < p.Hk ? p.q : p.k) + (blk % p.Hk) * p.dk, out_stride = static_cast<int64_t>(p.Hk) * p.dk;

  float y[kTokens][kPerThread];
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int i = threadIdx.x + j * kThreads;
    if (i >= width) continue;
    const int c = c0 + i;
    float hist[kMaxConvKernel], wk[kMaxConvKernel];  // hist: inputs t0-K+1 .. t0-1
#pragma unroll
    for (int k = 0; k < kMaxConvKernel; ++k) {
      hist[k] = k < p.K - 1 ? conv_input(p.qkv, p.conv_state, C, p.K, c, t0 + k) : 0.0f;
      wk[k] = k < p.K ? p.conv_w[static_cast<int64_t>(c) * p.K + k] : 0.0f;
    }
#pragma unroll
    for (int tt = 0; tt < kTokens; ++tt) {
      const int t = t0 + tt;
      if (t >= t_end) break;
      const float cur = p.qkv[static_cast<int64_t>(t) * C + c];
      float acc = 0;
#pragma unroll
      for (int k = 0; k < kMaxConvKernel; ++k)
        if (k < p.K - 1) acc += wk[k] * hist[k];
#pragma unroll
      for (int k = 0; k < kMaxConvKernel; ++k)
        if (k == p.K - 1) acc += wk[k] * cur;  // the newest input multiplies the last tap
#pragma unroll
      for (int k = 0; k + 1 < kMaxConvKernel; ++k)
        if (k < p.K - 2) hist[k] = hist[k + 1];
#pragma unroll
      for (int k = 0; k < kMaxConvKernel; ++k)
        if (k == p.K - 2) hist[k] = cur;
      y[tt][j] = acc / (1.0f + expf(-acc));
    }
    if constexpr (kSingleRun) {
#pragma unroll
      for (int k = 0; k < kMaxConvKernel; ++k)
        if (k < p.K - 1) p.conv_state[static_cast<int64_t>(k) * C + c] = hist[k];
    }
  }
#pragma unroll
  for (int tt = 0; tt < kTokens; ++tt) {
    const int t = t0 + tt;
    if (t >= t_end) break;
    float scale = 1.0f;
    if (!is_v) {
      float ss = 0;
#pragma unroll
      for (int j = 0; j < kPerThread; ++j)
        if (threadIdx.x + j * kThreads < width) ss += y[tt][j] * y[tt][j];
      scale = 1.0f / sqrtf(block_sum(ss, red) + p.eps);
    }
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int i = threadIdx.x + j * kThreads;
      if (i < width) out[t * out_stride + i] = y[tt][j] * scale;
    }
  }
}

}  // namespace

void gdn_prepare(const GdnPrepareShape& sh, const float* qkv, const float* conv_w, float* conv_state, const float* a,
                 const float* b, const float* dt_bias, const float* a_neg, float l2_eps, float* q, float* k, float* v,
                 float* g, float* beta, cudaStream_t s) {
  if (sh.dk > kThreads * kPerThread || sh.dv > kThreads * kPerThread || sh.conv_kernel < 1 ||
      sh.conv_kernel > kMaxConvKernel)
    throw std::invalid_argument("cuda gdn_prepare: heads over 512 wide or conv kernel over 8");
  GdnPrepareParams p{qkv,  conv_w, conv_state, a,    b,
                     dt_bias, a_neg, q,       k,    v,
                     g,    beta,   l2_eps,     static_cast<int>(sh.n_tokens),
                     static_cast<int>(sh.n_heads), static_cast<int>(sh.n_k_heads), static_cast<int>(sh.dk),
                     static_cast<int>(sh.dv), static_cast<int>(sh.conv_kernel)};
  const int blocks = static_cast<int>(2 * sh.n_k_heads + sh.n_heads + 1);
  if (sh.n_tokens <= kDecodeTokens) {
    launch_pdl(gdn_prepare_kernel<kDecodeTokens, true>, blocks, kThreads, s, p);
    ZINC_CUDA_LAUNCHED("gdn_prepare");
    return;
  }
  // Every run reads the conv state as it was, so it is updated after them.
  launch_pdl(gdn_prepare_kernel<kRunTokens, false>, dim3(blocks, ceil_div(sh.n_tokens, kRunTokens)), kThreads, s, p);
  ZINC_CUDA_LAUNCHED("gdn_prepare");
  conv_state_update(qkv, conv_state, 2 * sh.n_k_heads * sh.dk + sh.n_heads * sh.dv, sh.n_tokens, sh.conv_kernel, s);
}

}  // namespace zinc::cuda
