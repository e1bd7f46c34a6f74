// The Gated DeltaNet core of a decode step in one launch (Backend::gated_delta_net_core
// for 2 to 8 tokens of one sequence, or one token for each of 1 to 32): causal conv +
// SiLU of q, k, v, their L2 norms, the gates, the gated delta rule and the per-head
// gated RMS norm. At decode each stage is a few kilobytes of work and a few
// microseconds of latency as its own kernel; here the intermediates stay in shared
// memory and the state in registers.
//
// A block per 32 value columns of a value head: the head's state {dv, dk} is read and
// written by dv / 32 blocks on as many SMs (a 128 x 128 head is 64 KB each way, which
// one SM moves too slowly). Key head kh = h % Hk is shared by the r = H / Hk value
// heads kh, kh + Hk, ...: each block recomputes kh's q and k conv (a few hundred
// FMAs), and the r · dv / 32 blocks of a key head form a thread block cluster: each
// block pushes its parts of the gated norm's sum of squares into every peer's shared
// memory (st.async, counted on the peer's mbarrier), and a block adds its value head's
// parts in a fixed order. A block pushes only after reading its old conv state, so the
// one block that writes kh's q and k conv-state channels does so once every part has
// come. No cluster barrier releases memory: each such arrive was a MEMBAR.ALL.GPU, and
// the two of them cost one sequence's decode 2.5% and 32 sequences' 1.8% (H200,
// PERFORMANCE.md session 55).
//
// Within a block, warp w holds state rows w · dk/8 .. of the block's 32 columns, a
// lane per column. The state, the conv weights and conv state and the norm weight are
// read before griddepcontrol.wait: the kernels just before this one (the input
// projections) never write them.

#include <stdexcept>
#include <type_traits>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/warp_stream.cuh"

namespace zinc::cuda {
namespace {

constexpr int kMaxTokens = static_cast<int>(kGdnCoreMaxTokens);
constexpr int kMaxDk = 128, kMaxDv = 128, kMaxCluster = 8;
constexpr int kCols = 32;  // value columns per block
// The models' conv kernel; a compile-time width keeps the conv windows in registers.
constexpr int kConvKernel = 4;
constexpr int kRowGroups = 8;                          // warps splitting the dk rows
constexpr int kMaxRows = kMaxDk / kRowGroups;          // state rows per thread
constexpr int kThreads = kRowGroups * kCols;           // a thread per (row group, column)
constexpr int kWidth = 2 * kMaxDk + kCols;             // conv channels of a block: q | k | its v columns
constexpr int kChannelsPerThread = (kWidth + kThreads - 1) / kThreads;
static_assert(kMaxTokens * kCols <= kThreads, "one (token, column) output per thread");

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
// n sequences of one token each: grid row s takes token s with these states (the
// single-sequence parameters stay as small as they were: the decode of one sequence
// launches this kernel 30 times a token).
struct GdnCoreSeqsParams : GdnCoreParams {
  float* conv_states[kGdnCoreMaxSeqs];
  float* states[kGdnCoreMaxSeqs];
};

// The cluster's barrier, which orders nothing but the mbarriers' initialisation, and
// a push into a peer block's shared memory. Clusters need Hopper: built for an older
// GPU these trap, and gdn_core_supported() sends every shape to the backend's
// composition there instead.
__device__ __forceinline__ void cluster_arrive_relaxed() {
#if __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ void cluster_wait() {
#if __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
#else
  __trap();
#endif
}
// v into `slot` of block `peer`'s shared memory, counted on that block's `bar`.
__device__ __forceinline__ void push_to_peer(float* slot, float v, uint64_t* bar, int peer) {
#if __CUDA_ARCH__ >= 900
  uint32_t at, bar_at;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(at) : "r"(smem_address(slot)), "r"(peer));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(bar_at) : "r"(smem_address(bar)), "r"(peer));
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(at),
               "r"(__float_as_uint(v)), "r"(bar_at)
               : "memory");
#else
  (void)slot, (void)v, (void)bar, (void)peer;
  __trap();
#endif
}
// A block's sequence's states.
__device__ __forceinline__ float* state_of(const GdnCoreParams& p) { return p.state; }
__device__ __forceinline__ float* conv_state_of(const GdnCoreParams& p) { return p.conv_state; }
__device__ __forceinline__ float* state_of(const GdnCoreSeqsParams& p) { return p.states[blockIdx.y]; }
__device__ __forceinline__ float* conv_state_of(const GdnCoreSeqsParams& p) { return p.conv_states[blockIdx.y]; }

