// One warp's share of a few-token product on the tensor cores (matmul_few.cu,
// moe_few.cu): 16 weight rows (an mma.sync m16n8k16's rows) x C chunks of 256
// elements, bulk-copied with one copy per row into the warp's own shared memory,
// against up to 8 tokens an n-tile whose f16 fragments, in to_f16_pairs' order, sit in
// registers. The A fragments are decoded from the staged bytes as the pipelined tiles
// do (pipe::Frag: the same k order and f16 pairs). A team of warps may split a row's
// chunks and add its partial sums in member order, so results do not depend on timing.
#pragma once

#include "backend/cuda/kernels.h"
#include "backend/cuda/mma_pipe.cuh"
#include "backend/cuda/warp_stream.cuh"

namespace zinc::cuda::few {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kTileRows = 16;   // the mma's rows
constexpr int kTileTokens = 8;  // its columns
constexpr int kChunk = 256;     // k elements: a K-quant super-block, eight Q8_0 blocks

template <DType T>
constexpr bool kType = T == DType::Q8_0 || T == DType::Q4_K || T == DType::Q5_K || T == DType::Q6_K;

template <DType T>
constexpr int chunk_bytes() {
  return kChunk / Dequant<T>::kBlockElems * Dequant<T>::kBlockBytes;
}
// Q6_K's 210-byte chunks do not start on 16-byte boundaries: a row's chunks are copied
// from the boundary below them and read at their offset, each row at its own (Gemma 3's
// rows of 3840 are 3150 bytes, so the 16 rows of a tile start at different offsets).
template <DType T>
constexpr bool kShifted = chunk_bytes<T>() % 16 != 0;
// Staged bytes per row for C chunks, padded as the pipelined tiles' rows are.
template <DType T>
constexpr int row_stride(int C) {
  return pipe::a_stride(C * chunk_bytes<T>() + (kShifted<T> ? 16 : 0));
}
// A warp's slot: its 16 rows.
template <DType T, int C>
constexpr int warp_bytes() {
  return kTileRows * row_stride<T>(C);
}

// Chunks per warp (C) and warps per tile (the team) for rows of `in` elements; 0
// chunks: none fit. One chunk a warp while a team of kWarps covers the row, else two.
// With `split` (one token), a row too long for a team is cut into `splits` equal parts
// of whole chunks, each a tile of its own whose partial sums are added after the launch
// (matmul_batched's split_sum): Qwen3-8B's down projection (rows of 12288) in 3; and an
// odd part of 5-15 chunks takes a ragged team, two chunks a warp but one in its last
// (Gemma 3 12B's rows of 3840, 15 chunks: eight warps and no split, not three tiles of
// five; 27B's of 5376: three tiles of four warps, not of seven with one chunk each).
constexpr int kMaxSplits = 8;
struct Shape {
  int chunks_per_warp = 0, team = 0, splits = 1;
  bool ragged = false;  // the team's last warp takes one chunk
  int part() const { return team * chunks_per_warp - (ragged ? 1 : 0); }  // chunks a tile
};
inline Shape shape_for(int64_t in, bool split = false) {
  if (in % kChunk != 0) return {};
  const int chunks = static_cast<int>(in / kChunk);
  for (int s = 1; s <= (split ? kMaxSplits : 1); ++s) {
    if (chunks % s != 0) continue;
    const int part = chunks / s;
    if (split && part % 2 == 1 && part >= 5 && part < 2 * kWarps) return {2, (part + 1) / 2, s, true};
    if (part <= kWarps) return {1, part, s};
    if (part <= 2 * kWarps && part % 2 == 0) return {2, part / 2, s};
  }
  return {};
}

// A fragments of a staged chunk: pipe::Frag's, whose types carry a scale per 32
// elements, and Q6_K's, whose scales are per 16 (lane_scale takes the lane's elements).
// kShared: the scale is a block's, not a lane's, and costly to decode (Q4_K / Q5_K), so
// the four lanes of a row group, which need the same words, each decode a quarter of
// them and take the rest by shuffles (product). The pipelined tiles' swap (a word a lane
// at each k-step, pipe::Tile::compute) took 756 instructions a Q4_K slice here, this 666.
template <DType T>
struct Frag : pipe::Frag<T> {
  static constexpr bool kShared = T == DType::Q4_K || T == DType::Q5_K;
  __device__ static uint32_t lane_scale(const uint8_t* chunk, int s, int) { return pipe::Frag<T>::scale(chunk, s); }
};

// Q6_K (pipe::q6k_frag has the layout): the scale is the lane's own 16 elements'.
template <>
struct Frag<DType::Q6_K> {
  static constexpr bool kShared = false;
  // d · sc of the lane's 16 elements, rounded once to f16, in both halves.
  __device__ static uint32_t lane_scale(const uint8_t* chunk, int s, int l) {
    const float d = __half2float(__ushort_as_half(*reinterpret_cast<const uint16_t*>(chunk + 208)));
    const float v = d * static_cast<float>(static_cast<int8_t>(chunk[192 + 2 * s + l / 16]));
    return pipe::as_u32(__float2half2_rn(v));
  }
  // Elements e = 32s + l .. e + 7 as the f16 pairs (e, e+2), (e+1, e+3), (e+4, e+6), (e+5, e+7).
  __device__ static void load(const uint8_t* chunk, int s, int l, uint32_t scale, uint32_t (&out)[4]) {
    pipe::q6k_frag(chunk, s, l, [&] { return pipe::as_half2(scale); }, out);
  }
};

// Whether w's rows suit these warps: a type they decode, data on a 16-byte boundary
// (bulk copies). Rows of whole chunks are 16-byte multiples but for kShifted types'. The
// row length is each caller's to check.
inline bool rows_fit(const Tensor& w) {
  bool type = false;
  dispatch_weight_type(w.type, [&](auto t) { type = kType<decltype(t)::value>; });
  return type && reinterpret_cast<uintptr_t>(w.data) % 16 == 0;
}

// The shifts of this lane's rows lane / 4 and lane / 4 + 8 (product_of's).
struct LaneShifts {
  int row[2];
};

// A warp's slice of a row: `count` (at most C) chunks from chunk `first`, and (kShifted)
// how far below that a row's staged copy starts: the same for every row when rows are
// 16-byte multiples (`uniform`), else each row's own.
template <DType T, int C>
struct Slice {
  size_t at;
  int count;
  bool uniform;
  __device__ Slice(size_t first, int count, bool uniform)
      : at(first * chunk_bytes<T>()), count(count), uniform(uniform) {}
  // row: the row's first byte.
  __device__ int shift(const uint8_t* row) const {
    if constexpr (!kShifted<T>) return 0;
    return static_cast<int>(((uniform ? 0 : reinterpret_cast<uintptr_t>(row)) + at) % 16);
  }
  __device__ uint32_t bytes(int shift) const { return (shift + count * chunk_bytes<T>() + 15) / 16 * 16; }
  // row(r): the first byte of the tile's row r.
  template <class Row>
  __device__ LaneShifts lane_shifts(Row row) const {
    const int g = threadIdx.x % 32 / 4;
    if (uniform) return {{shift(nullptr), shift(nullptr)}};
    return {{shift(row(g)), shift(row(g + 8))}};
  }
};

// Lane 0 readies the warp's mbarrier (before its first copy_rows).
__device__ __forceinline__ void init_bar(uint64_t* bar) {
#if __CUDA_ARCH__ >= 900
  if (threadIdx.x % 32 == 0) mbarrier_init(bar);
  __syncwarp();
#else
  (void)bar;
#endif
}

// Lane r < rows copies its row's slice from row(r) (the row's first byte) into the
// warp's slot, counted on the warp's mbarrier. Whatever the warp read of the slot
// before is done with. Hopper only (bulk copies).
// kStride: the slot's bytes per row (few_int8.cuh's lanes take another).
template <DType T, int C, int kStride = row_stride<T>(C), class Row>
__device__ __forceinline__ void copy_rows(uint8_t* slot, uint64_t* bar, int rows, const Slice<T, C>& sl, Row row) {
#if __CUDA_ARCH__ < 900
  (void)slot, (void)bar, (void)rows, (void)sl, (void)row;
  __trap();  // the host sends older GPUs elsewhere
#else
  const int lane = threadIdx.x % 32;
  const int shift = lane < rows ? sl.shift(row(lane)) : 0;
  const uint32_t bytes = lane < rows ? sl.bytes(shift) : 0;
  __syncwarp();
  if (kShifted<T> && !sl.uniform) {
    const uint32_t total = __reduce_add_sync(0xffffffffu, bytes);
    if (lane == 0) mbarrier_expect(bar, total);
  } else {
    if (lane == 0) mbarrier_expect(bar, sl.bytes(sl.shift(nullptr)) * rows);  // every row's shift the same
  }
  if (lane < rows) {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the warp's reads before the copy's writes
    bulk_copy(slot + lane * kStride, row(lane) + sl.at - shift, bytes, bar);
  }
#endif
}
// Waits for the copies of the mbarrier's phase `parity` (its uses 0, 2, 4 .. are 0).
__device__ __forceinline__ void wait_rows(uint64_t* bar, uint32_t parity = 0) {
#if __CUDA_ARCH__ >= 900
  mbarrier_wait(bar, parity);
#else
  (void)bar, (void)parity;
#endif
}

// This lane's token fragments (token lane / 4 of the n-tile) of C chunks from `tok`:
// that token's f16 pairs at the slice's first element, or null for zeros. Elements
// 64j + 8t .. and 64j + 32 + 8t .. of each chunk, t = lane % 4.
template <int C>
__device__ __forceinline__ void load_tokens(uint4 (&b)[C][4][2], const __half* tok) {
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int c = 0; c < C; ++c)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        b[c][j][h] = tok ? __ldg(reinterpret_cast<const uint4*>(tok + kChunk * c + 64 * j + 32 * h + 8 * t))
                         : make_uint4(0, 0, 0, 0);
}

