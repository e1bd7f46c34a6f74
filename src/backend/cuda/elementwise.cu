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
  const float* b;  // {d, rows} added to x first, or null
  const float* bb; // {d}: with b, added to each row of b first (or null)
  const float* bw; // {d}: with b, b is rms-normed with this weight before the add (or null)
  float* sum;      // {d, rows}: x + b, written when b is set (may alias x or b)
  float* y;
  float eps;
  int d;
  bool l2;
  bool vec;  // d a multiple of 4 up to 4·kNormVec4·kNormMaxThreads, every pointer 16-byte aligned
};

// One block per row. A vec row is read once as float4 (a few per thread, all loads in
// flight together), the weight before the wait as the previous kernel never writes it;
// other rows are read twice by a scalar loop (the second time from `sum` when there is
// one, as it may alias x). The sum of squares is one warp-shuffle pass, one barrier and
// a fixed-order sum of the warp partials, so results are deterministic.
constexpr int kNormMaxThreads = 1024, kNormVec4 = 2;

__device__ __forceinline__ float4 scale4(float4 a, float s, float4 w) {
  return make_float4(a.x * s * w.x, a.y * s * w.y, a.z * s * w.z, a.w * s * w.w);
}

// The block's sum of v in a fixed order (warp shuffles, then the warps' partials
// through `warp_part`, which a second reduction must not share).
__device__ __forceinline__ float block_sum_fixed(float v, float* warp_part, int T) {
  v = warp_sum(v);
  if (T > 32) {
    if (threadIdx.x % 32 == 0) warp_part[threadIdx.x / 32] = v;
    __syncthreads();
    v = 0;
    for (int w = 0; w < T / 32; ++w) v += warp_part[w];
  }
  return v;
}

