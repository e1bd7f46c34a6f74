// Mixture of experts without a host round trip: the router's softmax + top-k on the
// GPU, then two launches over the (token, chosen expert) pairs. gate_up computes
// act = silu(gate_e·x)·(up_e·x) for every pair, one warp per (pair, ff row) reading
// both rows against the same x; down computes each output element of a token as
// the weighted sum over its k experts in a fixed order, so the result is
// deterministic and needs no per-pair buffer or atomics.
#include <cfloat>

#include "backend/cuda/kernels.h"
#include "backend/cuda/matvec.cuh"

namespace zinc::cuda {
namespace {

constexpr int kMaxExperts = 512;
constexpr int kPerLane = kMaxExperts / 32;

// One warp per token; expert e is held by lane e % 32.
__global__ void moe_route_kernel(const float* logits, int E, int n, int k, bool renormalize, int32_t* ids,
                                 float* weights) {
  pdl_begin();
  const int t = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (t >= n) return;
  const float* l = logits + static_cast<int64_t>(t) * E;
  float v[kPerLane];
  float mx = -FLT_MAX;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int e = lane + 32 * i;
    v[i] = e < E ? l[e] : -FLT_MAX;
    mx = fmaxf(mx, v[i]);
  }
  mx = warp_max(mx);
  float sum = 0;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i)
    if (lane + 32 * i < E) sum += expf(v[i] - mx);
  sum = warp_sum(sum);
  uint32_t taken = 0;  // bit i: expert lane + 32 i already chosen
  float chosen = 0, my_p = 0;
  int my_slot = -1;
  for (int j = 0; j < k; ++j) {
    float bv = -FLT_MAX;
    int bi = 0x7fffffff;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int e = lane + 32 * i;
      if (e < E && !((taken >> i) & 1) && (v[i] > bv || (v[i] == bv && e < bi))) bv = v[i], bi = e;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (ov > bv || (ov == bv && oi < bi)) bv = ov, bi = oi;
    }
    const float p = expf(bv - mx);
    chosen += p;
    if (bi % 32 == lane) taken |= 1u << (bi / 32);
    if (lane == j) my_p = p, my_slot = bi;
    if (lane == 0) ids[static_cast<int64_t>(t) * k + j] = bi;
  }
  if (my_slot >= 0) weights[static_cast<int64_t>(t) * k + lane] = my_p / (renormalize ? chosen : sum);
}

constexpr int kWarps = 4;

struct MoeParams {
  const uint8_t* gate;  // {d, ff, E}
  const uint8_t* up;    // {d, ff, E}
  const uint8_t* down;  // {ff, d, E}
  size_t gate_row_bytes, down_row_bytes;
  const float* x;        // {d, n}
  const int32_t* ids;    // {k, n}
  const float* weights;  // {k, n}
  float* act;            // {ff, k, n}
  float* y;              // {d, n}
  int d, ff, E, k, n;
  bool gate_up_staged, down_staged;  // see matvec.cuh
};

// grid (ff / 4, k · n): warp = one ff row of one (token, expert) pair, its gate and
// up rows read together.
constexpr int kGateUpGroups = 8;  // a 2048-wide row in one pass

template <DType T>
__global__ void __launch_bounds__(32 * kWarps) moe_gate_up_kernel(const __grid_constant__ MoeParams p) {
  pdl_begin();
  __shared__ uint4 stage[kWarps][stage_vecs<T, 2, kGateUpGroups>()];
  const int warp = threadIdx.x / 32, r = blockIdx.x * kWarps + warp, pair = blockIdx.y, t = pair / p.k;
  if (r >= p.ff) return;
  const int e = p.ids[pair];
  float* out = p.act + static_cast<int64_t>(pair) * p.ff + r;
  if (e < 0 || e >= p.E) {
    if (threadIdx.x % 32 == 0) *out = __int_as_float(0x7fc00000);  // a bad id shows as NaN
    return;
  }
  const size_t row = (static_cast<size_t>(e) * p.ff + r) * p.gate_row_bytes;
  const uint8_t* rows[2] = {p.gate + row, p.up + row};
  float acc[2][kMaxDotTokens] = {};
  const DenseX x{p.x + static_cast<int64_t>(t) * p.d, 0};
  rows_dot_auto<T, 2, kGateUpGroups>(p.gate_up_staged, rows, p.d, 0, 1, x, 1, acc, stage[warp]);
  const float gs = warp_sum(acc[0][0]), us = warp_sum(acc[1][0]);
  if (threadIdx.x % 32 == 0) *out = silu(gs) * us;
}

// grid (d / kDownRows, n): a block computes kDownRows output rows of one token;
// warp w takes the token's experts w, w + kDownWarps, ... (their rows are short:
// ff elements), then the block sums the warps' weighted parts in a fixed order.
constexpr int kDownWarps = 8, kDownRows = 4, kDownGroups = 2;

