// y[i] = x · w[i]ᵀ for a few tokens (several sequences decoding) on the tensor cores,
// each weight byte read once.
//
// The pipelined tiles (mma_pipe.cuh) are built for prefill: 128 rows a block, the
// weights copied in 8- or 16-byte pieces through L1 and a block barrier every chunk. At
// 8 tokens on an H100 they moved the flagship's Q8_0 projections at 0.75 TB/s, and the
// older tiles (mma_tile.cuh) its Q6_K LM head at 0.64 (PERFORMANCE.md, session 33); on
// an H200 this kernel moves them at about 2.6 and 2.0 (session 34). Here a block takes
// 16-row tiles (a warp's mma.sync m16n8k16 rows), and a tile's k is split over a team
// of warps, a 256-element chunk or two each. Each warp copies its 16 rows' chunks to
// its own shared memory with one bulk copy per row before it waits for the previous
// kernel, holds its chunks' token fragments in registers (up to 8 tokens: one n-tile),
// and decodes its A fragments from the staged bytes as the pipelined tiles do (Frag,
// the same k order and f16 token pairs). The team then adds its partial sums in a fixed
// order through shared memory. One tile a team and no loop: a block's whole share is in
// flight at once, and the next blocks of the SM take over as it leaves.
#include <algorithm>
#include <vector>

#include "backend/cuda/kernels.h"
#include "backend/cuda/mma_pipe.cuh"
#include "backend/cuda/warp_stream.cuh"

namespace zinc::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kTileRows = 16;  // the mma's rows
constexpr int kChunk = 256;    // k elements: a K-quant super-block, eight Q8_0 blocks
constexpr int kMaxWeights = 8;

template <DType T>
constexpr int chunk_bytes() {
  return kChunk / Dequant<T>::kBlockElems * Dequant<T>::kBlockBytes;
}
// Q6_K's 210-byte chunks do not start on 16-byte boundaries: a row's chunks are copied
// from the boundary below them and read at their offset (the same for the 16 rows of
// a tile, whose rows are 16-byte multiples).
template <DType T>
constexpr bool kShifted = chunk_bytes<T>() % 16 != 0;
// Staged bytes per row for C chunks, padded as the pipelined tiles' rows are.
template <DType T>
constexpr int row_stride(int C) {
  return pipe::a_stride(C * chunk_bytes<T>() + (kShifted<T> ? 16 : 0));
}

// A fragments of a staged chunk: pipe::Frag's, whose types carry a scale per 32
// elements, and Q6_K's, whose scales are per 16 (lane_scale takes the lane's elements).
template <DType T>
struct FewFrag : pipe::Frag<T> {
  __device__ static uint32_t lane_scale(const uint8_t* chunk, int s, int) { return pipe::Frag<T>::scale(chunk, s); }
};

// Q6_K super-block: ql[128] (low nibbles), qh[64] (2 high bits), 16 int8 scales, f16 d.
// Element 128h + 32q + l: ql[64h + 32(q & 1) + l], low nibble for q < 2, high
// otherwise; qh[32h + l] bits 2q, 2q + 1; scale sc[(128h + 32q + l) / 16].
template <>
struct FewFrag<DType::Q6_K> {
  // d · sc of the lane's 16 elements, rounded once to f16, in both halves.
  __device__ static uint32_t lane_scale(const uint8_t* chunk, int s, int l) {
    const float d = __half2float(__ushort_as_half(*reinterpret_cast<const uint16_t*>(chunk + 208)));
    const float v = d * static_cast<float>(static_cast<int8_t>(chunk[192 + 2 * s + l / 16]));
    return pipe::as_u32(__float2half2_rn(v));
  }
  // Elements e = 32s + l .. e + 7 as the f16 pairs (e, e+2), (e+1, e+3), (e+4, e+6), (e+5, e+7).
  __device__ static void load(const uint8_t* chunk, int s, int l, uint32_t scale, uint32_t (&out)[4]) {
    const int h = s / 4, q = s % 4;
    const uint2 lo = pipe::load_unaligned8(chunk + 64 * h + 32 * (q & 1) + l);
    const uint2 hi = pipe::load_unaligned8(chunk + 128 + 32 * h + l);
    const int nib = q >= 2 ? 4 : 0;
    // Bytes b and b + 2 of a word: 6-bit codes under 1024.0's exponent.
    const auto codes = [&](uint32_t lw, uint32_t hw, int b) {
      return ((lw >> (nib + 8 * b)) & 0x000F000Fu) | (((hw >> (2 * q + 8 * b)) & 0x00030003u) << 4) | pipe::kMagic;
    };
    const uint32_t bias = 0x64206420u;  // 1024 + 32 in both halves
    const __half2 d = pipe::as_half2(scale);
    out[0] = pipe::as_u32(__hmul2(pipe::codes_f16(codes(lo.x, hi.x, 0), bias), d));
    out[1] = pipe::as_u32(__hmul2(pipe::codes_f16(codes(lo.x, hi.x, 1), bias), d));
    out[2] = pipe::as_u32(__hmul2(pipe::codes_f16(codes(lo.y, hi.y, 0), bias), d));
    out[3] = pipe::as_u32(__hmul2(pipe::codes_f16(codes(lo.y, hi.y, 1), bias), d));
  }
};

