// token_logprobs: each row's log-sum-exp (the max in float, the sum of exp(logit - max)
// in double, as row_log_z on the host) and the logprobs of the row's ids. One block a
// row: a scored prompt's rows are few (128 a step) and long (a vocabulary), so a block
// reading its row twice from L2 is all it takes.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

constexpr int kThreads = 1024;

__device__ __forceinline__ double block_sum_f64(double v, double* shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  double t = lane < kThreads / 32 ? shared[lane] : 0.0;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
  return t;
}

// grid: n rows. ids and out {n, m}: id j of row t at j * n + t.
__global__ void __launch_bounds__(kThreads)
    token_logprobs_kernel(const float* logits, int64_t V, int64_t n, const int32_t* ids, int m, float* out) {
  pdl_begin();
  __shared__ float max_shared[32];
  __shared__ double sum_shared[32];
  const int64_t t = blockIdx.x;
  const float* row = logits + t * V;
  float mx = -INFINITY;
  for (int64_t i = threadIdx.x; i < V; i += kThreads) mx = fmaxf(mx, row[i]);
  mx = block_max(mx, max_shared);
  double sum = 0;
  for (int64_t i = threadIdx.x; i < V; i += kThreads) sum += exp(static_cast<double>(row[i]) - mx);
  const double log_z = mx + log(block_sum_f64(sum, sum_shared));
  for (int j = threadIdx.x; j < m; j += kThreads) {
    const int64_t at = static_cast<int64_t>(j) * n + t;
    out[at] = static_cast<float>(static_cast<double>(row[ids[at]]) - log_z);
  }
}

}  // namespace

void token_logprobs(const float* logits, int64_t V, int64_t n, const int32_t* ids, int m, float* out,
                    cudaStream_t s) {
  if (n == 0) return;
  launch_pdl(token_logprobs_kernel, static_cast<unsigned>(n), kThreads, s, logits, V, n, ids, m, out);
  ZINC_CUDA_LAUNCHED("token_logprobs");
}

}  // namespace zinc::cuda