template <DType T>
__global__ void __launch_bounds__(32 * kDownWarps) moe_down_kernel(const __grid_constant__ MoeParams p) {
  pdl_begin();
  __shared__ uint4 stage[kDownWarps][stage_vecs<T, kDownRows, kDownGroups>()];
  __shared__ float part[kDownWarps][kDownRows];
  const int warp = threadIdx.x / 32, r0 = blockIdx.x * kDownRows, t = blockIdx.y;
  float sum[kDownRows] = {};
  for (int j = warp; j < p.k; j += kDownWarps) {
    const int pair = t * p.k + j, e = p.ids[pair];
    // A bad id reads expert 0 against its NaN act, so the token's output shows it.
    const size_t ex = e >= 0 && e < p.E ? static_cast<size_t>(e) : 0;
    const uint8_t* rows[kDownRows];
    PerRowX<kDownRows> x;
#pragma unroll
    for (int i = 0; i < kDownRows; ++i) {
      rows[i] = p.down + (ex * p.d + min(r0 + i, p.d - 1)) * p.down_row_bytes;
      x.x[i] = p.act + static_cast<int64_t>(pair) * p.ff;
    }
    float acc[kDownRows][kMaxDotTokens] = {};
    rows_dot_auto<T, kDownRows, kDownGroups>(p.down_staged, rows, p.ff, 0, 1, x, 1, acc, stage[warp]);
    const float w = p.weights[pair];
#pragma unroll
    for (int i = 0; i < kDownRows; ++i) sum[i] += w * acc[i][0];
  }
#pragma unroll
  for (int i = 0; i < kDownRows; ++i) {
    const float s = warp_sum(sum[i]);
    if (threadIdx.x % 32 == 0) part[warp][i] = s;
  }
  __syncthreads();
  if (threadIdx.x < kDownRows && r0 + static_cast<int>(threadIdx.x) < p.d) {
    float total = 0;
#pragma unroll
    for (int w = 0; w < kDownWarps; ++w) total += part[w][threadIdx.x];
    p.y[static_cast<int64_t>(t) * p.d + r0 + threadIdx.x] = total;
  }
}

}  // namespace

void moe_route(const float* logits, int64_t E, int64_t n, int k, bool renormalize, int32_t* ids, float* weights,
               cudaStream_t s) {
  if (E > kMaxExperts || k > 32) throw std::invalid_argument("cuda moe_route: more than 512 experts or 32 chosen");
  launch_pdl(moe_route_kernel, ceil_div(n, 4), 128, s, logits, static_cast<int>(E), static_cast<int>(n), k,
             renormalize, ids, weights);
  ZINC_CUDA_LAUNCHED("moe_route");
}

size_t moe_ffn_scratch_floats(int64_t ff, int64_t n, int64_t k) { return static_cast<size_t>(ff * n * k); }

void moe_ffn(const Tensor& x, const Tensor& gate, const Tensor& up, const Tensor& down, const Tensor& ids,
             const Tensor& weights, const Tensor& y, float* act, cudaStream_t s) {
  if (gate.type != up.type) throw std::invalid_argument("cuda moe_ffn: gate and up experts of different types");
  MoeParams p{static_cast<const uint8_t*>(gate.data),
              static_cast<const uint8_t*>(up.data),
              static_cast<const uint8_t*>(down.data),
              gate.row_bytes(),
              down.row_bytes(),
              x.as<const float>(),
              ids.as<const int32_t>(),
              weights.as<const float>(),
              act,
              y.as<float>(),
              static_cast<int>(x.ne[0]),
              static_cast<int>(down.ne[0]),
              static_cast<int>(gate.ne[2]),
              static_cast<int>(ids.ne[0]),
              static_cast<int>(x.rows()),
              stageable(gate.data, gate.row_bytes(), gate.ne[0]) && stageable(up.data, up.row_bytes(), up.ne[0]),
              stageable(down.data, down.row_bytes(), down.ne[0])};
  if (static_cast<int64_t>(p.k) * p.n > 65535) throw std::invalid_argument("cuda moe_ffn: over 65535 (token, expert) pairs");
  const dim3 gate_grid(ceil_div(p.ff, kWarps), static_cast<unsigned>(p.k * p.n));
  dispatch_weight_type(gate.type, [&](auto type) {
    launch_pdl(moe_gate_up_kernel<decltype(type)::value>, gate_grid, 32 * kWarps, s, p);
  });
  ZINC_CUDA_LAUNCHED("moe_gate_up");
  const dim3 down_grid(ceil_div(p.d, kDownRows), static_cast<unsigned>(p.n));
  dispatch_weight_type(down.type, [&](auto type) {
    launch_pdl(moe_down_kernel<decltype(type)::value>, down_grid, 32 * kDownWarps, s, p);
  });
  ZINC_CUDA_LAUNCHED("moe_down");
}

}  // namespace zinc::cuda
