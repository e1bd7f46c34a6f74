// Mixture of experts for batches (n > kMatvecMaxTokens): the (token, slot) pairs
// are grouped by expert on the GPU, so every expert's weights are read and
// dequantized once per tile of its tokens (16, 32 or 64) instead of once per token:
// through the pipelined tile product of mma_pipe.cuh when all three weights are of
// its quantized types (pipe::for_type), else the generic mma_tile.cuh. The tile follows the
// average tokens per expert: a 512-token batch gives the flagship's 256 experts 16
// each, gpt-oss-20b's 32 experts 64.
//
//   1. x -> f16 (bf16 for the generic tiles) once (each token row is read by its k
//      experts).
//   2. One block counts the pairs per expert, scans the counts (each expert's first
//      sorted position and first tile), lists the tiles and scatters the pair indices
//      into expert order. Integer atomics only: the order of pairs within an expert may
//      vary between runs, but every output element is computed by the same
//      operations whatever its column, so results are bitwise repeatable.
//   3. One launch for gate + up over all experts' tiles (grid.y = an upper bound on
//      the tile count; spare blocks exit), the tensor-core tile product of
//      mma_tile.cuh with gate rows and up rows in one tile and SwiGLU in the
//      epilogue; act is stored in expert order as the down tiles' token rows.
//   4. One launch for down, writing each pair's output row.
//   5. Combine in token order: y[t] = sum over slots j (fixed order) of w[t, j] · out[t, j],
//      plus a shared expert's (gated) output when there is one.
//
// While experts average at most six tokens (several sequences decoding, short
// prompts), steps 3 and 4 are moe_few.cu's kernels on tiles of up to 8 tokens.
#include <cub/block/block_scan.cuh>

#include <algorithm>

#include "backend/cuda/expert_glu.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma_pipe.cuh"
#include "backend/cuda/mma_tile.cuh"
#include "backend/cuda/moe_few.h"

