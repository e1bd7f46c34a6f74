// Routing inside the decode expert kernels (moe.cu, moe_stream.cu): each block finds
// its token's chosen experts itself from the router's logits (one warp's top-k), so
// the experts need no routing launch and no host round trip.
#pragma once

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernels.h"  // kMaxRouted

namespace zinc::cuda {

constexpr int kMaxRouterExperts = 512;

// Router logits as unsigned keys in the same order (-0 counts as +0); 0 marks a
// taken expert (only a negative NaN maps there too).
__device__ __forceinline__ uint32_t order_key(float v) {
  const uint32_t u = __float_as_uint(v + 0.0f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float key_value(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// One warp: moe_route for one token, logits {E} -> ids, weights {k} (the k largest
// logits, ties to the lower expert; weights may be null). Expert e is held by lane
// e % 32, kPerLane experts a lane. Not inlined: one copy serves every kernel instance
// of a file.
template <int kPerLane>
__device__ __noinline__ void route_warp_of(const float* logits, int E, int k, bool renormalize, int32_t* ids,
                                           float* weights) {
  const int lane = threadIdx.x % 32;
  uint32_t key[kPerLane];
  uint32_t top = 0;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int e = lane + 32 * i;
    key[i] = e < E ? order_key(__ldcg(logits + e)) : 0;  // L2: written by a recent kernel
    top = max(top, key[i]);
  }
  const float mx = key_value(__reduce_max_sync(0xffffffffu, top));
  float sum = 0, chosen = 0, my_p = 0;
  if (weights && !renormalize) {
#pragma unroll
    for (int i = 0; i < kPerLane; ++i)
      if (lane + 32 * i < E) sum += expf(key_value(key[i]) - mx);
    sum = warp_sum(sum);
  }
  for (int j = 0; j < k; ++j) {
    uint32_t best = 0;
    int bi = 0;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i)
      if (key[i] > best) best = key[i], bi = i;  // strict: the lowest of equal keys
    const uint32_t m = __reduce_max_sync(0xffffffffu, best);
    const uint32_t id = __reduce_min_sync(0xffffffffu, best == m && m != 0 ? lane + 32 * bi : 0xffffffffu);
#pragma unroll
    for (int i = 0; i < kPerLane; ++i)
      if (lane + 32 * i == static_cast<int>(id)) key[i] = 0;
    const float p = expf(key_value(m) - mx);
    chosen += p;
    if (lane == j) my_p = p;
    if (lane == 0) ids[j] = static_cast<int32_t>(id);
  }
  if (weights && lane < k) weights[lane] = my_p / (renormalize ? chosen : sum);
}

// Each round scans a lane's keys: up to 256 experts (the flagship's) a lane holds 8
// instead of 16, which made the decode step 1.7% faster (PERFORMANCE.md, session 18).
inline __device__ void route_warp(const float* logits, int E, int k, bool renormalize, int32_t* ids, float* weights) {
  if (E <= 256) return route_warp_of<8>(logits, E, k, renormalize, ids, weights);
  route_warp_of<kMaxRouterExperts / 32>(logits, E, k, renormalize, ids, weights);
}

// Where a kernel finds the chosen experts: the router's logits, or ids/weights.
struct Routing {
  const float* logits;  // {E, n}, or null
  const int32_t* ids;   // {k, n} when logits is null
  const float* weights; // {k, n} when logits is null
  bool renormalize;
};

}  // namespace zinc::cuda
