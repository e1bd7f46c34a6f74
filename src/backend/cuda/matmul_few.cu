// y[i] = x · w[i]ᵀ for a few tokens (one sequence or several decoding) on the tensor cores,
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
//
// One token (a lone sequence decoding) reads x in f32 (few::stage_token_f32), and F32
// weights read with the same x (GDN gates, routers) ride along in blocks of their own,
// so a projection stays one launch, as the matvec's was. On an H200 the GDN input
// projection went from 12.1 to 10.7 us a layer, the output projections from 5.1 to
// 4.3, and the step 3.7% faster at d0, 1.8% at d32768 (PERFORMANCE.md, session 38).
// At one token it takes only groups of kFewOneTokenMinRows rows or more
// (matmul_batched_takes): the router's group of 1024 rows (0.6 us slower) stays on the
// matvec, and so does an LM head of Q6_K rows of 2048 (the flagship's: the step 2% slower;
// Qwen3-30B-A3B's Q6_K attn_v of 512 such rows took 7.1 us there, session 63).
// K-quant rows at one token (session 62): Qwen3-8B's Q4_K / Q6_K projections moved 1.0 -
// 1.45 TB/s on the matvec; here it decodes 292 tokens/s instead of 240 on an H200, and
// 309 with its rows of 12288 (48 chunks, more than a team covers) split in three tiles
// whose partial sums split_sum adds. Q6_K rows that are not 16-byte multiples (Gemma 3's:
// 3840 elements are 3150 bytes) are copied row by row from their own boundaries
// (few_tile.cuh); on the matvec's direct path they had held Gemma 3 12B to 133 tokens/s
// on an H200, 181 here (session 64). An odd part of 5-15 chunks per tile takes a ragged
// team, two chunks a warp but one in its last (few::shape_for): Gemma 3 12B's rows of
// 3840 are then one tile of 8 warps, not three tiles of 5 and a split sum (182 -> 218
// tokens/s), and 27B's of 5376 three tiles of 4 warps, not of 7 with half the bytes in
// flight (98.8 -> 111 tokens/s; session 65). One-token Q4_K and Q5_K slices, and Q6_K ones
// of rows that are not 16-byte multiples, are taken on DP4A against x as int8 terms
// (few_int8.cuh; Gemma 3 27B 113 -> 129 tokens/s, Llama-3.1-8B 373 -> 415, session 66;
// Llama-3.1-8B in Q5_K 362 -> 434, session 67).
#include <cuda.h>  // CUtensorMap; the driver's encoder is reached through the runtime
#include <cudaTypedefs.h>

#include <algorithm>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "backend/cuda/few_int8.cuh"
#include "backend/cuda/few_tile.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/matvec.cuh"