// One token's fragments in the warp's shared memory (stage_token_f32): [C][4][2] uint4
// of token lanes 0-3. The lanes of the n-tile's other (absent) tokens read the same
// words: the mma's columns are independent, and those columns are never written.
template <int C>
struct StagedToken {
  static constexpr int kBytes = C * 4 * 2 * 4 * 16;  // per warp
  const uint4* words;
  __device__ uint4 operator()(int, int c, int j, int h) const {
    return words[((c * 4 + j) * 2 + h) * 4 + threadIdx.x % 4];
  }
};

// load_tokens for one token from its f32 row (no to_f16_pairs launch before a lone
// token's product), into shared memory: lane L loads elements 8L .. 8L + 7 of each chunk,
// packs them as to_f16_pairs does (the fragment 64j + 32h + 8t .. of token lane t for
// L = 8j + 4h + t) and stores them where that lane reads them. Held in registers (C = 2:
// 64 a lane, gathered by shuffles) they kept the one-token Q4_K kernel at 106 registers
// and two blocks an SM; staged, 63 and four (PERFORMANCE.md, session 63: Qwen3-8B +10.5%).
template <int C>
__device__ __forceinline__ StagedToken<C> stage_token_f32(uint4* words, const float* tok, int count) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int c = 0; c < C; ++c) {
    if (c > 0 && c >= count) break;  // past the row: a ragged team's last warp
    const auto* at = reinterpret_cast<const float4*>(tok + kChunk * c + 8 * lane);
    const float4 lo = __ldg(at), hi = __ldg(at + 1);
    words[c * 32 + lane] = make_uint4(pack_f16_clamped(lo.x, lo.z), pack_f16_clamped(lo.y, lo.w),
                                      pack_f16_clamped(hi.x, hi.z), pack_f16_clamped(hi.y, hi.w));
  }
  __syncwarp();
  return {words};
}