namespace zinc::cuda {
namespace {

constexpr int kTokens = 32;  // tokens of one expert per tile (generic tiles)
// The same for the pipelined tiles: 32, or 16 when experts average under 12 tokens
// (short prompts): half the tensor-core work and token staging per weight byte, and
// room for a deeper cp.async pipeline, while few experts need a second tile.
constexpr int kPipeTokens = 32, kPipeTokensNarrow = 16, kNarrowBelowPerExpert = 12;
// 64 from 48 an expert: half the dequantizing per token (gpt-oss-20b's pp512 +13%,
// pp2048 +27%; the flagship's pp2048 +6%; PERFORMANCE.md session 30).
constexpr int kPipeTokensWide = 64, kWideFromPerExpert = 48;
// moe_few.cu's tiles while the pairs are at most this many per expert: to 192 sequences
// on the flagship, which then decode 48 / 96 / 128 / 160 / 192 sequences 13.9 / 8.4 /
// 6.5 / 4.5 / 1.8% faster than on the 16-token pipelined tiles, and prefill 96- and
// 128-token prompts 10 / 8% faster (H200, PERFORMANCE.md sessions 52 and 53). With 128
// experts the same pairs an expert gave the same: 48 / 64 / 96 sequences 9.3 / 6.5 / 1.8%
// faster than with 2 (session 54).
constexpr int kFewUpToPerExpert = 6;
constexpr int kGroupThreads = 1024;
constexpr int kMaxExperts = kGroupThreads;

struct Scratch {
  void* xb;               // {d, n}: bf16 (generic tiles) or to_f16_pairs' f16 (pipelined)
  void* act;              // {ff, pairs} in expert order, the same type
  float* out;             // {d, pairs} in pair order (token · k + slot)
  int32_t* sorted;        // pair indices in expert order
  int32_t* tile_count;    // [1]
  ExpertTile* tiles;      // [*tile_count], at most max_tiles
};

// Each expert with tokens has at most one partial tile.
int max_tiles(int64_t pairs, int64_t E, int tile) {
  return ceil_div(pairs, tile) + static_cast<int>(std::min(E, pairs));
}

size_t round_up(size_t bytes) { return (bytes + 255) & ~size_t{255}; }

// The scratch pieces in order; with base null only the total size is meaningful.
Scratch carve(void* base, int64_t d, int64_t ff, int64_t n, int64_t k, int64_t E, size_t* total) {
  const int min_tile = std::min(kPipeTokensNarrow, kFewTileTokens);
  const int64_t pairs = n * k;
  char* p = static_cast<char*>(base);
  size_t used = 0;
  auto take = [&](size_t bytes) {
    char* at = p + used;
    used += round_up(bytes);
    return at;
  };
  Scratch s;
  s.xb = take(sizeof(uint16_t) * d * n);
  s.act = take(sizeof(uint16_t) * ff * pairs);
  s.out = reinterpret_cast<float*>(take(sizeof(float) * d * pairs));
  s.sorted = reinterpret_cast<int32_t*>(take(sizeof(int32_t) * pairs));
  s.tile_count = reinterpret_cast<int32_t*>(take(sizeof(int32_t)));
  s.tiles = reinterpret_cast<ExpertTile*>(take(sizeof(ExpertTile) * max_tiles(pairs, E, min_tile)));
  if (total) *total = used;
  return s;
}

// One block: counts, scans, the tile list and the scatter into expert order. Bad ids
// join no expert. Launched without PDL; the next kernel may launch at once (every
// kernel after it waits for it before reading the tiles).
__global__ void __launch_bounds__(kGroupThreads) group_by_expert_kernel(const int32_t* ids, int pairs, int E,
                                                                        int tile, Scratch s) {
  pdl_launch_dependents();
  using Scan = cub::BlockScan<int, kGroupThreads>;
  __shared__ typename Scan::TempStorage scan;
  __shared__ int count[kMaxExperts];
  const int tid = threadIdx.x;
  count[tid] = 0;
  __syncthreads();
  for (int p = tid; p < pairs; p += kGroupThreads) {
    const int e = ids[p];
    if (e >= 0 && e < E) atomicAdd(&count[e], 1);
  }
  __syncthreads();
  const int c = tid < E ? count[tid] : 0;
  int first = 0, first_tile = 0, total_tiles = 0;
  Scan(scan).ExclusiveSum(c, first);
  __syncthreads();
  Scan(scan).ExclusiveSum((c + tile - 1) / tile, first_tile, total_tiles);
  if (tid < E) count[tid] = first;  // the expert's next free slot
  if (tid == 0) *s.tile_count = total_tiles;
  for (int j = 0; j * tile < c; ++j) s.tiles[first_tile + j] = {tid, first + j * tile, min(tile, c - j * tile)};
  __syncthreads();
  for (int p = tid; p < pairs; p += kGroupThreads) {
    const int e = ids[p];
    if (e >= 0 && e < E) s.sorted[atomicAdd(&count[e], 1)] = p;
  }
}

struct GroupedParams : ExpertRows {
  Scratch s;
  int d, ff, k;
};

// This block's tile (blockIdx.y): its expert, first sorted position and token count.
__device__ bool find_tile(const GroupedParams& p, ExpertTile& t) {
  const int tile = blockIdx.y;
  if (tile >= *p.s.tile_count) return false;
  t = p.s.tiles[tile];
  return true;
}

// grid (ff / 64, tiles): 64 gate rows and the same 64 up rows of one expert.
template <DType T>
__global__ void __launch_bounds__(mma::kThreads) grouped_gate_up_kernel(const __grid_constant__ GroupedParams p) {
  __shared__ __align__(16) mma::Smem<kTokens, false> sh;
  ExpertTile t;
  if (!find_tile(p, t)) return;
  const int r0 = blockIdx.x * mma::kHalf, valid = min(mma::kHalf, p.ff - r0);
  const size_t first = (static_cast<size_t>(t.expert) * p.ff + r0) * p.gate_row_bytes;
  const mma::ARows a{{p.gate + first, p.up + first}, p.gate_row_bytes, {valid, valid}};
  mma::BRows<__nv_bfloat16, kTokens> b;
#pragma unroll
  for (int i = 0; i < kTokens / mma::kRowsPerPass; ++i) {
    const int j = mma::load_row(i);
    b.row[i] = j < t.count ? static_cast<const __nv_bfloat16*>(p.s.xb) +
                                 static_cast<size_t>(p.s.sorted[t.pos0 + j] / p.k) * p.d
                           : nullptr;
  }
  float acc[2][kTokens / 16][4];
  mma::tile_product<T, kTokens, false>(sh, a, b, p.d, acc);
#pragma unroll
  for (int j = 0; j < kTokens / 16; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = mma::acc_row(0, i), tok = mma::acc_token<kTokens>(j, i);
      if (tok < t.count && r < valid)
        static_cast<__nv_bfloat16*>(p.s.act)[static_cast<size_t>(t.pos0 + tok) * p.ff + r0 + r] =
            __float2bfloat16(expert_glu(p.glu, static_cast<int64_t>(t.expert) * p.ff + r0 + r, acc[0][j][i],
                                        acc[1][j][i]));
    }
}

// grid (d / 128, tiles): 128 down rows of one expert; each pair's row of `out`.
template <DType T>
__global__ void __launch_bounds__(mma::kThreads) grouped_down_kernel(const __grid_constant__ GroupedParams p) {
  __shared__ __align__(16) mma::Smem<kTokens, false> sh;
  ExpertTile t;
  if (!find_tile(p, t)) return;
  const int r0 = blockIdx.x * mma::kRows;
  const uint8_t* first = p.down + (static_cast<size_t>(t.expert) * p.d + r0) * p.down_row_bytes;
  const mma::ARows a{{first, first + mma::kHalf * p.down_row_bytes},
                     p.down_row_bytes,
                     {min(mma::kHalf, p.d - r0), min(mma::kHalf, p.d - r0 - mma::kHalf)}};
  mma::BRows<__nv_bfloat16, kTokens> b;
#pragma unroll
  for (int i = 0; i < kTokens / mma::kRowsPerPass; ++i) {
    const int j = mma::load_row(i);
    b.row[i] =
        j < t.count ? static_cast<const __nv_bfloat16*>(p.s.act) + static_cast<size_t>(t.pos0 + j) * p.ff : nullptr;
  }
  float acc[2][kTokens / 16][4];
  mma::tile_product<T, kTokens, false>(sh, a, b, p.ff, acc);
#pragma unroll
  for (int s = 0; s < 2; ++s)
#pragma unroll
    for (int j = 0; j < kTokens / 16; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = r0 + mma::acc_row(s, i), tok = mma::acc_token<kTokens>(j, i);
        if (tok < t.count && r < p.d)
          p.s.out[static_cast<size_t>(p.s.sorted[t.pos0 + tok]) * p.d + r] =
              acc[s][j][i] + expert_bias(p.down_bias, static_cast<int64_t>(t.expert) * p.d + r);
      }
}

// The pipelined forms of the two kernels above (BN tokens per tile).
// grid (ff / 64, tiles): warp w's 16 rows are gate rows r0 + 8w .. r0 + 8w + 7, then
// the same up rows, so a gate value and its up value meet in one thread.
template <DType T, int BN>
__global__ void __launch_bounds__(pipe::kThreads, 2)
    grouped_gate_up_pipe_kernel(const __grid_constant__ GroupedParams p) {
  extern __shared__ __align__(16) uint8_t smem[];
  ExpertTile t;
  if (!find_tile(p, t)) return;
  const int r0 = blockIdx.x * mma::kHalf;
  const size_t first = (static_cast<size_t>(t.expert) * p.ff + r0) * p.gate_row_bytes;
  float acc[BN / 8][4];
  pipe::product<T, BN>(
      smem,
      [&](int r) -> const uint8_t* {
        const int f = 8 * (r / 16) + r % 8;
        if (r0 + f >= p.ff) return nullptr;
        return (r % 16 < 8 ? p.gate : p.up) + first + static_cast<size_t>(f) * p.gate_row_bytes;
      },
      [&](int j) -> const __half* {
        return j < t.count ? static_cast<const __half*>(p.s.xb) +
                                 static_cast<size_t>(p.s.sorted[t.pos0 + j] / p.k) * p.d
                           : nullptr;
      },
      p.gate, p.d, acc);
  const int f = r0 + 8 * (threadIdx.x / 32) + threadIdx.x % 32 / 4;
  const int at = (f & ~3) | ((f & 1) << 1) | ((f >> 1) & 1);  // act is a token row of the down tiles: pairs order
  constexpr float kMax = 65504.0f;
#pragma unroll
  for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // acc[nt][h]: gate, acc[nt][2 + h]: up, of one token
      const int tok = pipe::acc_token(nt, h);
      if (tok < t.count && f < p.ff)
        static_cast<__half*>(p.s.act)[static_cast<size_t>(t.pos0 + tok) * p.ff + at] =
            __float2half_rn(fminf(
                fmaxf(expert_glu(p.glu, static_cast<int64_t>(t.expert) * p.ff + f, acc[nt][h], acc[nt][2 + h]), -kMax),
                kMax));
    }
}

// grid (d / 128, tiles).
template <DType T, int BN>
__global__ void __launch_bounds__(pipe::kThreads, 2) grouped_down_pipe_kernel(const __grid_constant__ GroupedParams p) {
  extern __shared__ __align__(16) uint8_t smem[];
  ExpertTile t;
  if (!find_tile(p, t)) return;
  const int r0 = blockIdx.x * pipe::kRows;
  const uint8_t* first = p.down + (static_cast<size_t>(t.expert) * p.d + r0) * p.down_row_bytes;
  float acc[BN / 8][4];
  pipe::product<T, BN>(
      smem,
      [&](int r) -> const uint8_t* {
        return r0 + r < p.d ? first + static_cast<size_t>(r) * p.down_row_bytes : nullptr;
      },
      [&](int j) -> const __half* {
        return j < t.count ? static_cast<const __half*>(p.s.act) + static_cast<size_t>(t.pos0 + j) * p.ff : nullptr;
      },
      p.down, p.ff, acc);
#pragma unroll
  for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = r0 + pipe::acc_row(i), tok = pipe::acc_token(nt, i);
      if (tok < t.count && r < p.d)
        p.s.out[static_cast<size_t>(p.s.sorted[t.pos0 + tok]) * p.d + r] =
            acc[nt][i] + expert_bias(p.down_bias, static_cast<int64_t>(t.expert) * p.d + r);
    }
}