__global__ void __launch_bounds__(kNormMaxThreads) row_norm_kernel(const __grid_constant__ NormParams p) {
  __shared__ float warp_ss[kNormMaxThreads / 32], warp_ssb[kNormMaxThreads / 32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * p.d;
  const int n4 = p.d / 4, T = blockDim.x;
  float4 v[kNormVec4], wv[kNormVec4], zv[kNormVec4], bwv[kNormVec4], bbv[kNormVec4];
  if (p.vec) {
#pragma unroll
    for (int i = 0; i < kNormVec4; ++i) {
      const int j = threadIdx.x + i * T;
      wv[i] = p.w && j < n4 ? reinterpret_cast<const float4*>(p.w)[j] : make_float4(1, 1, 1, 1);
      bwv[i] = p.bw && j < n4 ? reinterpret_cast<const float4*>(p.bw)[j] : make_float4(1, 1, 1, 1);
      bbv[i] = p.bb && j < n4 ? reinterpret_cast<const float4*>(p.bb)[j] : make_float4(0, 0, 0, 0);
    }
  }
  pdl_begin();
  float ss = 0;
  if (p.vec) {
    const float4* x4 = reinterpret_cast<const float4*>(p.x + base);
    const float4* b4 = p.b ? reinterpret_cast<const float4*>(p.b + base) : nullptr;
    const float4* z4 = p.z ? reinterpret_cast<const float4*>(p.z + base) : nullptr;
    float4 bv[kNormVec4];
#pragma unroll
    for (int i = 0; i < kNormVec4; ++i) {
      const int j = threadIdx.x + i * T;
      v[i] = j < n4 ? x4[j] : make_float4(0, 0, 0, 0);
      bv[i] = b4 && j < n4 ? b4[j] : make_float4(0, 0, 0, 0);
      bv[i].x += bbv[i].x, bv[i].y += bbv[i].y, bv[i].z += bbv[i].z, bv[i].w += bbv[i].w;
      zv[i] = z4 && j < n4 ? z4[j] : make_float4(0, 0, 0, 0);
    }
    if (p.bw) {  // b normed before the add
      float ssb = 0;
#pragma unroll
      for (int i = 0; i < kNormVec4; ++i)
        ssb += bv[i].x * bv[i].x + bv[i].y * bv[i].y + bv[i].z * bv[i].z + bv[i].w * bv[i].w;
      const float invb = rsqrtf(block_sum_fixed(ssb, warp_ssb, T) / p.d + p.eps);
#pragma unroll
      for (int i = 0; i < kNormVec4; ++i) bv[i] = scale4(bv[i], invb, bwv[i]);
    }
#pragma unroll
    for (int i = 0; i < kNormVec4; ++i) {
      const int j = threadIdx.x + i * T;
      v[i].x += bv[i].x, v[i].y += bv[i].y, v[i].z += bv[i].z, v[i].w += bv[i].w;
      if (p.b && j < n4) reinterpret_cast<float4*>(p.sum + base)[j] = v[i];
      ss += v[i].x * v[i].x + v[i].y * v[i].y + v[i].z * v[i].z + v[i].w * v[i].w;
    }
  } else {
    const auto b_at = [&](int i) { return p.b[base + i] + (p.bb ? p.bb[i] : 0.0f); };
    float invb = 1;
    if (p.bw) {
      float ssb = 0;
      for (int i = threadIdx.x; i < p.d; i += T) ssb += b_at(i) * b_at(i);
      invb = rsqrtf(block_sum_fixed(ssb, warp_ssb, T) / p.d + p.eps);
    }
    for (int i = threadIdx.x; i < p.d; i += T) {
      float xv = p.x[base + i];
      if (p.b) xv += p.bw ? b_at(i) * invb * p.bw[i] : b_at(i), p.sum[base + i] = xv;
      ss += xv * xv;
    }
  }
  ss = block_sum_fixed(ss, warp_ss, T);
  const float inv = rsqrtf((p.l2 ? ss : ss / p.d) + p.eps);
  if (p.vec) {
#pragma unroll
    for (int i = 0; i < kNormVec4; ++i) {
      const int j = threadIdx.x + i * T;
      if (j >= n4) continue;
      float4 r = scale4(v[i], inv, wv[i]);
      if (p.z) r.x *= silu(zv[i].x), r.y *= silu(zv[i].y), r.z *= silu(zv[i].z), r.w *= silu(zv[i].w);
      reinterpret_cast<float4*>(p.y + base)[j] = r;
    }
  } else {
    const float* src = p.b ? p.sum : p.x;
    for (int i = threadIdx.x; i < p.d; i += T) {
      float r = src[base + i] * inv;
      if (p.w) r *= p.w[i];
      if (p.z) r *= silu(p.z[base + i]);
      p.y[base + i] = r;
    }
  }
}

void launch_row_norm(NormParams p, int64_t rows, cudaStream_t s, const char* name) {
  uintptr_t addr = 0;
  for (const void* q : {static_cast<const void*>(p.x), static_cast<const void*>(p.w), static_cast<const void*>(p.z),
                        static_cast<const void*>(p.b), static_cast<const void*>(p.bb), static_cast<const void*>(p.bw),
                        static_cast<const void*>(p.sum), static_cast<const void*>(p.y)})
    addr |= reinterpret_cast<uintptr_t>(q);
  const int n4 = p.d / 4;
  p.vec = p.d % 4 == 0 && n4 <= kNormMaxThreads * kNormVec4 && addr % 16 == 0;
  // vec: a float4 per thread where the row allows (a 2048 row takes 512 threads).
  const int threads = p.vec ? std::min(kNormMaxThreads, (n4 + 31) / 32 * 32) : p.d >= 1024 ? kThreads : 64;
  launch_pdl(row_norm_kernel, static_cast<unsigned>(rows), threads, s, p);
  ZINC_CUDA_LAUNCHED(name);
}

struct RopeKernelParams {
  float* x;  // {head_dim, heads, n}
  const int32_t* pos;
  const float* freq_factors;
  double theta, freq_scale;
  int head_dim, heads, half, n_rot;
  bool neox;
};

// One thread per (pair, head, token).
__global__ void rope_kernel(const __grid_constant__ RopeKernelParams p) {
  pdl_begin();
  const int j = blockIdx.x * blockDim.x + threadIdx.x, h = blockIdx.y, t = blockIdx.z;
  if (j >= p.half) return;
  float sn, cs;
  rope_sincos(p.theta, p.freq_scale, p.freq_factors, j, p.n_rot, p.pos[t], sn, cs);
  float* xh = p.x + (static_cast<int64_t>(t) * p.heads + h) * p.head_dim;
  const int2 i = rope_dims(p.neox, j, p.half);
  const float a = xh[i.x], b = xh[i.y];
  xh[i.x] = a * cs - b * sn;
  xh[i.y] = a * sn + b * cs;
}

enum class Binary { Add, AddRow, Swiglu, Geglu, MulSigmoid, MulSigmoidRow };

// Gemma's gelu_pytorch_tanh (tanhf, not an approximation of it: the CPU backend's form).
__device__ __forceinline__ float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

template <Binary Op>
__global__ void binary_kernel(const float* a, const float* b, float* y, int64_t count, int64_t d) {
  pdl_begin();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if constexpr (Op == Binary::Add) y[i] = a[i] + b[i];
    if constexpr (Op == Binary::AddRow) y[i] = a[i] + b[i % d];
    if constexpr (Op == Binary::Swiglu) y[i] = silu(a[i]) * b[i];
    if constexpr (Op == Binary::Geglu) y[i] = gelu_tanh(a[i]) * b[i];
    if constexpr (Op == Binary::MulSigmoid) y[i] = a[i] * sigmoid(b[i]);
    if constexpr (Op == Binary::MulSigmoidRow) y[i] = a[i] * sigmoid(b[i / d]);
  }
}

