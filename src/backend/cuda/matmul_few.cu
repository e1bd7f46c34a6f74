// y[i] = x · w[i]ᵀ for a few tokens (several sequences decoding) on the tensor cores,
// each weight byte read once.
//
// The pipelined tiles (mma_pipe.cuh) are built for prefill: 128 rows a block, the
// weights copied in 8- or 16-byte pieces through L1 and a block barrier every chunk. At
// 8 tokens on an H100 they moved the flagship's Q8_0 projections at 0.75 TB/s, and the
// older tiles (mma_tile.cuh) its Q6_K LM head at 0.64 (PERFORMANCE.md, session 33); on
// an H200 this kernel moves them at about 2.6 and 2.0 (session 34). Here a block takes
// 16-row tiles, a tile's k split over a team of warps (few_tile.cuh). Each warp copies
// its rows before it waits for the previous kernel. Past 8 tokens (two n-tiles) a warp
// of one chunk holds both n-tiles' token fragments; one of two chunks runs the staged
// rows once per n-tile. One tile a team and no loop: a block's whole share is in flight
// at once, and the next blocks of the SM take over as it leaves.
#include <algorithm>
#include <vector>

#include "backend/cuda/few_tile.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

using few::kTileRows;
using few::kTileTokens;
using few::kWarps;
constexpr int kMaxWeights = 8;

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

// grid: ceil(tiles / (kWarps / team)) blocks of kWarps warps; C chunks a warp, NT
// n-tiles of 8 tokens.
template <DType T, int C, int NT>
__global__ void __launch_bounds__(few::kThreads, C == 1 && NT == 1 ? 3 : 2)
    matmul_few_kernel(const __grid_constant__ FewParams p) {
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ uint64_t bars[kWarps];
  __shared__ few::Partials<NT> partial;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int team = warp / p.team, member = warp % p.team, tile = blockIdx.x * (kWarps / p.team) + team;
  const bool active = team < kWarps / p.team && tile < p.tiles;  // whole teams
  int wi = 0;
  while (wi + 1 < p.count && p.w[wi + 1].tile0 <= tile) ++wi;
  const FewWeight& w = p.w[wi];
  const int row0 = (tile - w.tile0) * kTileRows, rows = min(kTileRows, w.out - row0);
  const few::Slice<T, C> slice(member);
  uint8_t* slot = smem + warp * few::warp_bytes<T, C>();
  if (active) {  // weights first: they do not depend on the previous kernel
    few::init_bar(&bars[warp]);
    few::copy_rows<T, C>(slot, &bars[warp], rows, slice,
                         [&](int r) { return w.w + static_cast<size_t>(row0 + r) * w.row_bytes; });
  }
  pdl_begin();
  if (!active) return;
  const int k0 = member * C * few::kChunk;
  const auto tokens = [&](int nt) {  // this lane's token row of n-tile nt, or null
    const int tok = kTileTokens * nt + lane / 4;
    return tok < p.n ? p.xb + static_cast<size_t>(tok) * p.in + k0 : nullptr;
  };
  float acc[NT][4] = {};
  if constexpr (C == 1) {  // every n-tile's tokens in registers: each A fragment decoded once
    uint4 b[NT][C][4][2];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) few::load_tokens<C>(b[nt], tokens(nt));
    few::wait_rows(&bars[warp]);
    few::product<T, C, NT>(slot, slice.shift, b, acc);
  } else {  // one n-tile at a time, the staged rows decoded again for the next
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      uint4 b[1][C][4][2];
      few::load_tokens<C>(b[0], tokens(nt));
      if (nt == 0) few::wait_rows(&bars[warp]);
      float part[1][4] = {};
      few::product<T, C, 1>(slot, slice.shift, b, part);
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[nt][e] = part[0][e];
    }
  }
  if (!few::team_sum<NT>(acc, partial, p.team)) return;
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = g + 8 * (i / 2), tok = kTileTokens * nt + 2 * t + i % 2;
      if (r < rows && tok < p.n) w.y[static_cast<int64_t>(tok) * w.out + row0 + r] = acc[nt][i];
    }
}

template <DType T, int C, int NT>
void launch_few(const FewParams& p, cudaStream_t s) {
  constexpr size_t smem = static_cast<size_t>(kWarps) * few::warp_bytes<T, C>();
  allow_smem<matmul_few_kernel<T, C, NT>>(smem);
  launch_pdl_smem(matmul_few_kernel<T, C, NT>, dim3(ceil_div(p.tiles, kWarps / p.team)), dim3(few::kThreads), smem,
                  s, p);
}

}  // namespace

bool matmul_few_takes(const Tensor& w, int64_t n) {
  return n >= kFewMinTokens && n <= kFewMaxTokens && few::rows_fit(w) && few::shape_for(w.ne[0]).team > 0 &&
         hopper_or_later();
}

void matmul_few(std::span<const Tensor> w, const __half* xb, int64_t in, int64_t n, std::span<const Tensor> y,
                cudaStream_t s) {
  const few::Shape shape = few::shape_for(in);
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
      if constexpr (few::kType<T>) {
        const bool two = n > kTileTokens;
        if (shape.chunks_per_warp == 1) two ? launch_few<T, 1, 2>(p, s) : launch_few<T, 1, 1>(p, s);
        else two ? launch_few<T, 2, 2>(p, s) : launch_few<T, 2, 1>(p, s);
      }
    });
    ZINC_CUDA_LAUNCHED("matmul_few");
  }
}

}  // namespace zinc::cuda