// acc[i] += the warp's 16 staged rows · n-tile i's tokens (b(i, c, j, h): load_tokens'
// b[c][j][h] of n-tile i), each A fragment decoded once for all NB n-tiles. acc[i][e]:
// row lane / 4 + 8 (e / 2), token 2 (lane % 4) + e % 2 of the n-tile. Rows past a
// weight's end hold stale bytes; only their own outputs see them.
// count: the slice's chunks (C but in a ragged team's last warp).
template <DType T, int C, int NB, class Tokens>
__device__ __forceinline__ void product_of(const uint8_t* slot, LaneShifts shift, const Tokens& b, float (&acc)[NB][4],
                                           int count = C) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  constexpr int kStride = row_stride<T>(C), kBytes = chunk_bytes<T>();
  const uint8_t* row[2] = {slot + g * kStride + shift.row[0], slot + (g + 8) * kStride + shift.row[1]};
  // kShared: this lane's quarter of its rows' scale words, block q = 8c + s for q % 4 == t.
  uint32_t own[2][2 * C];
  if constexpr (Frag<T>::kShared) {
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int i = 0; i < 2 * C; ++i) {
        const int q = 4 * i + t;
        own[r][i] = Frag<T>::lane_scale(row[r] + q / 8 * kBytes, q % 8, 0);
      }
  }