template <Binary Op>
void launch_binary(const float* a, const float* b, float* y, int64_t count, int64_t d, cudaStream_t s,
                   const char* name) {
  const int blocks = static_cast<int>(std::min<int64_t>(ceil_div(count, kThreads), 4096));
  launch_pdl(binary_kernel<Op>, blocks, kThreads, s, a, b, y, count, d);
  ZINC_CUDA_LAUNCHED(name);
}

__global__ void scale_kernel(const float* x, float f, float* y, int64_t count) {
  pdl_begin();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = x[i] * f;
}

__global__ void slice_cols_kernel(const float* x, float* y, int64_t width, int64_t offset, int64_t len,
                                  int64_t count) {
  pdl_begin();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = x[(i / len) * width + offset + i % len];
}

// A copy of at most a few kilobytes to or from pinned host memory (its device
// view) by one block, not the copy engine: between two decode steps a 4-byte
// cudaMemcpyAsync of the token cost about 13 us of idle GPU (PERFORMANCE.md,
// session 20). Launched without PDL: it follows a step's graph or precedes one.
__global__ void small_copy_kernel(uint8_t* dst, const uint8_t* src, int bytes) {
  if (((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src) | bytes) & 3) == 0) {
    for (int i = threadIdx.x; i < bytes / 4; i += blockDim.x)
      reinterpret_cast<uint32_t*>(dst)[i] = reinterpret_cast<const uint32_t*>(src)[i];
  } else {
    for (int i = threadIdx.x; i < bytes; i += blockDim.x) dst[i] = src[i];
  }
}

// argmax in two launches: blocks (kArgmaxBlocks per row at most) each find the best
// of a contiguous slice, then one warp per row picks among the slices. Ties go to
// the first index, as std::max_element.
constexpr int kArgmaxThreads = 256, kArgmaxBlocks = 128, kArgmaxMinSlice = 2048;

int argmax_blocks(int64_t V) {
  return static_cast<int>(std::min<int64_t>(kArgmaxBlocks, ceil_div(V, kArgmaxMinSlice)));
}

__device__ __forceinline__ void better(float& bv, int& bi, float ov, int oi) {
  if (ov > bv || (ov == bv && oi < bi)) bv = ov, bi = oi;
}
__device__ __forceinline__ void warp_best(float& bv, int& bi) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    better(bv, bi, __shfl_xor_sync(0xffffffffu, bv, o), __shfl_xor_sync(0xffffffffu, bi, o));
}

// grid (blocks, rows); partials {2, blocks, rows}: value and index (as int bits).
__global__ void __launch_bounds__(kArgmaxThreads) argmax_slice_kernel(const float* logits, int64_t V, float* partials) {
  pdl_begin();
  __shared__ float best_v[kArgmaxThreads / 32];
  __shared__ int best_i[kArgmaxThreads / 32];
  const float* l = logits + static_cast<int64_t>(blockIdx.y) * V;
  const int64_t slice = ((V + gridDim.x - 1) / gridDim.x + 3) / 4 * 4;  // float4-aligned slices
  const int64_t begin = blockIdx.x * slice, end = begin + slice < V ? begin + slice : V;
  float bv = -FLT_MAX;
  int bi = 0x7fffffff;
  if (V % 4 == 0) {
    const float4* l4 = reinterpret_cast<const float4*>(l);
    for (int64_t j = begin / 4 + threadIdx.x; j < end / 4; j += blockDim.x) {
      const float4 q = l4[j];
      const int i = static_cast<int>(4 * j);
      better(bv, bi, q.x, i), better(bv, bi, q.y, i + 1), better(bv, bi, q.z, i + 2), better(bv, bi, q.w, i + 3);
    }
  } else {
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) better(bv, bi, l[i], static_cast<int>(i));
  }
  warp_best(bv, bi);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) best_v[warp] = bv, best_i[warp] = bi;
  __syncthreads();
  if (warp == 0) {
    bv = lane < kArgmaxThreads / 32 ? best_v[lane] : -FLT_MAX;
    bi = lane < kArgmaxThreads / 32 ? best_i[lane] : 0x7fffffff;
    warp_best(bv, bi);
    if (lane == 0) {
      float* out = partials + 2 * (static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x);
      out[0] = bv, out[1] = __int_as_float(bi);
    }
  }
}

