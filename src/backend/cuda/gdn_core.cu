// The Gated DeltaNet core of a decode step in one launch (Backend::gated_delta_net_core
// for n <= 8 tokens): causal conv + SiLU of q, k, v, their L2 norms, the gates, the
// gated delta rule and the per-head gated RMS norm. At decode each stage is a few
// kilobytes of work and a few microseconds of latency as its own kernel; here the
// intermediates stay in shared memory and the state in registers.
//
// A block per value head h. Its key head kh = h % Hk is shared by the r = H / Hk
// value heads kh, kh + Hk, ...: each block recomputes kh's conv (a few hundred FMAs),
// and the r blocks form a thread block cluster so that the one block that writes
// kh's conv-state channels (h == kh) waits until its peers have read the old ones.
//
// The state {dv, dk} of the head is held as in delta_rule.cu: 4 warps per 32 value
// columns, a lane per column, each warp a quarter of the dk rows. The state, the conv
// weights and conv state and the norm weight are read before griddepcontrol.wait:
// the kernels just before this one (the input projections) never write them.
#include <stdexcept>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

constexpr int kMaxTokens = static_cast<int>(kGdnCoreMaxTokens);
constexpr int kMaxDk = 128, kMaxDv = 128, kMaxCluster = 8;
// The models' conv kernel; a compile-time width keeps the conv windows in registers.
constexpr int kConvKernel = 4;
constexpr int kRowGroups = 4;                        // warps splitting the dk rows of 32 columns
constexpr int kMaxRows = kMaxDk / kRowGroups;        // state rows per thread
constexpr int kMaxThreads = kRowGroups * kMaxDv;     // a thread per (row group, column)
constexpr int kChannelsPerThread = 2;                // conv channels (2·dk + dv) per thread
constexpr int kOutPerThread = kMaxTokens / kRowGroups;  // (token, column) outputs per thread

struct GdnCoreParams {
  const float* qkv;      // {C, n}, C = 2·Hk·dk + H·dv: q heads, k heads, v heads
  const float* conv_w;   // {4, C}
  float* conv_state;     // {C, 3}, oldest first
  const float* a;        // {H, n}
  const float* b;        // {H, n}
  const float* dt_bias;  // {H}
  const float* a_neg;    // {H}
  float* state;          // {dv, dk, H}
  const float* z;        // {dv, H, n}
  const float* norm_w;   // {dv}
  float* y;              // {dv, H, n}
  float l2_eps, norm_eps;
  int n, H, Hk, dk, dv;
};

__device__ __forceinline__ void cluster_arrive() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }

// blockDim.x = 4·dv; block b is value head kh + (b % r)·Hk of key head kh = b / r.
__global__ void __launch_bounds__(kMaxThreads, 1) gdn_core_kernel(const __grid_constant__ GdnCoreParams p) {
  __shared__ __align__(16) float qkv_s[kMaxTokens][2 * kMaxDk + kMaxDv];  // conv outputs q | k | v per token
  __shared__ float sk_part[2][kRowGroups][kMaxDv];  // Sᵀk partial sums, double-buffered over tokens
  __shared__ float y_part[kMaxTokens][kRowGroups][kMaxDv];
  __shared__ float norm_part[kMaxTokens][kMaxDv / 32];
  __shared__ float decay_s[kMaxTokens], beta_s[kMaxTokens];

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, T = blockDim.x;
  const int r = p.H / p.Hk, kh = blockIdx.x / r, h = kh + (blockIdx.x % r) * p.Hk;
  const int64_t C = 2 * int64_t{p.Hk} * p.dk + int64_t{p.H} * p.dv;
  const int width = 2 * p.dk + p.dv, rows = p.dk / kRowGroups;
  const int rg = warp % kRowGroups, j = (warp / kRowGroups) * 32 + lane, i0 = rg * rows;

  // ---- before the wait: what the previous kernel does not write ----
  float* S = p.state + static_cast<int64_t>(h) * p.dk * p.dv;
  float s[kMaxRows];
#pragma unroll
  for (int i = 0; i < kMaxRows; ++i) s[i] = i < rows ? S[static_cast<int64_t>(i0 + i) * p.dv + j] : 0.0f;
  int64_t chan[kChannelsPerThread];  // the global conv channel of each local one, -1 past the head
  float wk[kChannelsPerThread][kConvKernel], hist[kChannelsPerThread][kConvKernel - 1];
#pragma unroll
  for (int u = 0; u < kChannelsPerThread; ++u) {
    const int cl = tid + u * T;
    chan[u] = cl < p.dk            ? int64_t{kh} * p.dk + cl
              : cl < 2 * p.dk      ? int64_t{p.Hk} * p.dk + int64_t{kh} * p.dk + (cl - p.dk)
              : cl < width         ? 2 * int64_t{p.Hk} * p.dk + int64_t{h} * p.dv + (cl - 2 * p.dk)
                                   : -1;
#pragma unroll
    for (int k = 0; k < kConvKernel; ++k) {
      wk[u][k] = chan[u] >= 0 ? p.conv_w[chan[u] * kConvKernel + k] : 0.0f;
      if (k < kConvKernel - 1) hist[u][k] = chan[u] >= 0 ? p.conv_state[k * C + chan[u]] : 0.0f;
    }
  }
  const int jo = tid % p.dv;  // the column of this thread's outputs
  const float wn = p.norm_w[jo];
  float dt_bias = 0, a_neg = 0;
  if (tid < p.n) dt_bias = p.dt_bias[h], a_neg = p.a_neg[h];

  pdl_wait();
  pdl_launch_dependents();

  // ---- conv + SiLU of this head's channels, gates ----
  float zv[kOutPerThread];
#pragma unroll
  for (int e = 0; e < kOutPerThread; ++e) {
    const int t = tid / p.dv + e * kRowGroups;
    zv[e] = t < p.n ? p.z[(static_cast<int64_t>(t) * p.H + h) * p.dv + jo] : 0.0f;
  }
  if (tid < p.n) {
    const int64_t i = static_cast<int64_t>(tid) * p.H + h;
    const float x = p.a[i] + dt_bias;
    const float softplus = x > 20.0f ? x : log1pf(expf(x));  // torch's threshold
    decay_s[tid] = expf(softplus * a_neg);
    beta_s[tid] = 1.0f / (1.0f + expf(-p.b[i]));
  }
#pragma unroll
  for (int u = 0; u < kChannelsPerThread; ++u) {
    float cur[kMaxTokens];
#pragma unroll
    for (int t = 0; t < kMaxTokens; ++t) cur[t] = chan[u] >= 0 && t < p.n ? p.qkv[t * C + chan[u]] : 0.0f;
#pragma unroll
    for (int t = 0; t < kMaxTokens; ++t) {
      if (chan[u] < 0 || t >= p.n) continue;
      float acc = wk[u][kConvKernel - 1] * cur[t];  // the newest input multiplies the last tap
#pragma unroll
      for (int k = 0; k < kConvKernel - 1; ++k) acc += wk[u][k] * hist[u][k];
#pragma unroll
      for (int k = 0; k < kConvKernel - 2; ++k) hist[u][k] = hist[u][k + 1];
      hist[u][kConvKernel - 2] = cur[t];
      qkv_s[t][tid + u * T] = acc / (1.0f + expf(-acc));
    }
  }
  cluster_arrive();  // this block has read its old conv state
  __syncthreads();

  // ---- L2 norms of q and k: a warp per (token, q or k) row; q also takes 1/sqrt(dk) ----
  const float q_scale = rsqrtf(static_cast<float>(p.dk));
  for (int row = warp; row < 2 * p.n; row += T / 32) {
    float* x = &qkv_s[row / 2][(row % 2) * p.dk];
    float ss = 0;
    for (int i = lane; i < p.dk; i += 32) ss += x[i] * x[i];
    const float inv = 1.0f / sqrtf(warp_sum(ss) + p.l2_eps) * (row % 2 == 0 ? q_scale : 1.0f);
    for (int i = lane; i < p.dk; i += 32) x[i] *= inv;
  }
  __syncthreads();

  // ---- the delta rule, token by token; the y partials wait in registers ----
  float yp[kMaxTokens];
#pragma unroll
  for (int t = 0; t < kMaxTokens; ++t) {
    yp[t] = 0;
    if (t >= p.n) continue;
    const float4* q4 = reinterpret_cast<const float4*>(&qkv_s[t][i0]);
    const float4* k4 = reinterpret_cast<const float4*>(&qkv_s[t][p.dk + i0]);
    float part = 0;
#pragma unroll
    for (int i = 0; i < kMaxRows / 4; ++i) {
      if (4 * i >= rows) break;
      const float4 kv = k4[i];
      part += s[4 * i] * kv.x + s[4 * i + 1] * kv.y + s[4 * i + 2] * kv.z + s[4 * i + 3] * kv.w;
    }
    sk_part[t % 2][rg][j] = part;
    __syncthreads();  // also orders this buffer's reads two tokens ago before the write above
    float sk = 0;
#pragma unroll
    for (int g = 0; g < kRowGroups; ++g) sk += sk_part[t % 2][g][j];
    const float decay = decay_s[t];
    const float delta = beta_s[t] * (qkv_s[t][2 * p.dk + j] - decay * sk);
    float acc = 0;
#pragma unroll
    for (int i = 0; i < kMaxRows / 4; ++i) {
      if (4 * i >= rows) break;
      const float4 kv = k4[i], qv = q4[i];
      const float kk[4] = {kv.x, kv.y, kv.z, kv.w}, qq[4] = {qv.x, qv.y, qv.z, qv.w};
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        s[4 * i + c] = decay * s[4 * i + c] + kk[c] * delta;
        acc += s[4 * i + c] * qq[c];
      }
    }
    yp[t] = acc;
  }