#pragma unroll
  for (int c = 0; c < C; ++c) {
    if (c > 0 && c >= count) break;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint32_t sc[4];
      if constexpr (Frag<T>::kShared) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int q = 8 * c + 2 * j + i % 2;
          sc[i] = __shfl_sync(0xffffffffu, own[i / 2][q / 4], (lane & ~3) | q % 4);
        }
      }
      uint32_t v[2][2][4];  // [row][run]: words (e, e+2), (e+1, e+3), (e+4, e+6), (e+5, e+7)
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int run = 0; run < 2; ++run) {
          const uint8_t* chunk = row[r] + c * kBytes;
          const uint32_t scale = Frag<T>::kShared ? sc[2 * r + run] : Frag<T>::lane_scale(chunk, 2 * j + run, 8 * t);
          Frag<T>::load(chunk, 2 * j + run, 8 * t, scale, v[r][run]);
        }
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const int run = m / 2, o = 2 * (m % 2);
        const uint32_t a[4] = {v[0][run][o], v[1][run][o], v[0][run][o + 1], v[1][run][o + 1]};
#pragma unroll
        for (int i = 0; i < NB; ++i) {
          const uint4 bb = b(i, c, j, run);
          pipe::mma_f16(acc[i], a, m % 2 ? bb.z : bb.x, m % 2 ? bb.w : bb.y);
        }
      }
    }
  }
}

template <DType T, int C, int NB>
__device__ __forceinline__ void product(const uint8_t* slot, LaneShifts shift, const uint4 (&b)[NB][C][4][2],
                                        float (&acc)[NB][4]) {
  product_of<T, C, NB>(slot, shift, [&](int i, int c, int j, int h) { return b[i][c][j][h]; }, acc);
}

// The partial sums a team's members hand to member 0: kWarps warps x NT n-tiles.
template <int NT>
using Partials = float4[NT][kWarps][32];

// Adds the team's NT n-tiles of sums into member 0's acc, in member order; true in
// member 0 (the others are done). Named barrier 1 + team.
template <int NT>
__device__ __forceinline__ bool team_sum(float (&acc)[NT][4], Partials<NT>& partial, int team_size) {
  if (team_size == 1) return true;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int team = warp / team_size, member = warp % team_size;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) partial[nt][warp][lane] = make_float4(acc[nt][0], acc[nt][1], acc[nt][2], acc[nt][3]);
  asm volatile("bar.sync %0, %1;" ::"r"(1 + team), "r"(32 * team_size) : "memory");
  if (member != 0) return false;
  for (int m = 1; m < team_size; ++m)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const float4 o = partial[nt][warp + m][lane];
      acc[nt][0] += o.x, acc[nt][1] += o.y, acc[nt][2] += o.z, acc[nt][3] += o.w;
    }
  return true;
}

}  // namespace zinc::cuda::few