// One warp per row over its `blocks` partials.
__global__ void argmax_pick_kernel(const float* partials, int blocks, int32_t* ids) {
  pdl_begin();
  const int lane = threadIdx.x;
  const float* p = partials + 2 * static_cast<int64_t>(blockIdx.x) * blocks;
  float bv = -FLT_MAX;
  int bi = 0x7fffffff;
  for (int b = lane; b < blocks; b += 32) better(bv, bi, p[2 * b], __float_as_int(p[2 * b + 1]));
  warp_best(bv, bi);
  if (lane == 0) ids[blockIdx.x] = bi == 0x7fffffff ? 0 : bi;
}

}  // namespace

void row_norm(NormKind kind, const float* x, const float* w, const float* z, float eps, float* y, int64_t d,
              int64_t rows, cudaStream_t s) {
  launch_row_norm(
      {x, w, z, nullptr, nullptr, nullptr, nullptr, y, eps, static_cast<int>(d), kind == NormKind::L2, false}, rows, s,
      "row_norm");
}

void add_rms_norm(const float* a, const float* b, const float* b_bias, const float* b_w, const float* w, float eps,
                  float* sum, float* y, int64_t d, int64_t rows, cudaStream_t s) {
  launch_row_norm({a, w, nullptr, b, b_bias, b_w, sum, y, eps, static_cast<int>(d), false, false}, rows, s,
                  "add_rms_norm");
}

void rope(float* x, const int32_t* pos, int64_t head_dim, int64_t heads, int64_t n, const RopeArgs& rp,
          cudaStream_t s) {
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
  launch_pdl(rope_kernel, grid, 64, s, p);
  ZINC_CUDA_LAUNCHED("rope");
}

void add(const float* a, const float* b, float* y, int64_t count, int64_t b_len, cudaStream_t s) {
  if (b_len < count) launch_binary<Binary::AddRow>(a, b, y, count, b_len, s, "add");
  else launch_binary<Binary::Add>(a, b, y, count, 1, s, "add");
}
void swiglu(const float* gate, const float* up, float* y, int64_t count, cudaStream_t s) {
  launch_binary<Binary::Swiglu>(gate, up, y, count, 1, s, "swiglu");
}
void geglu(const float* gate, const float* up, float* y, int64_t count, cudaStream_t s) {
  launch_binary<Binary::Geglu>(gate, up, y, count, 1, s, "geglu");
}
void scale(const float* x, float f, float* y, int64_t count, cudaStream_t s) {
  const int blocks = static_cast<int>(std::min<int64_t>(ceil_div(count, kThreads), 4096));
  launch_pdl(scale_kernel, blocks, kThreads, s, x, f, y, count);
  ZINC_CUDA_LAUNCHED("scale");
}
void mul_sigmoid(const float* x, const float* g, float* y, int64_t count, int64_t d, bool per_row, cudaStream_t s) {
  if (per_row) launch_binary<Binary::MulSigmoidRow>(x, g, y, count, d, s, "mul_sigmoid");
  else launch_binary<Binary::MulSigmoid>(x, g, y, count, d, s, "mul_sigmoid");
}

void small_copy(void* dst, const void* src, size_t bytes, cudaStream_t s) {
  if (bytes == 0) return;
  small_copy_kernel<<<1, 256, 0, s>>>(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src),
                                      static_cast<int>(bytes));
  ZINC_CUDA_LAUNCHED("small_copy");
}

void slice_cols(const float* x, float* y, int64_t width, int64_t offset, int64_t len, int64_t rows, cudaStream_t s) {
  const int64_t count = len * rows;
  const int blocks = static_cast<int>(std::min<int64_t>(ceil_div(count, kThreads), 4096));
  launch_pdl(slice_cols_kernel, blocks, kThreads, s, x, y, width, offset, len, count);
  ZINC_CUDA_LAUNCHED("slice_cols");
}

size_t argmax_partials(int64_t V, int64_t rows) { return 2 * static_cast<size_t>(argmax_blocks(V) * rows); }

void argmax(const float* logits, int64_t V, int64_t rows, int32_t* ids, float* partials, cudaStream_t s) {
  const int blocks = argmax_blocks(V);
  launch_pdl(argmax_slice_kernel, dim3(blocks, static_cast<unsigned>(rows)), kArgmaxThreads, s, logits, V, partials);
  ZINC_CUDA_LAUNCHED("argmax_slice");
  launch_pdl(argmax_pick_kernel, static_cast<unsigned>(rows), 32, s, partials, blocks, ids);
  ZINC_CUDA_LAUNCHED("argmax_pick");
}

}  // namespace zinc::cuda
