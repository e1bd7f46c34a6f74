// The small ops: row norms (RMS, L2, gated), rotary embedding, element-wise
// arithmetic, column slices and argmax. All memory-bound, one pass each.
#include <cfloat>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

constexpr int kThreads = 256;

struct NormParams {
  const float* x;  // {d, rows}
  const float* w;  // {d} or null
  const float* z;  // {d, rows} gate or null
  float* y;
  float eps;
  int d;
  bool l2;
};

// One block per row. Rows up to kNormCached float4 per thread are loaded once into
// registers (all loads in flight together); longer rows are read twice.
constexpr int kNormCached = 8;

__global__ void __launch_bounds__(kThreads) row_norm_kernel(const __grid_constant__ NormParams p) {
  __shared__ float red[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * p.d;
  const int n4 = p.d / 4;
  const bool cached = p.d % 4 == 0 && n4 <= kNormCached * static_cast<int>(blockDim.x);
  float4 v[kNormCached];
  float ss = 0;
  if (cached) {
    const float4* x4 = reinterpret_cast<const float4*>(p.x + base);
#pragma unroll
    for (int i = 0; i < kNormCached; ++i) {
      const int j = threadIdx.x + i * blockDim.x;
      v[i] = j < n4 ? x4[j] : make_float4(0, 0, 0, 0);
    }
#pragma unroll
    for (int i = 0; i < kNormCached; ++i) ss += v[i].x * v[i].x + v[i].y * v[i].y + v[i].z * v[i].z + v[i].w * v[i].w;
  } else {
    for (int i = threadIdx.x; i < p.d; i += blockDim.x) ss += p.x[base + i] * p.x[base + i];
  }
  ss = block_sum(ss, red);
  const float inv = rsqrtf((p.l2 ? ss : ss / p.d) + p.eps);
  auto out = [&](int i, float xv) {
    float r = xv * inv;
    if (p.w) r *= p.w[i];
    if (p.z) r *= silu(p.z[base + i]);
    p.y[base + i] = r;
  };
  if (cached) {
#pragma unroll
    for (int i = 0; i < kNormCached; ++i) {
      const int j = threadIdx.x + i * blockDim.x;
      if (j < n4) out(4 * j, v[i].x), out(4 * j + 1, v[i].y), out(4 * j + 2, v[i].z), out(4 * j + 3, v[i].w);
    }
  } else {
    for (int i = threadIdx.x; i < p.d; i += blockDim.x) out(i, p.x[base + i]);
  }
}

struct RopeKernelParams {
  float* x;  // {head_dim, heads, n}
  const int32_t* pos;
  const float* freq_factors;
  double theta, freq_scale;
  int head_dim, heads, half, n_rot;
  bool neox;
};

// One thread per (pair, head, token). The inverse frequency is formed in double
// as the CPU reference does, the angle in f32.
__global__ void rope_kernel(const __grid_constant__ RopeKernelParams p) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x, h = blockIdx.y, t = blockIdx.z;
  if (j >= p.half) return;
  double f = pow(p.theta, -2.0 * j / p.n_rot) * p.freq_scale;
  if (p.freq_factors) f /= p.freq_factors[j];
  const float ang = static_cast<float>(p.pos[t]) * static_cast<float>(f);
  float sn, cs;
  sincosf(ang, &sn, &cs);
  float* xh = p.x + (static_cast<int64_t>(t) * p.heads + h) * p.head_dim;
  const int i0 = p.neox ? j : 2 * j, i1 = p.neox ? j + p.half : 2 * j + 1;
  const float a = xh[i0], b = xh[i1];
  xh[i0] = a * cs - b * sn;
  xh[i1] = a * sn + b * cs;
}

enum class Binary { Add, Swiglu, MulSigmoid, MulSigmoidRow };

template <Binary Op>
__global__ void binary_kernel(const float* a, const float* b, float* y, int64_t count, int64_t d) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if constexpr (Op == Binary::Add) y[i] = a[i] + b[i];
    if constexpr (Op == Binary::Swiglu) y[i] = silu(a[i]) * b[i];
    if constexpr (Op == Binary::MulSigmoid) y[i] = a[i] * sigmoid(b[i]);
    if constexpr (Op == Binary::MulSigmoidRow) y[i] = a[i] * sigmoid(b[i / d]);
  }
}

template <Binary Op>
void launch_binary(const float* a, const float* b, float* y, int64_t count, int64_t d, cudaStream_t s,
                   const char* name) {
  const int blocks = static_cast<int>(std::min<int64_t>(ceil_div(count, kThreads), 4096));
  binary_kernel<Op><<<blocks, kThreads, 0, s>>>(a, b, y, count, d);
  ZINC_CUDA_LAUNCHED(name);
}

__global__ void slice_cols_kernel(const float* x, float* y, int64_t width, int64_t offset, int64_t len,
                                  int64_t count) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = x[(i / len) * width + offset + i % len];
}