// Several sequences launch a grid of several waves: four blocks an SM (64 registers,
// no spill) rather than three make it shorter.
template <class Params>
constexpr int kMinBlocks = std::is_same_v<Params, GdnCoreSeqsParams> ? 4 : 1;

// Block (b, s): slice b % (dv / 32) of value head kh + (b / (dv / 32) % r)·Hk of key
// head kh = b / (r · dv / 32), for sequence s; its rank in the key head's cluster is
// b % (r · dv / 32).
template <class Params>
__global__ void __launch_bounds__(kThreads, kMinBlocks<Params>) gdn_core_kernel(const __grid_constant__ Params p) {
  __shared__ __align__(16) float qkv_s[kMaxTokens][kWidth];  // conv outputs q | k | v per token
  __shared__ float sk_part[2][kRowGroups][kCols];  // Sᵀk partial sums, double-buffered over tokens
  __shared__ float y_part[kMaxTokens][kRowGroups][kCols];
  __shared__ float norm_parts[kMaxTokens][kMaxCluster];  // each block's part of each token's sum of squares
  __shared__ uint64_t parts_come;  // counts the peers' pushes into norm_parts
  __shared__ float decay_s[kMaxTokens], beta_s[kMaxTokens];

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int r = p.H / p.Hk, slices = p.dv / kCols, group = r * slices;
  const int kh = blockIdx.x / group, rank = blockIdx.x % group, slice = rank % slices;
  const int h = kh + (rank / slices) * p.Hk, c0 = slice * kCols;
  const int64_t C = 2 * int64_t{p.Hk} * p.dk + int64_t{p.H} * p.dv;
  const int width = 2 * p.dk + kCols, rows = p.dk / kRowGroups;
  const int i0 = warp * rows, j = c0 + lane;
  // This block's sequence: its tokens are t0 .. t0 + n - 1 of the launch's.
  constexpr bool kSeqs = std::is_same_v<Params, GdnCoreSeqsParams>;
  const int t0 = kSeqs ? static_cast<int>(blockIdx.y) : 0;
  // The block's token count, read where it is used (a register held across the
  // kernel costs the one-sequence decode a spill).
  const auto n = [&] { return kSeqs ? 1 : p.n; };

  // Every block of the cluster pushes each token's part here; no peer pushes before
  // this block has counted them (the cluster barrier, waited for just before the pushes).
  if (tid == 0) {
#if __CUDA_ARCH__ >= 900
    mbarrier_init(&parts_come);
    mbarrier_expect(&parts_come, static_cast<uint32_t>(n() * group * sizeof(float)));
#endif
  }
  cluster_arrive_relaxed();

  // ---- before the wait: what the previous kernel does not write ----
  // This thread's first state row and column; its rows follow dv apart, reached by
  // stepping a pointer (a 64-bit product per row made the loads and stores most of the
  // several-sequence kernel's instructions).
  float* const S = state_of(p) + (static_cast<int64_t>(h) * p.dk + i0) * p.dv + j;
  float s[kMaxRows];
  {
    const float* row = S;
#pragma unroll
    for (int i = 0; i < kMaxRows; ++i, row += p.dv) s[i] = i < rows ? *row : 0.0f;
  }
  int64_t chan[kChannelsPerThread];  // the global conv channel of each local one, -1 past the block's
  float wk[kChannelsPerThread][kConvKernel], hist[kChannelsPerThread][kConvKernel - 1];
#pragma unroll
  for (int u = 0; u < kChannelsPerThread; ++u) {
    const int cl = tid + u * kThreads;
    chan[u] = cl < p.dk       ? int64_t{kh} * p.dk + cl
              : cl < 2 * p.dk ? int64_t{p.Hk} * p.dk + int64_t{kh} * p.dk + (cl - p.dk)
              : cl < width    ? 2 * int64_t{p.Hk} * p.dk + int64_t{h} * p.dv + c0 + (cl - 2 * p.dk)
                              : -1;
#pragma unroll
    for (int k = 0; k < kConvKernel; ++k) {
      wk[u][k] = chan[u] >= 0 ? p.conv_w[chan[u] * kConvKernel + k] : 0.0f;
      if (k < kConvKernel - 1) hist[u][k] = chan[u] >= 0 ? conv_state_of(p)[k * C + chan[u]] : 0.0f;
    }
  }
  const int to = tid / kCols;  // the token of this thread's output, column j
  const float wn = p.norm_w[j];
  float dt_bias = 0, a_neg = 0;
  if (tid < n()) dt_bias = p.dt_bias[h], a_neg = p.a_neg[h];

  pdl_begin();

  // ---- what the previous kernels wrote, all loads issued before any arithmetic ----
  float cur[kChannelsPerThread][kMaxTokens];
#pragma unroll
  for (int u = 0; u < kChannelsPerThread; ++u)
#pragma unroll
    for (int t = 0; t < kMaxTokens; ++t) cur[u][t] = chan[u] >= 0 && t < n() ? p.qkv[(t0 + t) * C + chan[u]] : 0.0f;
  const float zv = to < n() ? p.z[(static_cast<int64_t>(t0 + to) * p.H + h) * p.dv + j] : 0.0f;
  const int64_t gate_at = static_cast<int64_t>(t0 + tid) * p.H + h;
  const float a_in = tid < n() ? p.a[gate_at] : 0.0f, b_in = tid < n() ? p.b[gate_at] : 0.0f;

  // ---- gates, conv + SiLU of this block's channels ----
  if (tid < n()) {
    const float x = a_in + dt_bias;
    const float softplus = x > 20.0f ? x : log1pf(expf(x));  // torch's threshold
    decay_s[tid] = expf(softplus * a_neg);
    beta_s[tid] = 1.0f / (1.0f + expf(-b_in));
  }
#pragma unroll
  for (int u = 0; u < kChannelsPerThread; ++u) {
#pragma unroll
    for (int t = 0; t < kMaxTokens; ++t) {
      if (chan[u] < 0 || t >= n()) continue;
      float acc = wk[u][kConvKernel - 1] * cur[u][t];  // the newest input multiplies the last tap
#pragma unroll
      for (int k = 0; k < kConvKernel - 1; ++k) acc += wk[u][k] * hist[u][k];
#pragma unroll
      for (int k = 0; k < kConvKernel - 2; ++k) hist[u][k] = hist[u][k + 1];
      hist[u][kConvKernel - 2] = cur[u][t];
      qkv_s[t][tid + u * kThreads] = acc / (1.0f + expf(-acc));
    }
  }
  __syncthreads();

  // ---- L2 norms of q and k: a warp per (token, q or k) row; q also takes 1/sqrt(dk) ----
  const float q_scale = rsqrtf(static_cast<float>(p.dk));
  for (int row = warp; row < 2 * n(); row += kRowGroups) {
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
    if (t >= n()) continue;
    const float4* q4 = reinterpret_cast<const float4*>(&qkv_s[t][i0]);
    const float4* k4 = reinterpret_cast<const float4*>(&qkv_s[t][p.dk + i0]);
    float part = 0;
#pragma unroll
    for (int i = 0; i < kMaxRows / 4; ++i) {
      if (4 * i >= rows) break;
      const float4 kv = k4[i];
      part += s[4 * i] * kv.x + s[4 * i + 1] * kv.y + s[4 * i + 2] * kv.z + s[4 * i + 3] * kv.w;
    }
    sk_part[t % 2][warp][lane] = part;
    __syncthreads();  // also orders this buffer's reads two tokens ago before the write above
    float sk = 0;
#pragma unroll
    for (int g = 0; g < kRowGroups; ++g) sk += sk_part[t % 2][g][lane];
    const float decay = decay_s[t];
    const float delta = beta_s[t] * (qkv_s[t][2 * p.dk + lane] - decay * sk);
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
    if (t < n()) y_part[t][warp][lane] = yp[t];
  __syncthreads();

  // ---- gated RMS norm over each head row: warp t holds token t's 32 columns ----
  cluster_wait();  // every peer counts its pushes
  float yv = 0;
  if (to < n()) {
#pragma unroll
    for (int g = 0; g < kRowGroups; ++g) yv += y_part[to][g][lane];
    const float part = warp_sum(yv * yv);
    if (lane < group) push_to_peer(&norm_parts[to][rank], part, &parts_come, lane);
  }
  {
    float* row = S;
#pragma unroll
    for (int i = 0; i < kMaxRows; ++i, row += p.dv)
      if (i < rows) *row = s[i];
  }
  // Every block has pushed its parts here, so it has read its old conv state, and
  // no push into this block is left in flight when it ends. The same CTA-scope wait as
  // for bulk copies: the pushes land in this block's shared memory, released by
  // st.async's complete_tx. A cluster-scope acquire was no faster (H200, PERFORMANCE.md
  // session 56) and needed a wait of its own.
#if __CUDA_ARCH__ >= 900
  mbarrier_wait(&parts_come, 0);
#endif
  if (to < n()) {
    const int head_rank0 = rank - slice;  // the value head's first slice
    float ss = 0;
    for (int sl = 0; sl < slices; ++sl) ss += norm_parts[to][head_rank0 + sl];
    const float inv = rsqrtf(ss / p.dv + p.norm_eps);
    p.y[(static_cast<int64_t>(t0 + to) * p.H + h) * p.dv + j] = yv * inv * wn * (zv / (1.0f + expf(-zv)));
  }

  // ---- the conv state: v channels are this block's own, q and k the cluster's first block's ----
#pragma unroll
  for (int u = 0; u < kChannelsPerThread; ++u) {
    const bool own = chan[u] >= 0 && (tid + u * kThreads >= 2 * p.dk || rank == 0);
#pragma unroll
    for (int k = 0; k < kConvKernel - 1; ++k)
      if (own) conv_state_of(p)[k * C + chan[u]] = hist[u][k];
  }
}

}  // namespace