namespace zinc::cuda {
namespace {

using few::kTileRows;
using few::kTileTokens;
using few::kWarps;
constexpr int kMaxWeights = 8;
constexpr int kF32Rows = 4;  // F32 rows a block (its warps split each row's groups)

struct FewWeight {
  const uint8_t* w;  // {in, out}
  size_t row_bytes;
  float* y;     // {out, n}
  float* part;  // {out, n, splits} when splits > 1
  int out;
  int tile0;  // this weight's first tile in the launch: (16 rows, split) pairs, split fastest
};
struct FewF32 {
  const float* w;  // {in, out}
  float* y;        // {out}
  int out;
  int block0;  // this weight's first block in the launch
};
struct FewParams {
  FewWeight w[kMaxWeights];
  FewF32 f32[kFewMaxF32Weights];
  int count, f32_count, in, n;
  int team;          // warps per tile: part / C, rounded up
  int splits;        // tiles per 16 rows, each a part of the row (few::shape_for)
  int tiles;         // of all weights
  int f32_blocks;    // blocks [0, f32_blocks) take the F32 weights' rows (one token)
  const __half* xb;  // x as the pipelined tiles' f16 token rows (to_f16_pairs), or null for one token:
  const float* x;    // x {in, n} in f32
  int part;          // chunks a tile: team · C, one less for a ragged team (last: the fields above keep their offsets)
};

// The one-token Q4_K (DP4A) kernels' parameters: each weight's rows also as a 2-D
// tensor of 4-byte words, so that one bulk tensor copy (lane 0's) stages a tile's 16
// rows of a warp's slice. Copied row by row, a lane a row, the copies are issued one at
// a time: 160 of a Q4_K warp's 1045 instructions on an H200 (PERFORMANCE.md, session
// 66). The same copy for the mma kernels' Q8_0 rows made the flagship 0.9% slower.
struct FewMapParams : FewParams {
  CUtensorMap map[kMaxWeights];  // box: the slice's bytes x 16 rows (WarpSmem::kStride)
};

// kF32Rows rows of an F32 weight for one token: warp w of W takes the groups w, w + W,
// .. of 256 elements of each row, its first group's weights loaded before the wait
// (they do not depend on the previous kernel); the warps' sums are added in warp order.
__device__ __forceinline__ void f32_rows(const FewParams& p) {
  __shared__ float part[kWarps][kF32Rows];
  int wi = 0;
  while (wi + 1 < p.f32_count && p.f32[wi + 1].block0 <= static_cast<int>(blockIdx.x)) ++wi;
  const FewF32& f = p.f32[wi];
  const int r0 = (static_cast<int>(blockIdx.x) - f.block0) * kF32Rows;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, groups = p.in / few::kChunk;
  const int warps = blockDim.x / 32;
  float w[kF32Rows][8];
  const auto load = [&](int g) {
#pragma unroll
    for (int r = 0; r < kF32Rows; ++r) {
      if (r0 + r < f.out) {
        load_floats8(f.w + static_cast<size_t>(r0 + r) * p.in + g * few::kChunk + lane * 8, w[r]);
      } else {
#pragma unroll
        for (int i = 0; i < 8; ++i) w[r][i] = 0.0f;
      }
    }
  };
  if (warp < groups) load(warp);
  pdl_begin();
  float acc[kF32Rows] = {};
  for (int g = warp; g < groups; g += warps) {
    if (g != warp) load(g);
    float x[8];
    load_floats8(p.x + g * few::kChunk + lane * 8, x);
#pragma unroll
    for (int r = 0; r < kF32Rows; ++r)
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[r] += w[r][i] * x[i];
  }
#pragma unroll
  for (int r = 0; r < kF32Rows; ++r) {
    const float v = warp_sum(acc[r]);
    if (lane == 0) part[warp][r] = v;
  }
  __syncthreads();
  const int r = threadIdx.x;
  if (r < kF32Rows && r0 + r < f.out) {
    float v = 0;
#pragma unroll
    for (int i = 0; i < warps; ++i) v += part[i][r];
    f.y[r0 + r] = v;
  }
}

// A warp's shared memory: its rows' slot, then (one token) the token it stages. kInt8:
// a one-token Q4_K, Q5_K or Q6_K slice taken on DP4A (few_int8.cuh), in its own row stride;
// Q4_K's and Q5_K's tiles arrive by one bulk tensor copy each (kBox).
template <DType T, int C, bool kOneToken, bool kInt8 = false>
struct WarpSmem {
  static_assert(!kInt8 || (kOneToken && few::kInt8Lanes<T>));
  static constexpr bool kBox = kInt8 && T != DType::Q6_K;
  static constexpr int kStride = kInt8 ? few::int8_stride<T>(C) : few::row_stride<T>(C);
  static constexpr int kSlot = few::kTileRows * kStride;
  using Token = few::Int8Token<C, T == DType::Q6_K>;
  static constexpr int kToken = !kOneToken ? 0 : kInt8 ? Token::kBytes : few::StagedToken<C>::kBytes;
};

// The kernel's dynamic shared memory, 128-byte aligned where a bulk tensor copy writes
// it (two names: one extern array cannot take two alignments).
template <bool kTensorCopies>
__device__ __forceinline__ uint8_t* dynamic_smem() {
  if constexpr (kTensorCopies) {
    extern __shared__ __align__(128) uint8_t smem128[];
    return smem128;
  } else {
    extern __shared__ __align__(16) uint8_t smem16[];
    return smem16;
  }
}

template <DType T, int C, bool kOneToken, bool kInt8>
using FewParamsOf = std::conditional_t<WarpSmem<T, C, kOneToken, kInt8>::kBox, FewMapParams, FewParams>;

// Lane 0 copies the box at (x words, row y) of `map` into slot, counted on bar. Rows
// past the tensor's end arrive as zeros and count too. Hopper only.
__device__ __forceinline__ void copy_box(uint8_t* slot, uint64_t* bar, const CUtensorMap* map, int x, int y,
                                        uint32_t bytes) {
#if __CUDA_ARCH__ < 900
  (void)slot, (void)bar, (void)map, (void)x, (void)y, (void)bytes;
  __trap();
#else
  if (threadIdx.x % 32 != 0) return;
  mbarrier_expect(bar, bytes);
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::
          "r"(smem_address(slot)),
      "l"(map), "r"(x), "r"(y), "r"(smem_address(bar))
      : "memory");
#endif
}

// grid: ceil(tiles / (kWarps / team)) blocks of that many whole teams (launch_few); C
// chunks a warp, NT n-tiles of 8 tokens. kOneToken: x is one token's f32 row, and the
// first f32_blocks blocks take the F32 weights (a kernel of its own, so that the
// several-token ones stay as they were). kRagged: a team's last warp takes one chunk
// (one token, C = 2), in kernels of their own: a chunk count known only at run time
// made Llama-3.1-8B's step 2.2% slower on an H200. Three blocks an SM for the ragged
// and the one-token Q6_K kernels: the ragged Q6_K one 91 -> 80 registers (Gemma 3 12B
// 218.5 -> 221.2 tokens/s), the two-chunk Q6_K one 124 -> 80 with 4 bytes spilled
// (Gemma 3 27B +2.5%, Llama-3.1-8B +1.3%; session 65).
// The one-token Q4_K (DP4A) kernels at four: 64 registers, as many blocks as their shared memory allows.
template <DType T, int C, int NT, bool kOneToken, bool kRagged, bool kInt8>
constexpr int kMinBlocks = WarpSmem<T, C, kOneToken, kInt8>::kBox                                          ? 4
                           : (C == 1 && NT == 1) || kRagged || (kOneToken && T == DType::Q6_K) ? 3
                                                                                               : 2;
template <DType T, int C, int NT, bool kOneToken, bool kRagged = false, bool kInt8 = false>
__global__ void __launch_bounds__(few::kThreads, kMinBlocks<T, C, NT, kOneToken, kRagged, kInt8>)
    matmul_few_kernel(const __grid_constant__ FewParamsOf<T, C, kOneToken, kInt8> p) {
  static_assert(!kOneToken || NT == 1);
  static_assert(!kRagged || (kOneToken && C == 2));
  if constexpr (kOneToken) {
    if (static_cast<int>(blockIdx.x) < p.f32_blocks) return f32_rows(p);
  }
  using Smem = WarpSmem<T, C, kOneToken, kInt8>;
  uint8_t* smem = dynamic_smem<Smem::kBox>();
  __shared__ uint64_t bars[kWarps];
  __shared__ few::Partials<NT> partial;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int team = warp / p.team, member = warp % p.team;
  const int block = static_cast<int>(blockIdx.x) - (kOneToken ? p.f32_blocks : 0);
  const int tile = block * (kWarps / p.team) + team;
  const bool active = tile < p.tiles;  // blocks hold whole teams (launch_few)
  int wi = 0;
  while (wi + 1 < p.count && p.w[wi + 1].tile0 <= tile) ++wi;
  const FewWeight& w = p.w[wi];
  const int split = (tile - w.tile0) % p.splits;
  const int first = kRagged ? split * p.part + member * C : (split * p.team + member) * C;  // this warp's first chunk
  // The slice's offset as a 64-bit product where not ragged, as before: those kernels' code stays the same.
  const size_t first_at = kRagged ? first : static_cast<size_t>(split * p.team + member) * C;
  const int row0 = (tile - w.tile0) / p.splits * kTileRows, rows = min(kTileRows, w.out - row0);
  const few::Slice<T, C> slice(first_at, kRagged && member == p.team - 1 ? C - 1 : C, w.row_bytes % 16 == 0);
  const auto row = [&](int r) { return w.w + static_cast<size_t>(row0 + r) * w.row_bytes; };
  uint8_t* slot = smem + warp * Smem::kSlot;
  if (active) {  // weights first: they do not depend on the previous kernel
    few::init_bar(&bars[warp]);
    if constexpr (Smem::kBox) {  // a ragged team's last warp takes one chunk, less than the box
      if (kRagged && member == p.team - 1) few::copy_rows<T, C, Smem::kStride>(slot, &bars[warp], rows, slice, row);
      else copy_box(slot, &bars[warp], &p.map[wi], static_cast<int>(slice.at / 4), row0, kTileRows * Smem::kStride);
    } else {
      few::copy_rows<T, C, Smem::kStride>(slot, &bars[warp], rows, slice, row);
    }
  }
  pdl_begin();
  if (!active) return;
  const int k0 = first * few::kChunk;
  const auto tokens = [&](int nt) {  // this lane's token row of n-tile nt, or null
    const int tok = kTileTokens * nt + lane / 4;
    return tok < p.n ? p.xb + static_cast<size_t>(tok) * p.in + k0 : nullptr;
  };
  float acc[NT][4] = {};
  const few::LaneShifts shift = slice.lane_shifts(row);
  if constexpr (kInt8) {  // the token's int8 terms in shared memory, after the rows' slots
    uint8_t* words = smem + blockDim.x / 32 * Smem::kSlot + warp * Smem::kToken;
    const auto x = few::stage_token_int8<C, T == DType::Q6_K>(words, p.x + k0, slice.count);
    const int row_shift = Smem::kBox ? 0 : slice.shift(row(lane / 2));  // lane 2r + h's row r
    few::wait_rows(&bars[warp]);
    few::product_int8<T, C>(slot, x, acc, slice.count, row_shift);
  } else if constexpr (kOneToken) {  // the token's fragments in shared memory, after the rows' slots
    auto* words = reinterpret_cast<uint4*>(smem + blockDim.x / 32 * Smem::kSlot + warp * Smem::kToken);
    const auto b = few::stage_token_f32<C>(words, p.x + k0, slice.count);
    few::wait_rows(&bars[warp]);
    few::product_of<T, C, 1>(slot, shift, b, acc, slice.count);
  } else if constexpr (C == 1) {  // every n-tile's tokens in registers: each A fragment decoded once
    uint4 b[NT][C][4][2];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) few::load_tokens<C>(b[nt], tokens(nt));
    few::wait_rows(&bars[warp]);
    few::product<T, C, NT>(slot, shift, b, acc);
  } else {  // one n-tile at a time, the staged rows decoded again for the next
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      uint4 b[1][C][4][2];
      few::load_tokens<C>(b[0], tokens(nt));
      if (nt == 0) few::wait_rows(&bars[warp]);
      float part[1][4] = {};
      few::product<T, C, 1>(slot, shift, b, part);
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[nt][e] = part[0][e];
    }
  }
  if (!few::team_sum<NT>(acc, partial, p.team)) return;
  const int g = lane / 4, t = lane % 4;
  float* y = p.splits == 1 ? w.y : w.part + static_cast<int64_t>(split) * p.n * w.out;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = g + 8 * (i / 2), tok = kTileTokens * nt + 2 * t + i % 2;
      if (r < rows && tok < p.n) y[static_cast<int64_t>(tok) * w.out + row0 + r] = acc[nt][i];
    }
}

