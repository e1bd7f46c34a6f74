// The Gated DeltaNet input stage for a few tokens in one launch: causal conv + SiLU
// of the fused qkv projection, its split into q, k, v, the per-head L2 norms of q and
// k, and the gates g, beta. At decode each piece is a few kilobytes, so separate
// launches (seven of them) would cost far more than their work.
#include <stdexcept>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kPerThread = 4;      // channels of a head per thread: heads up to 512 wide
constexpr int kMaxConvKernel = 8;  // as the standalone conv kernel
constexpr int kMaxTokens = static_cast<int>(kGdnPrepareMaxTokens);

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

// Block b < 2·Hk + H: one head of q (b < Hk), k or v; the last block: the gates.
__global__ void __launch_bounds__(kThreads) gdn_prepare_kernel(const __grid_constant__ GdnPrepareParams p) {
  pdl_begin();
  __shared__ float red[32];
  const int blk = blockIdx.x, C = 2 * p.Hk * p.dk + p.H * p.dv;
  if (blk == 2 * p.Hk + p.H) {
    for (int i = threadIdx.x; i < p.H * p.n; i += blockDim.x) {
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

  float y[kMaxTokens][kPerThread];
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int i = threadIdx.x + j * kThreads;
    if (i >= width) continue;
    const int c = c0 + i;
    float hist[kMaxConvKernel], wk[kMaxConvKernel];
#pragma unroll
    for (int k = 0; k < kMaxConvKernel; ++k) {
      hist[k] = k < p.K - 1 ? p.conv_state[static_cast<int64_t>(k) * C + c] : 0.0f;
      wk[k] = k < p.K ? p.conv_w[static_cast<int64_t>(c) * p.K + k] : 0.0f;
    }
#pragma unroll
    for (int t = 0; t < kMaxTokens; ++t) {
      if (t >= p.n) break;
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
      y[t][j] = acc / (1.0f + expf(-acc));
    }
#pragma unroll
    for (int k = 0; k < kMaxConvKernel; ++k)
      if (k < p.K - 1) p.conv_state[static_cast<int64_t>(k) * C + c] = hist[k];
  }
  for (int t = 0; t < p.n; ++t) {
    float scale = 1.0f;
    if (!is_v) {
      float ss = 0;
#pragma unroll
      for (int j = 0; j < kPerThread; ++j)
        if (threadIdx.x + j * kThreads < width) ss += y[t][j] * y[t][j];
      scale = 1.0f / sqrtf(block_sum(ss, red) + p.eps);
    }
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int i = threadIdx.x + j * kThreads;
      if (i < width) out[t * out_stride + i] = y[t][j] * scale;
    }
  }
}

}  // namespace

void gdn_prepare(const GdnPrepareShape& sh, const float* qkv, const float* conv_w, float* conv_state, const float* a,
                 const float* b, const float* dt_bias, const float* a_neg, float l2_eps, float* q, float* k, float* v,
                 float* g, float* beta, cudaStream_t s) {
  if (sh.n_tokens > kGdnPrepareMaxTokens || sh.dk > kThreads * kPerThread || sh.dv > kThreads * kPerThread ||
      sh.conv_kernel < 1 || sh.conv_kernel > kMaxConvKernel)
    throw std::invalid_argument("cuda gdn_prepare: over 8 tokens, heads over 512 wide or conv kernel over 8");
  GdnPrepareParams p{qkv,  conv_w, conv_state, a,    b,
                     dt_bias, a_neg, q,       k,    v,
                     g,    beta,   l2_eps,     static_cast<int>(sh.n_tokens),
                     static_cast<int>(sh.n_heads), static_cast<int>(sh.n_k_heads), static_cast<int>(sh.dk),
                     static_cast<int>(sh.dv), static_cast<int>(sh.conv_kernel)};
  const int blocks = static_cast<int>(2 * sh.n_k_heads + sh.n_heads + 1);
  launch_pdl(gdn_prepare_kernel, blocks, kThreads, s, p);
  ZINC_CUDA_LAUNCHED("gdn_prepare");
}

}  // namespace zinc::cuda