// Calls f(std::integral_constant<DType, T>{}) when w's rows of k elements go through the
// pipelined tiles; false for the others.
template <class F>
bool dispatch_pipelined(const Tensor& w, int64_t k, F&& f) {
  return pipe::takes(w.type, w.data, w.row_bytes(), k) && pipe::for_type(w.type, f);
}

// y[t] = sum over slots j in order of w[t, j] · out[t · k + j]; a bad id makes the row NaN.
// Then + sigmoid(shared_logit[t]) · shared[t] (the gate 1 without logits), if shared.
__global__ void combine_kernel(const float* out, const int32_t* ids, const float* weights, float* y, int d, int k,
                               int E, int64_t quads, const float* shared, const float* shared_logit) {
  pdl_begin();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= quads) return;
  const int64_t t = 4 * i / d, col = 4 * i % d;
  float4 sum = make_float4(0, 0, 0, 0);
  for (int j = 0; j < k; ++j) {
    const int64_t pair = t * k + j;
    const int e = ids[pair];
    const float w = e >= 0 && e < E ? weights[pair] : __int_as_float(0x7fc00000);
    const float4 v = e >= 0 && e < E ? *reinterpret_cast<const float4*>(out + pair * d + col) : make_float4(1, 1, 1, 1);
    sum.x += w * v.x, sum.y += w * v.y, sum.z += w * v.z, sum.w += w * v.w;
  }
  if (shared) {
    const float g = shared_logit ? sigmoid(shared_logit[t]) : 1.0f;
    const float4 v = reinterpret_cast<const float4*>(shared)[i];
    sum.x += g * v.x, sum.y += g * v.y, sum.z += g * v.z, sum.w += g * v.w;
  }
  reinterpret_cast<float4*>(y)[i] = sum;
}

}  // namespace