// w's rows as {row_bytes / 4, out} words, a box of box_bytes x kTileRows (rows 16-byte
// multiples on a 16-byte boundary: few::rows_fit and whole K-quant chunks).
CUtensorMap rows_map(const FewWeight& w, int box_bytes) {
  static const auto encode = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
    const cudaError_t e =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &found);
#else  // the older call (deprecated since)
    const cudaError_t e = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &f, cudaEnableDefault, &found);
#endif
    if (e != cudaSuccess || found != cudaDriverEntryPointSuccess)
      throw std::runtime_error("cuda: the driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  CUtensorMap map;
  const cuuint64_t dims[2] = {w.row_bytes / 4, static_cast<cuuint64_t>(w.out)}, strides[1] = {w.row_bytes};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_bytes / 4), few::kTileRows}, step[2] = {1, 1};
  const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT32, 2, const_cast<uint8_t*>(w.w), dims, strides, box,
                            step, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) throw std::runtime_error("cuda: cuTensorMapEncodeTiled failed (" + std::to_string(r) + ")");
  return map;
}

// A block holds whole teams only: a team of 5 runs in 5 warps, not in 8 with 3 idle
// whose registers and shared memory would keep other blocks' teams off the SM.
template <DType T, int C, int NT, bool kOneToken = false, bool kRagged = false, bool kInt8 = false>
void launch_few(const FewParams& p, cudaStream_t s) {
  using Smem = WarpSmem<T, C, kOneToken, kInt8>;
  constexpr size_t kWarpSmem = Smem::kSlot + Smem::kToken;
  constexpr auto kernel = matmul_few_kernel<T, C, NT, kOneToken, kRagged, kInt8>;
  allow_smem<kernel>(kWarps * kWarpSmem);
  const int teams = kWarps / p.team, warps = teams * p.team;
  const dim3 grid(p.f32_blocks + ceil_div(p.tiles, teams));
  if constexpr (Smem::kBox) {
    FewMapParams mp{p, {}};
    for (int i = 0; i < p.count; ++i) mp.map[i] = rows_map(p.w[i], Smem::kStride);
    launch_pdl_smem(kernel, grid, dim3(32 * warps), warps * kWarpSmem, s, mp);
  } else {
    launch_pdl_smem(kernel, grid, dim3(32 * warps), warps * kWarpSmem, s, p);
  }
}

