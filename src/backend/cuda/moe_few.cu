// The routed experts for a few tokens an expert (several sequences decoding, short
// prompts) on the tensor cores: moe_grouped.cu's pairs in expert order, in tiles of up
// to 8 tokens of one expert, through few_tile.cuh's warps.
//
// gate_up: a warp's 16 mma rows are 8 gate rows and the same 8 up rows, so a gate sum
// and its up sum meet in one thread, which writes the GLU into act (expert order, f16
// pairs: the down tokens' fragments). down: a warp's 16 rows of one expert against its
// tile's act rows; each pair's output row goes to `out`. Routing is the previous
// kernels' work, so nothing is copied before the wait; instead each warp streams its
// units one slice after another through two slots (the next slice's rows copied while
// the current one's are multiplied), one wave of blocks in all. On an H200 at 16
// sequences this took gate + up from 71 to 63 us a layer and down from 50 to 42
// against the pipelined tiles (PERFORMANCE.md, session 35); at 2-8 sequences moe.cu's
// decode kernels stay faster, so this starts past kExpertDecodeMaxTokens.
#include <algorithm>

#include "backend/cuda/expert_glu.cuh"
#include "backend/cuda/few_tile.cuh"
#include "backend/cuda/moe_few.h"

namespace zinc::cuda {
namespace {

using few::kTileRows;
using few::kWarps;
constexpr int kGlu = kTileRows / 2;  // gate rows (and up rows) a warp

struct FewMoeParams : ExpertRows {
  MoeFewArgs a;
  int d, ff, k;
  int ksteps;  // slices of C chunks a row
};

// A warp's units in turn: unit u is (tile u / groups, group u % groups), u = the warp's
// index in the grid + i · (warps in the grid), while the tile exists. A unit's rows are
// taken in ksteps slices of C chunks, each one copy per row into one of the warp's two
// slots, and a unit's token rows are looked up while the slice before is multiplied.
// rows_of(tile, group): the unit's row count; row(tile, group, r): its row r;
// token_key(tile, j): a key for token j (j < tile.count; may load), once a unit;
// token_row(key): its f16 row; store(tile, group, acc): the unit's sums.
template <DType T, int C, class Rows, class Row, class Key, class TokenRow, class Store>
__device__ __forceinline__ void run_units(const FewMoeParams& p, int groups, Rows rows_of, Row row, Key token_key,
                                          TokenRow token_row, Store store) {
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ uint64_t bars[2][kWarps];
  pdl_begin();  // the tiles are the previous kernels' work
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, j = lane / 4;
  const int step = gridDim.x * kWarps, tiles = *p.a.tile_count, ksteps = p.ksteps;
  const auto slot = [&](int s) { return smem + (2 * warp + s) * few::warp_bytes<T, C>(); };
  few::init_bar(&bars[0][warp]);
  few::init_bar(&bars[1][warp]);
  // Starts slice kc of unit u in slot s: at slice 0 its tile and token key, then copies.
  const auto start = [&](int u, int kc, int s, ExpertTile& tile, int& key) {
    if (kc == 0) {
      if (u / groups >= tiles) return false;
      tile = p.a.tiles[u / groups];
      key = j < tile.count ? token_key(tile, j) : -1;
    }
    const int g = u % groups;
    const few::Slice<T, C> slice(static_cast<size_t>(kc) * C, C, false);
    few::copy_rows<T, C>(slot(s), &bars[s][warp], rows_of(tile, g), slice, [&](int r) { return row(tile, g, r); });
    return true;
  };
  int u = blockIdx.x * kWarps + warp, kc = 0, key;
  ExpertTile tile;
  bool have = start(u, 0, 0, tile, key);
  float acc[1][4] = {};
  for (int i = 0; have; ++i) {
    const int s = i & 1;
    const int next_u = kc + 1 < ksteps ? u : u + step, next_kc = kc + 1 < ksteps ? kc + 1 : 0;
    ExpertTile next = tile;
    int next_key = key;
    const bool more = start(next_u, next_kc, s ^ 1, next, next_key);
    uint4 b[1][C][4][2];
    few::load_tokens<C>(b[0], key >= 0 ? token_row(key) + kc * C * few::kChunk : nullptr);
    few::wait_rows(&bars[s][warp], (i >> 1) & 1);
    const int g = u % groups;
    const few::Slice<T, C> slice(static_cast<size_t>(kc) * C, C, false);
    few::product<T, C, 1>(slot(s), slice.lane_shifts([&](int r) { return row(tile, g, r); }), b, acc);
    if (kc + 1 == ksteps) {
      store(tile, u % groups, acc[0]);
      acc[0][0] = acc[0][1] = acc[0][2] = acc[0][3] = 0.0f;
    }
    u = next_u, kc = next_kc, tile = next, key = next_key, have = more;
  }
}

// gate_up: groups of 8 rows; a warp's rows are the group's gate rows, then its up rows.
template <DType T, int C>
__global__ void __launch_bounds__(few::kThreads, 2) moe_few_gate_up_kernel(const __grid_constant__ FewMoeParams p) {
  const int lane = threadIdx.x % 32;
  run_units<T, C>(
      p, p.ff / kGlu, [](const ExpertTile&, int) { return kTileRows; },
      [&](const ExpertTile& tile, int g, int r) {
        const size_t first = (static_cast<size_t>(tile.expert) * p.ff + g * kGlu + r % kGlu) * p.gate_row_bytes;
        return (r < kGlu ? p.gate : p.up) + first;
      },
      [&](const ExpertTile& tile, int j) { return p.a.sorted[tile.pos0 + j] / p.k; },
      [&](int token) { return p.a.xb + static_cast<size_t>(token) * p.d; },
      [&](const ExpertTile& tile, int g, const float (&acc)[4]) {
        // acc[h]: gate row f, token 2t + h; acc[2 + h]: its up row.
        const int f = g * kGlu + lane / 4, t = lane % 4;
        const int at = (f & ~3) | ((f & 1) << 1) | ((f >> 1) & 1);  // act is a token row of the down tiles: pairs order
        constexpr float kMax = 65504.0f;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int tok = 2 * t + h;
          if (tok < tile.count)
            p.a.act[static_cast<size_t>(tile.pos0 + tok) * p.ff + at] = __float2half_rn(fminf(
                fmaxf(expert_glu(p.glu, static_cast<int64_t>(tile.expert) * p.ff + f, acc[h], acc[2 + h]), -kMax),
                kMax));
        }
      });
}

// down: groups of 16 output rows of one expert.
template <DType T, int C>
__global__ void __launch_bounds__(few::kThreads, 2) moe_few_down_kernel(const __grid_constant__ FewMoeParams p) {
  const int lane = threadIdx.x % 32;
  run_units<T, C>(
      p, (p.d + kTileRows - 1) / kTileRows,
      [&](const ExpertTile&, int g) { return min(kTileRows, p.d - g * kTileRows); },
      [&](const ExpertTile& tile, int g, int r) {
        return p.down + (static_cast<size_t>(tile.expert) * p.d + g * kTileRows + r) * p.down_row_bytes;
      },
      [&](const ExpertTile& tile, int j) { return tile.pos0 + j; },
      [&](int pos) { return p.a.act + static_cast<size_t>(pos) * p.ff; },
      [&](const ExpertTile& tile, int g, const float (&acc)[4]) {
        const int r0 = g * kTileRows, rows = min(kTileRows, p.d - r0), t = lane % 4;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int r = lane / 4 + 8 * (i / 2), tok = 2 * t + i % 2;
          if (r < rows && tok < tile.count)
            p.a.out[static_cast<size_t>(p.a.sorted[tile.pos0 + tok]) * p.d + r0 + r] =
                acc[i] + expert_bias(p.down_bias, static_cast<int64_t>(tile.expert) * p.d + r0 + r);
        }
      });
}