size_t moe_grouped_scratch_bytes(int64_t d, int64_t ff, int64_t n, int64_t k, int64_t E) {
  size_t total = 0;
  carve(nullptr, d, ff, n, k, E, &total);
  return total;
}

void moe_ffn_grouped(const Tensor& x, const ExpertWeights& ex, const Tensor& ids, const Tensor& weights,
                     const Tensor& y, void* scratch, const float* shared_out, const float* shared_logit,
                     cudaStream_t s) {
  const Tensor &gate = ex.gate, &up = ex.up, &down = ex.down;
  const int64_t d = x.ne[0], n = x.rows(), k = ids.ne[0], E = gate.ne[2], ff = down.ne[0], pairs = n * k;
  if (gate.type != up.type) throw std::invalid_argument("cuda moe_ffn: gate and up experts of different types");
  if (E > kMaxExperts) throw std::invalid_argument("cuda moe_ffn: more than 1024 experts");
  GroupedParams p{expert_rows(ex),
                  carve(scratch, d, ff, n, k, E, nullptr),
                  static_cast<int>(d),
                  static_cast<int>(ff),
                  static_cast<int>(k)};
  const auto none = [](auto) {};
  const bool few = pairs <= kFewUpToPerExpert * E && moe_few_takes(ex, d);
  const bool piped = !few && dispatch_pipelined(gate, d, none) && dispatch_pipelined(down, ff, none);
  if (few || piped) to_f16_pairs(x.as<const float>(), static_cast<__half*>(p.s.xb), d * n, s);
  else to_bf16(x.as<const float>(), static_cast<__nv_bfloat16*>(p.s.xb), d * n, s);
  // Q6_K tiles take at most 32 tokens (pipe::kMaxTokens).
  const bool narrow = pairs < kNarrowBelowPerExpert * E,
             wide = pairs >= kWideFromPerExpert * E &&
                    std::min(pipe::max_tokens(gate.type), pipe::max_tokens(down.type)) >= kPipeTokensWide;
  int tile = kTokens;  // tokens per tile
  if (few) tile = kFewTileTokens;
  else if (piped) tile = narrow ? kPipeTokensNarrow : wide ? kPipeTokensWide : kPipeTokens;
  group_by_expert_kernel<<<1, kGroupThreads, 0, s>>>(ids.as<const int32_t>(), static_cast<int>(pairs),
                                                     static_cast<int>(E), tile, p.s);
  ZINC_CUDA_LAUNCHED("moe_group_by_expert");
  const int tiles = max_tiles(pairs, E, tile);
  if (few) {
    moe_few_launch(ex, p.d, p.k,
                   {static_cast<const __half*>(p.s.xb), p.s.sorted, p.s.tiles, p.s.tile_count,
                    static_cast<__half*>(p.s.act), p.s.out, tiles},
                   s);
  } else if (piped) {
    auto launch = [&](auto bn) {
      constexpr int BN = decltype(bn)::value;
      dispatch_pipelined(gate, d, [&](auto type) {
        constexpr DType T = decltype(type)::value;
        if constexpr (BN <= pipe::kMaxTokens<T>)
          pipe::launch<T, BN, grouped_gate_up_pipe_kernel<T, BN>>(dim3(ceil_div(ff, mma::kHalf), tiles), s, p);
      });
      ZINC_CUDA_LAUNCHED("moe_grouped_gate_up");
      dispatch_pipelined(down, ff, [&](auto type) {
        constexpr DType T = decltype(type)::value;
        if constexpr (BN <= pipe::kMaxTokens<T>)
          pipe::launch<T, BN, grouped_down_pipe_kernel<T, BN>>(dim3(ceil_div(d, pipe::kRows), tiles), s, p);
      });
      ZINC_CUDA_LAUNCHED("moe_grouped_down");
    };
    if (narrow) launch(std::integral_constant<int, kPipeTokensNarrow>{});
    else if (wide) launch(std::integral_constant<int, kPipeTokensWide>{});
    else launch(std::integral_constant<int, kPipeTokens>{});
  } else {
    dispatch_weight_type(gate.type, [&](auto type) {
      grouped_gate_up_kernel<decltype(type)::value>
          <<<dim3(ceil_div(ff, mma::kHalf), tiles), mma::kThreads, 0, s>>>(p);
    });
    ZINC_CUDA_LAUNCHED("moe_grouped_gate_up");
    dispatch_weight_type(down.type, [&](auto type) {
      grouped_down_kernel<decltype(type)::value><<<dim3(ceil_div(d, mma::kRows), tiles), mma::kThreads, 0, s>>>(p);
    });
    ZINC_CUDA_LAUNCHED("moe_grouped_down");
  }
  launch_pdl(combine_kernel, ceil_div(d * n / 4, 256), 256, s, static_cast<const float*>(p.s.out),
             ids.as<const int32_t>(), weights.as<const float>(), y.as<float>(), p.d, p.k, static_cast<int>(E),
             d * n / 4, shared_out, shared_logit);
  ZINC_CUDA_LAUNCHED("moe_combine");
}

}  // namespace zinc::cuda