// One token: Q4_K and Q5_K on DP4A; Q6_K on DP4A where the launch's rows are not 16-byte
// multiples (Gemma 3's), since each lane reads its row's words at the row's own shift
// and rows of one shift put those loads four lanes to a bank: on an H200 Llama-3.1-8B's
// (16-byte) Q6_K rows made its step 3.3% slower on DP4A, while Gemma 3 27B gained 1.9%
// and 12B 1.3% (PERFORMANCE.md, session 66).
template <DType T>
void launch_one_token(const FewParams& p, const few::Shape& shape, cudaStream_t s) {
  const auto launch = [&]<bool kInt8>() {
    if (shape.ragged) return launch_few<T, 2, 1, true, true, kInt8>(p, s);
    if (shape.chunks_per_warp == 1) return launch_few<T, 1, 1, true, false, kInt8>(p, s);
    launch_few<T, 2, 1, true, false, kInt8>(p, s);
  };
  if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
    launch.template operator()<true>();
  } else if constexpr (T == DType::Q6_K) {
    const bool shifted = p.w[0].row_bytes % 16 != 0;  // every weight of a launch has rows of p.in elements
    shifted ? launch.template operator()<true>() : launch.template operator()<false>();
  } else {
    launch.template operator()<false>();
  }
}

}  // namespace

