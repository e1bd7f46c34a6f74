// The gated shared expert's output for a few tokens in one launch: its down
// projection reads silu(g)·u formed once per block in shared memory, and the sigmoid
// gate and the add into the routed experts' sum happen as each output element is
// written. Inside moe_ffn_routed's sequence its inputs are older than the previous
// kernel, so everything but the add runs before the wait for that kernel.
#include "backend/cuda/expert_decode.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

// Kernels for up to 5 tokens (one sequence's decode among them: a kernel compiled for
// more tokens issues their instructions predicated off) and up to kExpertDecodeMaxTokens.
constexpr int kFewTokens = 5;

struct SharedParams {
  const uint8_t* down;  // {ff, d}
  size_t row_bytes;
  const float* g;      // {ff, n}
  const float* u;      // {ff, n}
  const float* logit;  // {1, n} or null
  float* y;            // {d, n}
  ExpertParts parts;   // sums null: y holds the routed experts' sum
  int ff, d, n, rows;  // rows: output rows per block
  int k;               // experts in parts
  bool inputs_settled;
};

// grid (d / rows), n <= kMaxTokens. Shared memory: the rows' span, silu(g)·u of every
// token, the sums, with run scales the run sums of silu(g)·u.
template <DType T, int kMaxTokens>
__global__ void __launch_bounds__(kExpertThreads) shared_expert_add_kernel(const __grid_constant__ SharedParams p) {
  extern __shared__ uint4 smem[];
  if (!p.inputs_settled) pdl_begin();
  const int r0 = blockIdx.x * p.rows, nr = min(p.rows, p.d - r0);
  auto* sm = reinterpret_cast<uint8_t*>(smem);
  const uint8_t* rows = stage_span(sm, p.down + static_cast<size_t>(r0) * p.row_bytes, nr * p.row_bytes);
  cp_async_commit();
  const int chunks = p.ff / 4;
  auto* xs = reinterpret_cast<float4*>(sm + span_slot_bytes(p.rows * p.row_bytes));
  for (int c = threadIdx.x; c < p.n * chunks; c += blockDim.x) {
    // L2: inside moe_ffn_routed's sequence these were written two kernels back.
    const float4 g = __ldcg(reinterpret_cast<const float4*>(p.g) + c);
    const float4 u = __ldcg(reinterpret_cast<const float4*>(p.u) + c);
    xs[c / chunks * chunks + swizzled_chunk(c % chunks)] =
        make_float4(silu(g.x) * u.x, silu(g.y) * u.y, silu(g.z) * u.z, silu(g.w) * u.w);
  }
  float* sums = reinterpret_cast<float*>(xs + p.n * chunks);  // [row][kMaxTokens]
  float* xsum = sums + p.rows * kMaxTokens;                   // [token][ff / 32]
  if constexpr (kHasRunScales<T>) {
    __syncthreads();
    stage_run_sums(xs, p.n, p.ff / 32, xsum);
  }
  cp_async_wait<0>();
  __syncthreads();
  rows_dot_staged<T, kMaxTokens>(
      0, nr, p.ff, p.n, chunks,
      [&](int i, const uint8_t*& row, const float4*& xr, const float*& xsr) {
        row = rows + i * p.row_bytes, xr = xs, xsr = xsum;
      },
      sums);
  __syncthreads();
  if (p.inputs_settled) pdl_begin();
  // Every down_part block has read its pick (moe.cu).
  if (p.parts.route && blockIdx.x == 0 && threadIdx.x < p.n * p.k) p.parts.route[threadIdx.x] = kNoPick;
  for (int i = threadIdx.x; i < nr * p.n; i += blockDim.x) {
    const int t = i / nr, r = i % nr;
    const float gate = p.logit ? sigmoid(p.logit[t]) : 1.0f;
    float& y = p.y[static_cast<int64_t>(t) * p.d + r0 + r];
    float routed = 0;  // as moe_down adds them
    if (p.parts.sums)
      for (int j = 0; j < p.k; ++j)
        routed += p.parts.weights[t * p.k + j] * p.parts.sums[static_cast<int64_t>(t * p.k + j) * p.d + r0 + r];
    else
      routed = y;
    y = routed + gate * sums[r * kMaxTokens + t];
  }
}

constexpr size_t kSmemBudget = 96 * 1024;

}  // namespace

void shared_expert_add(const Tensor& g, const Tensor& u, const Tensor& down, const float* gate_logit, const Tensor& y,
                       bool inputs_settled, const ExpertParts* parts, int k, cudaStream_t s) {
  SharedParams p{static_cast<const uint8_t*>(down.data),
                 down.row_bytes(),
                 g.as<const float>(),
                 u.as<const float>(),
                 gate_logit,
                 y.as<float>(),
                 parts ? *parts : ExpertParts{nullptr, nullptr, nullptr},
                 static_cast<int>(down.ne[0]),
                 static_cast<int>(down.rows()),
                 static_cast<int>(g.rows()),
                 std::min<int>(16, static_cast<int>(down.rows())),
                 k,
                 inputs_settled};
  if (p.ff % 32 != 0) throw std::invalid_argument("cuda shared_expert_add: rows not a multiple of 32 elements");
  // 16 rows per block: 128 blocks on a 2048-wide model, one per SM.
  const int runs = has_run_scales(down.type) ? p.n * p.ff / 32 : 0;
  const int max_tokens = p.n <= kFewTokens ? kFewTokens : static_cast<int>(kExpertDecodeMaxTokens);
  auto smem = [&] {
    return span_slot_bytes(p.rows * p.row_bytes) + (p.n * p.ff + p.rows * max_tokens + runs) * sizeof(float);
  };
  for (; smem() > kSmemBudget; p.rows /= 2)
    if (p.rows == 1) throw std::invalid_argument("cuda shared_expert_add: rows too long for shared memory");
  const auto launch = [&]<auto kKernel>() {
    allow_smem<kKernel>(kSmemBudget);
    launch_pdl_smem(kKernel, ceil_div(p.d, p.rows), kExpertThreads, smem(), s, p);
  };
  dispatch_weight_type(down.type, [&](auto type) {
    constexpr DType T = decltype(type)::value;
    if (max_tokens == kFewTokens) launch.template operator()<shared_expert_add_kernel<T, kFewTokens>>();
    else launch.template operator()<shared_expert_add_kernel<T, static_cast<int>(kExpertDecodeMaxTokens)>>();
  });
  ZINC_CUDA_LAUNCHED("shared_expert_add");
}

}  // namespace zinc::cuda
