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
};

// grid (ff / 4, k · n): warp = one ff row of one (token, expert) pair.
template <DType T>
__global__ void __launch_bounds__(32 * kWarps) moe_gate_up_kernel(const __grid_constant__ MoeParams p) {
  const int r = blockIdx.x * kWarps + threadIdx.x / 32, pair = blockIdx.y, t = pair / p.k;
  if (r >= p.ff) return;
  const int e = p.ids[pair];
  float* out = p.act + static_cast<int64_t>(pair) * p.ff + r;
  if (e < 0 || e >= p.E) {
    if (threadIdx.x % 32 == 0) *out = __int_as_float(0x7fc00000);  // a bad id shows as NaN
    return;
  }
  const size_t row = (static_cast<size_t>(e) * p.ff + r) * p.gate_row_bytes;
  const float* x = p.x + static_cast<int64_t>(t) * p.d;
  float g = 0, u = 0;
  row_dot2_partial<T>(p.gate + row, p.up + row, p.d, x, g, u);
  const float gs = warp_sum(g), us = warp_sum(u);
  if (threadIdx.x % 32 == 0) *out = silu(gs) * us;
}

// grid (d / 4, n): warp = one output element of one token, summed over its experts.
template <DType T>
__global__ void __launch_bounds__(32 * kWarps) moe_down_kernel(const __grid_constant__ MoeParams p) {
  const int r = blockIdx.x * kWarps + threadIdx.x / 32, t = blockIdx.y;
  if (r >= p.d) return;
  // Lane partials of all k experts summed first (the warp sum is linear), so the
  // experts' loads overlap instead of waiting on a reduction each.
  float total = 0;
#pragma unroll 4
  for (int j = 0; j < p.k; ++j) {
    const int pair = t * p.k + j, e = p.ids[pair];
    if (e < 0 || e >= p.E) continue;  // gate_up already poisoned this token's act
    float acc[kMaxDotTokens] = {};
    row_dot_partial<T>(p.down + (static_cast<size_t>(e) * p.d + r) * p.down_row_bytes, p.ff,
                       p.act + static_cast<int64_t>(pair) * p.ff, 0, 1, acc);
    total += p.weights[pair] * acc[0];
  }
  total = warp_sum(total);
  if (threadIdx.x % 32 == 0) p.y[static_cast<int64_t>(t) * p.d + r] = total;
}

}  // namespace

void moe_route(const float* logits, int64_t E, int64_t n, int k, bool renormalize, int32_t* ids, float* weights,
               cudaStream_t s) {
  if (E > kMaxExperts || k > 32) throw std::invalid_argument("cuda moe_route: more than 512 experts or 32 chosen");
  moe_route_kernel<<<ceil_div(n, 4), 128, 0, s>>>(logits, static_cast<int>(E), static_cast<int>(n), k, renormalize,
                                                  ids, weights);
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
              static_cast<int>(x.rows())};
  if (static_cast<int64_t>(p.k) * p.n > 65535) throw std::invalid_argument("cuda moe_ffn: over 65535 (token, expert) pairs");
  const dim3 gate_grid(ceil_div(p.ff, kWarps), static_cast<unsigned>(p.k * p.n));
  dispatch_weight_type(gate.type, [&](auto type) {
    moe_gate_up_kernel<decltype(type)::value><<<gate_grid, 32 * kWarps, 0, s>>>(p);
  });
  ZINC_CUDA_LAUNCHED("moe_gate_up");
  const dim3 down_grid(ceil_div(p.d, kWarps), static_cast<unsigned>(p.n));
  dispatch_weight_type(down.type, [&](auto type) {
    moe_down_kernel<decltype(type)::value><<<down_grid, 32 * kWarps, 0, s>>>(p);
  });
  ZINC_CUDA_LAUNCHED("moe_down");
}

}  // namespace zinc::cuda
