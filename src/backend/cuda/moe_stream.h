// The routed experts' decode kernels for large experts (moe_stream.cu), tried by
// moe.cu's launches first: each returns false, launching nothing, where its experts
// are small, of a type it does not stream, or too large for its shared memory.
#pragma once

#include "backend/cuda/expert_route.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {

// act {ff, k, n} = the GLU of the chosen experts' gate and up rows · x {d, n}.
bool stream_gate_up(const Tensor& x, const ExpertWeights& ex, int k, const Routing& route, float* act,
                    cudaStream_t s);
// y {d, n} = the chosen experts' down · act, weighted and added in order; with parts,
// each expert's output and weight instead (shared_expert_add sums them).
bool stream_down(const ExpertWeights& ex, int k, int n, const Routing& route, const float* act, const Tensor& y,
                 const ExpertParts* parts, cudaStream_t s);

}  // namespace zinc::cuda
