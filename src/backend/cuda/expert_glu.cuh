// The routed experts' activation, shared by the decode (moe.cu) and the grouped
// (moe_grouped.cu) expert kernels.
#pragma once

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {

// bias[at], or 0 without a bias.
__device__ __forceinline__ float expert_bias(const float* bias, int64_t at) { return bias ? bias[at] : 0.0f; }

// The activation of g and u with their biases added: SwiGLU, or GPT-OSS's clamped form.
__device__ __forceinline__ float expert_activation(const ExpertGlu& p, float g, float u) {
  if (p.clamp > 0) {
    g = fminf(g, p.clamp);
    u = fmaxf(-p.clamp, fminf(u, p.clamp));
    return g * sigmoid(p.alpha * g) * (u + 1.0f);
  }
  return silu(g) * u;
}

// glu(g + gate_bias[at], u + up_bias[at]) for at = expert · ff + row (backend.h's
// ExpertWeights).
__device__ __forceinline__ float expert_glu(const ExpertGlu& p, int64_t at, float g, float u) {
  return expert_activation(p, g + expert_bias(p.gate_bias, at), u + expert_bias(p.up_bias, at));
}

}  // namespace zinc::cuda