bool matmul_few_takes(const Tensor& w, int64_t n) {
  // An LM head of Q6_K rows of 2048 at one token: the matvec's int8 form (the flagship's).
  if (n == 1 && w.type == DType::Q6_K && w.ne[0] == 2048 && w.rows() >= kLmHeadMinRows) return false;
  return n >= kFewMinTokens && n <= kFewMaxTokens && few::rows_fit(w) && few::shape_for(w.ne[0], n == 1).team > 0 &&
         hopper_or_later();
}

int matmul_few_splits(int64_t in, int64_t n) { return few::shape_for(in, n == 1).splits; }

void matmul_few(std::span<const Tensor> w, std::span<const Tensor> f32, const float* x, const __half* xb, int64_t in,
                int64_t n, std::span<const Tensor> y, std::span<float* const> parts, std::span<const Tensor> f32_y,
                cudaStream_t s) {
  const few::Shape shape = few::shape_for(in, n == 1);
  // One launch per weight type, up to kMaxWeights weights each, in the order given;
  // the F32 weights (one token) in the first.
  std::vector<bool> done(w.size(), false);
  bool first_launch = true;
  for (size_t first = 0; first < w.size(); ++first) {
    if (done[first]) continue;
    FewParams p{};
    p.in = static_cast<int>(in), p.n = static_cast<int>(n), p.team = shape.team, p.splits = shape.splits;
    p.part = shape.part();
    p.x = x, p.xb = xb;
    for (size_t i = first; i < w.size() && p.count < kMaxWeights; ++i) {
      if (done[i] || w[i].type != w[first].type) continue;
      const int out = static_cast<int>(w[i].rows());
      p.w[p.count++] = {static_cast<const uint8_t*>(w[i].data), w[i].row_bytes(), y[i].as<float>(), parts[i], out,
                        p.tiles};
      p.tiles += ceil_div(out, kTileRows) * shape.splits;
      done[i] = true;
    }
    for (size_t i = 0; first_launch && i < f32.size(); ++i) {
      const int out = static_cast<int>(f32[i].rows());
      p.f32[p.f32_count++] = {f32[i].as<const float>(), f32_y[i].as<float>(), out, p.f32_blocks};
      p.f32_blocks += ceil_div(out, kF32Rows);
    }
    first_launch = false;
    dispatch_weight_type(w[first].type, [&](auto type) {
      constexpr DType T = decltype(type)::value;
      if constexpr (few::kType<T>) {
        if (n == 1) return launch_one_token<T>(p, shape, s);
        const bool two = n > kTileTokens;
        if (shape.chunks_per_warp == 1) two ? launch_few<T, 1, 2>(p, s) : launch_few<T, 1, 1>(p, s);
        else two ? launch_few<T, 2, 2>(p, s) : launch_few<T, 2, 1>(p, s);
      }
    });
    ZINC_CUDA_LAUNCHED("matmul_few");
  }
}

}  // namespace zinc::cuda
