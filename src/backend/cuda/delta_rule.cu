// Gated DeltaNet on the GPU: the gates, the causal depthwise conv, and the gated
// delta rule as a recurrence over the tokens (right for decode and short prefill;
// the chunked form for long prefill is a separate kernel still to come).
//
// The recurrence keeps each value column j of a head's state independent:
// (Sᵀk)_j, the update S_ij += k_i·delta_j and y_j = (Sᵀq)_j touch column j only. So
// a block owns 32 columns of one head, lanes own columns and the 4 warps split the
// dk rows; the state lives in registers for all n tokens, read and written once.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

__global__ void gdn_gates_kernel(const float* a, const float* b, const float* dt_bias, const float* a_neg, float* g,
                                 float* beta, int64_t H, int64_t count) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count) return;
  const float x = a[i] + dt_bias[i % H];
  const float softplus = x > 20.0f ? x : log1pf(expf(x));  // torch's threshold
  g[i] = softplus * a_neg[i % H];
  beta[i] = 1.0f / (1.0f + expf(-b[i]));
}

constexpr int kMaxConvKernel = 8;
constexpr int kConvTokens = 16;  // tokens per thread: a sliding window of K inputs in registers

// Input j of channel c counting the K-1 state columns first: the state for j < K-1.
__device__ __forceinline__ float conv_input(const float* x, const float* state, int64_t C, int K, int64_t c,
                                            int64_t j) {
  return j < K - 1 ? state[j * C + c] : x[(j - (K - 1)) * C + c];
}

// grid (C / 128, n / 16): a thread computes 16 consecutive tokens of one channel.
__global__ void causal_conv_silu_kernel(const float* x, const float* w, const float* state, float* y, int64_t C,
                                        int64_t n, int K) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x, t0 = blockIdx.y * int64_t{kConvTokens};
  if (c >= C) return;
  float win[kMaxConvKernel], wk[kMaxConvKernel];
#pragma unroll
  for (int k = 0; k < kMaxConvKernel; ++k) {
    wk[k] = k < K ? w[c * K + k] : 0.0f;
    win[k] = k < K - 1 ? conv_input(x, state, C, K, c, t0 + k) : 0.0f;  // inputs t0-K+1 .. t0-1
  }
  for (int64_t t = t0; t < min(n, t0 + kConvTokens); ++t) {
    const float cur = x[t * C + c];
    float acc = 0;
#pragma unroll
    for (int k = 0; k < kMaxConvKernel; ++k) {
      if (k < K - 1) acc += wk[k] * win[k];
      if (k == K - 1) acc += wk[k] * cur;  // the newest input multiplies the last tap
    }
#pragma unroll
    for (int k = 0; k + 1 < kMaxConvKernel; ++k)
      if (k < K - 2) win[k] = win[k + 1];
#pragma unroll
    for (int k = 0; k < kMaxConvKernel; ++k)
      if (k == K - 2) win[k] = cur;
    y[t * C + c] = acc / (1.0f + expf(-acc));
  }
}

// After the conv: the state becomes the last K-1 inputs (old state included when n < K-1).
__global__ void conv_state_kernel(const float* x, float* state, int64_t C, int64_t n, int K) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= C) return;
  float last[kMaxConvKernel];
#pragma unroll
  for (int k = 0; k < kMaxConvKernel; ++k) last[k] = k < K - 1 ? conv_input(x, state, C, K, c, n + k) : 0.0f;
#pragma unroll
  for (int k = 0; k < kMaxConvKernel; ++k)
    if (k < K - 1) state[k * C + c] = last[k];
}

constexpr int kDeltaWarps = 4;
constexpr int kMaxDk = 128;
constexpr int kRowsPerWarp = kMaxDk / kDeltaWarps;

struct DeltaRuleParams {
  const float* q;  // {dk, Hk, n}
  const float* k;  // {dk, Hk, n}
  const float* v;  // {dv, H, n}
  const float* g;  // {H, n}
  const float* beta;
  float* state;  // {dv, dk, H}
  float* y;      // {dv, H, n}
  int n, H, Hk, dk, dv;
};