struct FewWeight {
  const uint8_t* w;  // {in, out}
  size_t row_bytes;
  float* y;  // {out, n}
  int out;
  int tile0;  // this weight's first 16-row tile in the launch
};
struct FewParams {
  FewWeight w[kMaxWeights];
  int count, in, n;
  int team;   // warps per tile: in / (C · kChunk)
  int tiles;  // of all weights
  const __half* xb;  // x as the pipelined tiles' f16 token rows (to_f16_pairs)
};

__device__ __forceinline__ void team_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// grid: ceil(tiles / (kWarps / team)) blocks of kWarps warps; C chunks a warp.
template <DType T, int C>
__global__ void __launch_bounds__(kThreads, C == 1 ? 3 : 2) matmul_few_kernel(const __grid_constant__ FewParams p) {
  extern __shared__ __align__(16) uint8_t smem[];
  constexpr int kStride = row_stride<T>(C), kBytes = chunk_bytes<T>();
  __shared__ uint64_t bars[kWarps];
  __shared__ float4 partial[kWarps][32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int team = warp / p.team, member = warp % p.team, tile = blockIdx.x * (kWarps / p.team) + team;
  const bool active = team < kWarps / p.team && tile < p.tiles;  // whole teams
  int wi = 0;
  while (wi + 1 < p.count && p.w[wi + 1].tile0 <= tile) ++wi;
  const FewWeight& w = p.w[wi];
  const int row0 = (tile - w.tile0) * kTileRows, rows = min(kTileRows, w.out - row0);
  const int k0 = member * C * kChunk;
  const size_t at = static_cast<size_t>(member) * C * kBytes;  // the warp's first byte in a row
  const int shift = kShifted<T> ? static_cast<int>(at % 16) : 0;
  uint8_t* slot = smem + warp * kTileRows * kStride;
  if (active) {  // weights first: they do not depend on the previous kernel
#if __CUDA_ARCH__ < 900
    (void)bars;
    __trap();  // bulk copies: matmul_few_takes() sends older GPUs to the tiles
#else
    const uint32_t bytes = (shift + C * kBytes + 15) / 16 * 16;
    if (lane == 0) {
      mbarrier_init(&bars[warp]);
      mbarrier_expect(&bars[warp], bytes * rows);
    }
    __syncwarp();
    if (lane < rows)
      bulk_copy(slot + lane * kStride, w.w + static_cast<size_t>(row0 + lane) * w.row_bytes + at - shift, bytes,
                &bars[warp]);
#endif
  }
  pdl_begin();
  if (!active) return;
  const int g = lane / 4, t = lane % 4;
  // Token g's fragments of the warp's chunks: elements 64j + 8t .. and 64j + 32 + 8t ..
  uint4 b[C][4][2];
  const __half* x = g < p.n ? p.xb + static_cast<size_t>(g) * p.in + k0 : nullptr;
#pragma unroll
  for (int c = 0; c < C; ++c)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        b[c][j][h] = x ? __ldg(reinterpret_cast<const uint4*>(x + kChunk * c + 64 * j + 32 * h + 8 * t))
                       : make_uint4(0, 0, 0, 0);
#if __CUDA_ARCH__ >= 900
  mbarrier_wait(&bars[warp], 0);
#endif
  // Rows past the weight's end hold stale bytes; only their own outputs see them.
  const uint8_t* row[2] = {slot + g * kStride + shift, slot + (g + 8) * kStride + shift};
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int c = 0; c < C; ++c) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint32_t v[2][2][4];  // [row][run]: words (e, e+2), (e+1, e+3), (e+4, e+6), (e+5, e+7)
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int run = 0; run < 2; ++run) {
          const uint8_t* chunk = row[r] + c * kBytes;
          FewFrag<T>::load(chunk, 2 * j + run, 8 * t, FewFrag<T>::lane_scale(chunk, 2 * j + run, 8 * t), v[r][run]);
        }
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const int run = m / 2, o = 2 * (m % 2);
        const uint32_t a[4] = {v[0][run][o], v[1][run][o], v[0][run][o + 1], v[1][run][o + 1]};
        const uint4& bb = b[c][j][run];
        pipe::mma_f16(acc, a, m % 2 ? bb.z : bb.x, m % 2 ? bb.w : bb.y);
      }
    }
  }
  if (p.team > 1) {  // the team's sums, in member order
    partial[warp][lane] = make_float4(acc[0], acc[1], acc[2], acc[3]);
    team_barrier(1 + team, 32 * p.team);
    if (member != 0) return;
    for (int m = 1; m < p.team; ++m) {
      const float4 o = partial[warp + m][lane];
      acc[0] += o.x, acc[1] += o.y, acc[2] += o.z, acc[3] += o.w;
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = g + 8 * (i / 2), tok = 2 * t + i % 2;
    if (r < rows && tok < p.n) w.y[static_cast<int64_t>(tok) * w.out + row0 + r] = acc[i];
  }
}