// One block per row: the largest value, the first index on ties (as std::max_element).
__global__ void __launch_bounds__(1024) argmax_kernel(const float* logits, int64_t V, int32_t* ids) {
  __shared__ float best_v[32];
  __shared__ int best_i[32];
  const float* l = logits + static_cast<int64_t>(blockIdx.x) * V;
  float bv = -FLT_MAX;
  int bi = 0x7fffffff;
  // float4 loads, 8 in flight per thread before any compare: one block reads the
  // whole (vocabulary-long) row, so it is latency-bound otherwise.
  const int64_t n4 = V % 4 == 0 ? V / 4 : 0;
  const float4* l4 = reinterpret_cast<const float4*>(l);
  for (int64_t base = threadIdx.x; base < n4; base += 8 * static_cast<int64_t>(blockDim.x)) {
    float4 q[8];
#pragma unroll
    for (int b = 0; b < 8; ++b) {
      const int64_t j = base + b * static_cast<int64_t>(blockDim.x);
      q[b] = j < n4 ? l4[j] : make_float4(-FLT_MAX, -FLT_MAX, -FLT_MAX, -FLT_MAX);
    }
#pragma unroll
    for (int b = 0; b < 8; ++b) {
      const int j = static_cast<int>(4 * (base + b * static_cast<int64_t>(blockDim.x)));
      if (q[b].x > bv) bv = q[b].x, bi = j;
      if (q[b].y > bv) bv = q[b].y, bi = j + 1;
      if (q[b].z > bv) bv = q[b].z, bi = j + 2;
      if (q[b].w > bv) bv = q[b].w, bi = j + 3;
    }
  }
  for (int64_t i = 4 * n4 + threadIdx.x; i < V; i += blockDim.x)
    if (l[i] > bv) bv = l[i], bi = static_cast<int>(i);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (ov > bv || (ov == bv && oi < bi)) bv = ov, bi = oi;
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) best_v[warp] = bv, best_i[warp] = bi;
  __syncthreads();
  if (warp == 0) {
    bv = lane < static_cast<int>(blockDim.x / 32) ? best_v[lane] : -FLT_MAX;
    bi = lane < static_cast<int>(blockDim.x / 32) ? best_i[lane] : 0x7fffffff;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (ov > bv || (ov == bv && oi < bi)) bv = ov, bi = oi;
    }
    if (lane == 0) ids[blockIdx.x] = bi == 0x7fffffff ? 0 : bi;
  }
}

}  // namespace

void row_norm(NormKind kind, const float* x, const float* w, const float* z, float eps, float* y, int64_t d,
              int64_t rows, cudaStream_t s) {
  NormParams p{x, w, z, y, eps, static_cast<int>(d), kind == NormKind::L2};
  const int threads = d >= 1024 ? kThreads : 64;
  row_norm_kernel<<<static_cast<unsigned>(rows), threads, 0, s>>>(p);
  ZINC_CUDA_LAUNCHED("row_norm");
}

void rope(float* x, const int32_t* pos, int64_t head_dim, int64_t heads, int64_t n, const RopeArgs& rp, cudaStream_t s) {
  RopeKernelParams p{x,
                     pos,
                     rp.freq_factors,
                     rp.theta,
                     rp.freq_scale,
                     static_cast<int>(head_dim),
                     static_cast<int>(heads),
                     rp.n_rot / 2,
                     rp.n_rot,
                     rp.neox};
  const dim3 grid(ceil_div(p.half, 64), static_cast<unsigned>(heads), static_cast<unsigned>(n));
  rope_kernel<<<grid, 64, 0, s>>>(p);
  ZINC_CUDA_LAUNCHED("rope");
}

void add(const float* a, const float* b, float* y, int64_t count, cudaStream_t s) {
  launch_binary<Binary::Add>(a, b, y, count, 1, s, "add");
}
void swiglu(const float* gate, const float* up, float* y, int64_t count, cudaStream_t s) {
  launch_binary<Binary::Swiglu>(gate, up, y, count, 1, s, "swiglu");
}
void mul_sigmoid(const float* x, const float* g, float* y, int64_t count, int64_t d, bool per_row, cudaStream_t s) {
  if (per_row) launch_binary<Binary::MulSigmoidRow>(x, g, y, count, d, s, "mul_sigmoid");
  else launch_binary<Binary::MulSigmoid>(x, g, y, count, d, s, "mul_sigmoid");
}

void slice_cols(const float* x, float* y, int64_t width, int64_t offset, int64_t len, int64_t rows, cudaStream_t s) {
  const int64_t count = len * rows;
  const int blocks = static_cast<int>(std::min<int64_t>(ceil_div(count, kThreads), 4096));
  slice_cols_kernel<<<blocks, kThreads, 0, s>>>(x, y, width, offset, len, count);
  ZINC_CUDA_LAUNCHED("slice_cols");
}

void argmax(const float* logits, int64_t V, int64_t rows, int32_t* ids, cudaStream_t s) {
  argmax_kernel<<<static_cast<unsigned>(rows), 1024, 0, s>>>(logits, V, ids);
  ZINC_CUDA_LAUNCHED("argmax");
}

}  // namespace zinc::cuda