bool gdn_core_supported(const GdnCoreShape& sh) {
  const int64_t r = sh.n_k_heads > 0 ? sh.n_heads / sh.n_k_heads : 0;
  return hopper_or_later() && sh.n_tokens >= 1 && sh.n_tokens <= kGdnCoreMaxTokens && r >= 1 &&
         r * sh.n_k_heads == sh.n_heads && sh.dk % (4 * kRowGroups) == 0 && sh.dk <= kMaxDk && sh.dv % kCols == 0 &&
         sh.dv <= kMaxDv && r * (sh.dv / kCols) <= kMaxCluster && sh.conv_kernel == kConvKernel;
}

void gdn_core(const GdnCoreShape& sh, const float* qkv, const float* conv_w, float* const* conv_states, const float* a,
              const float* b, const float* dt_bias, const float* a_neg, float l2_eps, float* const* states, int n_seqs,
              const float* z, const float* norm_w, float norm_eps, float* y, cudaStream_t s) {
  GdnCoreShape per_block = sh;
  if (n_seqs > 1) per_block.n_tokens = 1;
  if (!gdn_core_supported(per_block)) throw std::invalid_argument("cuda gdn_core: shape outside the decode kernel");
  if (n_seqs < 1 || n_seqs > kGdnCoreMaxSeqs || (n_seqs > 1 && n_seqs != sh.n_tokens))
    throw std::invalid_argument("cuda gdn_core: one sequence, or one token for each of at most 32");
  GdnCoreSeqsParams p{};
  p.qkv = qkv, p.conv_w = conv_w, p.a = a, p.b = b, p.dt_bias = dt_bias, p.a_neg = a_neg, p.z = z, p.norm_w = norm_w;
  p.y = y, p.l2_eps = l2_eps, p.norm_eps = norm_eps;
  p.n = static_cast<int>(sh.n_tokens), p.H = static_cast<int>(sh.n_heads), p.Hk = static_cast<int>(sh.n_k_heads);
  p.dk = static_cast<int>(sh.dk), p.dv = static_cast<int>(sh.dv);
  p.conv_state = conv_states[0], p.state = states[0];
  for (int i = 0; i < n_seqs; ++i) p.conv_states[i] = conv_states[i], p.states[i] = states[i];
  cudaLaunchAttribute attr[2]{};
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = static_cast<unsigned>(sh.n_heads / sh.n_k_heads * (sh.dv / kCols));
  attr[1].val.clusterDim.y = 1;
  attr[1].val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(sh.n_heads * (sh.dv / kCols)), static_cast<unsigned>(n_seqs));
  cfg.blockDim = dim3(kThreads);
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = 2;
  // One token of one sequence takes the several-sequence instance too: its single token is
  // a compile-time count, where the one-sequence instance carries 8 tokens through its
  // loops behind run-time guards. That launch 7.46 -> 6.40 us under ncu, tg128 +0.06 /
  // +0.36 / +0.32% at depth 0 / 8192 / 32768 (H200, PERFORMANCE.md session 55).
  if (n_seqs == 1 && sh.n_tokens > 1) {
    const GdnCoreParams& one = p;
    check_cuda(cudaLaunchKernelEx(&cfg, gdn_core_kernel<GdnCoreParams>, one), "cudaLaunchKernelEx");
  } else {
    check_cuda(cudaLaunchKernelEx(&cfg, gdn_core_kernel<GdnCoreSeqsParams>, p), "cudaLaunchKernelEx");
  }
  ZINC_CUDA_LAUNCHED("gdn_core");
}

}  // namespace zinc::cuda