// A row of `in` elements as slices of C chunks: two chunks a slice where they pair up.
struct Slices {
  int chunks_per_slice = 0, count = 0;
};
Slices slices_for(int64_t in) {
  if (in % few::kChunk != 0 || in == 0) return {};
  const int chunks = static_cast<int>(in / few::kChunk);
  return chunks % 2 == 0 ? Slices{2, chunks / 2} : Slices{1, chunks};
}

bool takes_weight(const Tensor& w) { return few::rows_fit(w) && slices_for(w.ne[0]).count > 0; }

// The down kernel, or gate_up's, over `units` units (a bound) for w's type and slices.
template <bool kDown>
void launch_units(const Tensor& w, int64_t units, FewMoeParams p, cudaStream_t s) {
  const Slices sl = slices_for(w.ne[0]);
  p.ksteps = sl.count;
  dispatch_weight_type(w.type, [&](auto type) {
    constexpr DType T = decltype(type)::value;
    if constexpr (few::kType<T>) {
      auto go = [&]<int C>() {  // at most one wave: the warps loop over the units
        constexpr size_t smem = 2 * static_cast<size_t>(kWarps) * few::warp_bytes<T, C>();
        constexpr auto kernel = kDown ? moe_few_down_kernel<T, C> : moe_few_gate_up_kernel<T, C>;
        const int64_t blocks =
            std::min<int64_t>(ceil_div(units, kWarps), resident_blocks<kernel>(few::kThreads, smem));
        launch_pdl_smem(kernel, dim3(blocks), dim3(few::kThreads), smem, s, p);
      };
      if (sl.chunks_per_slice == 1) go.template operator()<1>();
      else go.template operator()<2>();
    }
  });
}

}  // namespace

bool moe_few_takes(const ExpertWeights& ex, int64_t d) {
  const int64_t ff = ex.down.ne[0];
  return hopper_or_later() && ex.gate.type == ex.up.type && ff % kGlu == 0 && ex.gate.ne[0] == d &&
         takes_weight(ex.gate) && takes_weight(ex.up) && takes_weight(ex.down);
}

void moe_few_launch(const ExpertWeights& ex, int d, int k, const MoeFewArgs& a, cudaStream_t s) {
  const int ff = static_cast<int>(ex.down.ne[0]);
  const FewMoeParams p{expert_rows(ex), a, d, ff, k, 0};
  launch_units<false>(ex.gate, static_cast<int64_t>(a.max_tiles) * (ff / kGlu), p, s);
  ZINC_CUDA_LAUNCHED("moe_few_gate_up");
  launch_units<true>(ex.down, static_cast<int64_t>(a.max_tiles) * ceil_div(d, kTileRows), p, s);
  ZINC_CUDA_LAUNCHED("moe_few_down");
}

}  // namespace zinc::cuda
