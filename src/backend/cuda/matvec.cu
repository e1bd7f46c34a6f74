// matvec (y = x·wᵀ for at most 8 tokens, one warp per weight row) and embed (rows
// of a table dequantized), both instantiated for every weight type.
#include "backend/cuda/kernels.h"
#include "backend/cuda/matvec.cuh"

namespace zinc::cuda {
namespace {

constexpr int kRowsPerBlock = 4;  // one warp each

struct MatvecParams {
  const uint8_t* w;  // {in, out} blocks
  size_t row_bytes;
  const float* x;  // {in, n}
  float* y;        // {out, n}
  int in, out, n;
};

template <DType T>
__global__ void __launch_bounds__(32 * kRowsPerBlock) matvec_kernel(const __grid_constant__ MatvecParams p) {
  const int r = blockIdx.x * kRowsPerBlock + threadIdx.x / 32;
  if (r >= p.out) return;
  float acc[kMaxDotTokens] = {};
  row_dot_partial<T>(p.w + static_cast<size_t>(r) * p.row_bytes, p.in, p.x, p.in, p.n, acc);
#pragma unroll
  for (int t = 0; t < kMaxDotTokens; ++t) {
    if (t < p.n) {
      const float s = warp_sum(acc[t]);
      if (threadIdx.x % 32 == 0) p.y[static_cast<int64_t>(t) * p.out + r] = s;
    }
  }
}

struct EmbedParams {
  const uint8_t* table;  // {d, vocab}
  size_t row_bytes;
  const int32_t* ids;  // {n}
  float* out;          // {d, n}
  int d, vocab;
};

template <DType T>
__global__ void embed_kernel(const __grid_constant__ EmbedParams p) {
  const int e0 = (blockIdx.x * blockDim.x + threadIdx.x) * 8, t = blockIdx.y;
  if (e0 >= p.d) return;
  const int id = p.ids[t];
  float v[8];
  if (id >= 0 && id < p.vocab) {
    Dequant<T>::load8(p.table + static_cast<size_t>(id) * p.row_bytes, e0, v);
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = __int_as_float(0x7fc00000);  // an id out of range shows as NaN
  }
  float4* o = reinterpret_cast<float4*>(p.out + static_cast<int64_t>(t) * p.d + e0);
  o[0] = make_float4(v[0], v[1], v[2], v[3]);
  o[1] = make_float4(v[4], v[5], v[6], v[7]);
}

}  // namespace

void matvec(const Tensor& w, const Tensor& x, const Tensor& y, cudaStream_t s) {
  MatvecParams p{static_cast<const uint8_t*>(w.data), w.row_bytes(), x.as<const float>(), y.as<float>(),
                 static_cast<int>(w.ne[0]), static_cast<int>(w.rows()), static_cast<int>(x.rows())};
  dispatch_weight_type(w.type, [&](auto type) {
    matvec_kernel<decltype(type)::value><<<ceil_div(p.out, kRowsPerBlock), 32 * kRowsPerBlock, 0, s>>>(p);
  });
  ZINC_CUDA_LAUNCHED("matvec");
}

void embed(const Tensor& table, const Tensor& ids, const Tensor& out, cudaStream_t s) {
  EmbedParams p{static_cast<const uint8_t*>(table.data), table.row_bytes(), ids.as<const int32_t>(), out.as<float>(),
                static_cast<int>(table.ne[0]), static_cast<int>(table.rows())};
  const dim3 grid(ceil_div(p.d / 8, 128), static_cast<unsigned>(ids.ne[0]));
  dispatch_weight_type(table.type, [&](auto type) { embed_kernel<decltype(type)::value><<<grid, 128, 0, s>>>(p); });
  ZINC_CUDA_LAUNCHED("embed");
}

}  // namespace zinc::cuda