__global__ void __launch_bounds__(32 * kDeltaWarps) gated_delta_rule_kernel(const __grid_constant__ DeltaRuleParams p) {
  __shared__ float kq[2][kMaxDk];
  __shared__ float red[kDeltaWarps][32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int h = blockIdx.y, kh = h % p.Hk, j = blockIdx.x * 32 + lane;
  const int rows = p.dk / kDeltaWarps, i0 = warp * rows;
  float* S = p.state + static_cast<int64_t>(h) * p.dk * p.dv;
  float s[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) s[r] = r < rows ? S[static_cast<int64_t>(i0 + r) * p.dv + j] : 0.0f;
  const float out_scale = rsqrtf(static_cast<float>(p.dk));

  for (int t = 0; t < p.n; ++t) {
    const int64_t kbase = (static_cast<int64_t>(t) * p.Hk + kh) * p.dk;
    for (int i = threadIdx.x; i < p.dk; i += blockDim.x) kq[0][i] = p.k[kbase + i], kq[1][i] = p.q[kbase + i];
    const float decay = expf(p.g[static_cast<int64_t>(t) * p.H + h]);
    const float b = p.beta[static_cast<int64_t>(t) * p.H + h];
    __syncthreads();
    float part = 0;
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r)
      if (r < rows) part += s[r] * kq[0][i0 + r];
    red[warp][lane] = part;
    __syncthreads();
    float sk = 0;
#pragma unroll
    for (int w = 0; w < kDeltaWarps; ++w) sk += red[w][lane];
    const int64_t vi = (static_cast<int64_t>(t) * p.H + h) * p.dv + j;
    const float delta = b * (p.v[vi] - decay * sk);
    float yp = 0;
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      if (r < rows) {
        s[r] = decay * s[r] + kq[0][i0 + r] * delta;
        yp += s[r] * kq[1][i0 + r];
      }
    }
    __syncthreads();  // every warp has read red and kq
    red[warp][lane] = yp;
    __syncthreads();
    if (warp == 0) {
      float yy = 0;
#pragma unroll
      for (int w = 0; w < kDeltaWarps; ++w) yy += red[w][lane];
      p.y[vi] = yy * out_scale;
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
    if (r < rows) S[static_cast<int64_t>(i0 + r) * p.dv + j] = s[r];
}

}  // namespace

void gdn_gates(const float* a, const float* b, const float* dt_bias, const float* a_neg, float* g, float* beta,
               int64_t H, int64_t count, cudaStream_t s) {
  gdn_gates_kernel<<<ceil_div(count, 256), 256, 0, s>>>(a, b, dt_bias, a_neg, g, beta, H, count);
  ZINC_CUDA_LAUNCHED("gdn_gates");
}

void causal_conv_silu(const float* x, const float* w, float* state, float* y, int64_t C, int64_t n, int64_t K,
                      cudaStream_t s) {
  if (K < 1 || K > kMaxConvKernel) throw std::invalid_argument("cuda causal_conv_silu: kernel size above 8");
  const dim3 grid(ceil_div(C, 128), ceil_div(n, kConvTokens));
  causal_conv_silu_kernel<<<grid, 128, 0, s>>>(x, w, state, y, C, n, static_cast<int>(K));
  ZINC_CUDA_LAUNCHED("causal_conv_silu");
  conv_state_kernel<<<ceil_div(C, 128), 128, 0, s>>>(x, state, C, n, static_cast<int>(K));
  ZINC_CUDA_LAUNCHED("causal_conv_state");
}

void gated_delta_rule(const DeltaRuleShape& shape, const float* q, const float* k, const float* v, const float* g,
                      const float* beta, float* state, float* y, cudaStream_t s) {
  if (shape.dk % kDeltaWarps != 0 || shape.dk > kMaxDk || shape.dv % 32 != 0)
    throw std::invalid_argument("cuda gated_delta_rule: needs dk a multiple of 4 up to 128 and dv a multiple of 32");
  DeltaRuleParams p{q,
                    k,
                    v,
                    g,
                    beta,
                    state,
                    y,
                    static_cast<int>(shape.n_tokens),
                    static_cast<int>(shape.n_heads),
                    static_cast<int>(shape.n_k_heads),
                    static_cast<int>(shape.dk),
                    static_cast<int>(shape.dv)};
  const dim3 grid(static_cast<unsigned>(shape.dv / 32), static_cast<unsigned>(shape.n_heads));
  gated_delta_rule_kernel<<<grid, 32 * kDeltaWarps, 0, s>>>(p);
  ZINC_CUDA_LAUNCHED("gated_delta_rule");
}

}  // namespace zinc::cuda
