// The gated shared expert's output for a few tokens in one launch: its down
// projection reads silu(g)·u on the fly, and the sigmoid gate and the add into the
// routed experts' sum happen as each output element is written.
#include "backend/cuda/kernels.h"
#include "backend/cuda/matvec.cuh"

namespace zinc::cuda {
namespace {

constexpr int kWarps = 4;

struct SharedParams {
  const uint8_t* down;  // {ff, d}
  size_t row_bytes;
  const float* g;      // {ff, n}
  const float* u;      // {ff, n}
  const float* logit;  // {1, n} or null
  float* y;            // {d, n}
  int ff, d, n;
  bool staged;
};

// grid (d / 8): warp = two output rows for every token.
constexpr int kSharedGroups = 2;

template <DType T>
__global__ void __launch_bounds__(32 * kWarps) shared_expert_add_kernel(const __grid_constant__ SharedParams p) {
  pdl_begin();
  __shared__ uint4 stage[kWarps][stage_vecs<T, 2, kSharedGroups>()];
  const int warp = threadIdx.x / 32, r0 = (blockIdx.x * kWarps + warp) * 2;
  if (r0 >= p.d) return;
  const uint8_t* rows[2] = {p.down + static_cast<size_t>(r0) * p.row_bytes,
                            p.down + static_cast<size_t>(min(r0 + 1, p.d - 1)) * p.row_bytes};
  float acc[2][kMaxDotTokens] = {};
  const SwigluX x{p.g, p.u, p.ff};
  rows_dot_auto<T, 2, kSharedGroups>(p.staged, rows, p.ff, 0, 1, x, p.n, acc, stage[warp]);
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int t = 0; t < kMaxDotTokens; ++t) {
      if (t < p.n) {
        const float s = warp_sum(acc[i][t]);
        if (threadIdx.x % 32 == 0 && r0 + i < p.d) {
          const float gate = p.logit ? sigmoid(p.logit[t]) : 1.0f;
          p.y[static_cast<int64_t>(t) * p.d + r0 + i] += gate * s;
        }
      }
    }
}

}  // namespace

void shared_expert_add(const Tensor& g, const Tensor& u, const Tensor& down, const float* gate_logit, const Tensor& y,
                       cudaStream_t s) {
  SharedParams p{static_cast<const uint8_t*>(down.data),
                 down.row_bytes(),
                 g.as<const float>(),
                 u.as<const float>(),
                 gate_logit,
                 y.as<float>(),
                 static_cast<int>(down.ne[0]),
                 static_cast<int>(down.rows()),
                 static_cast<int>(g.rows()),
                 stageable(down.data, down.row_bytes(), down.ne[0])};
  dispatch_weight_type(down.type, [&](auto type) {
    launch_pdl(shared_expert_add_kernel<decltype(type)::value>, ceil_div(p.d, 2 * kWarps), 32 * kWarps, s, p);
  });
  ZINC_CUDA_LAUNCHED("shared_expert_add");
}

}  // namespace zinc::cuda