// Chunks per warp (C) and warps per tile for rows of `in` elements; 0 chunks: none fit.
struct FewShape {
  int chunks_per_warp = 0, team = 0;
};
FewShape few_shape(int64_t in) {
  if (in % kChunk != 0) return {};
  const int chunks = static_cast<int>(in / kChunk);
  if (chunks <= kWarps) return {1, chunks};
  if (chunks <= 2 * kWarps && chunks % 2 == 0) return {2, chunks / 2};
  return {};
}

template <DType T>
constexpr bool kFewType = T == DType::Q8_0 || T == DType::Q4_K || T == DType::Q5_K || T == DType::Q6_K;
bool few_type(DType t) {
  bool yes = false;
  dispatch_weight_type(t, [&](auto type) { yes = kFewType<decltype(type)::value>; });
  return yes;
}

template <DType T, int C>
void launch_few(const FewParams& p, cudaStream_t s) {
  constexpr size_t smem = static_cast<size_t>(kWarps) * kTileRows * row_stride<T>(C);
  allow_smem<matmul_few_kernel<T, C>>(smem);
  launch_pdl_smem(matmul_few_kernel<T, C>, dim3(ceil_div(p.tiles, kWarps / p.team)), dim3(kThreads), smem, s, p);
}

}  // namespace

bool matmul_few_takes(const Tensor& w, int64_t n) {
  return n >= kFewMinTokens && n <= kFewMaxTokens && few_type(w.type) && few_shape(w.ne[0]).team > 0 &&
         hopper_or_later() && w.row_bytes() % 16 == 0 && reinterpret_cast<uintptr_t>(w.data) % 16 == 0;
}

void matmul_few(std::span<const Tensor> w, const __half* xb, int64_t in, int64_t n, std::span<const Tensor> y,
                cudaStream_t s) {
  const FewShape shape = few_shape(in);
  // One launch per weight type, up to kMaxWeights weights each, in the order given.
  std::vector<bool> done(w.size(), false);
  for (size_t first = 0; first < w.size(); ++first) {
    if (done[first]) continue;
    FewParams p{};
    p.in = static_cast<int>(in), p.n = static_cast<int>(n), p.team = shape.team, p.xb = xb;
    for (size_t i = first; i < w.size() && p.count < kMaxWeights; ++i) {
      if (done[i] || w[i].type != w[first].type) continue;
      const int out = static_cast<int>(w[i].rows());
      p.w[p.count++] = {static_cast<const uint8_t*>(w[i].data), w[i].row_bytes(), y[i].as<float>(), out, p.tiles};
      p.tiles += ceil_div(out, kTileRows);
      done[i] = true;
    }
    dispatch_weight_type(w[first].type, [&](auto type) {
      constexpr DType T = decltype(type)::value;
      if constexpr (kFewType<T>) {
        if (shape.chunks_per_warp == 1) launch_few<T, 1>(p, s);
        else launch_few<T, 2>(p, s);
      }
    });
    ZINC_CUDA_LAUNCHED("matmul_few");
  }
}

}  // namespace zinc::cuda