#pragma unroll
  for (int t = 0; t < kMaxTokens; ++t)
    if (t < p.n) y_part[t][rg][j] = yp[t];
#pragma unroll
  for (int i = 0; i < kMaxRows; ++i)
    if (i < rows) S[static_cast<int64_t>(i0 + i) * p.dv + j] = s[i];
  __syncthreads();

  // ---- gated RMS norm over each head row; a warp's 32 outputs share one token ----
  float yv[kOutPerThread];
#pragma unroll
  for (int e = 0; e < kOutPerThread; ++e) {
    const int t = tid / p.dv + e * kRowGroups;
    yv[e] = 0;
    if (t >= p.n) continue;
#pragma unroll
    for (int g = 0; g < kRowGroups; ++g) yv[e] += y_part[t][g][jo];
    const float ss = warp_sum(yv[e] * yv[e]);
    if (lane == 0) norm_part[t][jo / 32] = ss;
  }
  __syncthreads();
#pragma unroll
  for (int e = 0; e < kOutPerThread; ++e) {
    const int t = tid / p.dv + e * kRowGroups;
    if (t >= p.n) continue;
    float ss = 0;
    for (int w = 0; w < p.dv / 32; ++w) ss += norm_part[t][w];
    const float inv = rsqrtf(ss / p.dv + p.norm_eps);
    p.y[(static_cast<int64_t>(t) * p.H + h) * p.dv + jo] = yv[e] * inv * wn * (zv[e] / (1.0f + expf(-zv[e])));
  }

  // ---- the conv state: v channels are this block's own, q and k wait for the cluster ----
  cluster_wait();  // every block of the key head has read the old state
#pragma unroll
  for (int u = 0; u < kChannelsPerThread; ++u) {
    const bool own = chan[u] >= 0 && (tid + u * T >= 2 * p.dk || h == kh);
#pragma unroll
    for (int k = 0; k < kConvKernel - 1; ++k)
      if (own) p.conv_state[k * C + chan[u]] = hist[u][k];
  }
}

}  // namespace

bool gdn_core_supported(const GdnCoreShape& sh) {
  const int64_t r = sh.n_k_heads > 0 ? sh.n_heads / sh.n_k_heads : 0;
  return sh.n_tokens >= 1 && sh.n_tokens <= kGdnCoreMaxTokens && r >= 1 && r <= kMaxCluster &&
         r * sh.n_k_heads == sh.n_heads && sh.dk % 16 == 0 && sh.dk <= kMaxDk && sh.dv % 32 == 0 &&
         sh.dv <= kMaxDv && 2 * sh.dk + sh.dv <= kChannelsPerThread * kRowGroups * sh.dv &&
         sh.conv_kernel == kConvKernel;
}

void gdn_core(const GdnCoreShape& sh, const float* qkv, const float* conv_w, float* conv_state, const float* a,
              const float* b, const float* dt_bias, const float* a_neg, float l2_eps, float* state, const float* z,
              const float* norm_w, float norm_eps, float* y, cudaStream_t s) {
  if (!gdn_core_supported(sh)) throw std::invalid_argument("cuda gdn_core: shape outside the decode kernel");
  const GdnCoreParams p{qkv,    conv_w, conv_state, a,      b,
                        dt_bias, a_neg, state,      z,      norm_w,
                        y,      l2_eps, norm_eps,   static_cast<int>(sh.n_tokens),
                        static_cast<int>(sh.n_heads), static_cast<int>(sh.n_k_heads), static_cast<int>(sh.dk),
                        static_cast<int>(sh.dv)};
  cudaLaunchAttribute attr[2]{};
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = static_cast<unsigned>(sh.n_heads / sh.n_k_heads);
  attr[1].val.clusterDim.y = 1;
  attr[1].val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(sh.n_heads));
  cfg.blockDim = dim3(static_cast<unsigned>(kRowGroups * sh.dv));
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = 2;
  check_cuda(cudaLaunchKernelEx(&cfg, gdn_core_kernel, p), "cudaLaunchKernelEx");
  ZINC_CUDA_LAUNCHED("gdn_core");
}

}  // namespace zinc::cuda
