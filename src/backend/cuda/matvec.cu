// matvec (y = x·wᵀ for at most kMatvecMaxTokens tokens), several weights over the
// same x in one launch (matvec_many), and embed (rows of a table dequantized), all
// instantiated for every weight type.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "backend/cuda/kernels.h"
#include "backend/cuda/matvec.cuh"
#include "backend/cuda/warp_stream.cuh"

namespace zinc::cuda {
namespace {

// Weights whose rows are 16-byte aligned (nearly all) are streamed: the staged
// blocks' warps form teams of `team` warps, a team owns whole rows of the launch's
// staged rows, and each warp of a team pulls its share of those rows through its
// own ring of kStages shared-memory slots with bulk copies (warp_stream.cuh),
// kStages - 1 slots in flight while it computes on one. A slot holds a chunk of
// kStageGroups 256-element groups of a row.
//
// A team has a warp per chunk of the row, so each warp's activations of its chunk
// (token 0's) stay in its lanes' registers for all its rows, and the team adds its
// partial dot products in a fixed order; team t owns a run of consecutive rows (+1% a
// decode step against rows t, t + T, ... for T teams; PERFORMANCE.md, session 18).
// Further tokens' activations are read from L1 once per group for a pair of rows
// (session 22). Rows of more than kWarps chunks: a warp walks every chunk of its rows
// t, t + T, ... and reads every token's activations from L1 for every row.
//
// The grid holds as many staged blocks as fit on the GPU at once, so a launch is
// one wave that keeps loading until its last rows. The first copies are issued
// before the kernel waits for the previous one (weights never depend on it),
// overlapping that kernel's tail. Other rows (F32, odd sizes) are read directly by
// blocks of their own, which come first in the grid; small launches of those
// split each row's groups between the block's warps.
constexpr int kWarps = 8;
constexpr int kStageGroups = 8;  // staged: 256-element groups per slot
constexpr int kStages = 4;
constexpr int kMinBlocksPerSM = 2;  // __launch_bounds__: up to 128 registers
constexpr int kRowsPerWarp = 2;     // direct rows sharing each activation load
constexpr int kDirectGroups = 2;    // direct rows: groups per pass and row
constexpr int kSplitMaxRows = 4096;
constexpr int kMaxJobs = 4;

constexpr int kStageBarrierVecs = kWarps * kStages * 8 / 16;  // the warps' mbarriers, in uint4

template <DType T>
constexpr int stage_bytes() {
  return kStageGroups * bytes_per_256<T>();
}

// One weight of a launch: staged rows start at `first_row` of the launch's staged
// rows, direct ones at block `first_block`.
struct MatvecJob {
  const uint8_t* w;  // {in, rows} blocks
  size_t row_bytes;
  float* y;  // {rows, n}
  int rows, first_row, first_block, rows_per_block;
  bool f32;     // an F32 weight riding along a launch of another type
  bool staged;  // see stageable()
  bool split;   // direct rows: the block's warps share its kRowsPerWarp rows
};
struct MatvecParams {
  MatvecJob jobs[kMaxJobs];
  int n_jobs;
  int direct_blocks;  // blocks [0, direct_blocks) read direct rows
  int staged_rows;
  int team;   // warps per staged row: a power of two, 1 when a row has more than kWarps chunks
  int chunk;  // elements a team member takes (staged_rows_regs; even_chunks)
  int teams;  // in the whole grid
  int slot_bytes;  // a ring slot: a chunk, + 16 when rows that are not 16-byte aligned copy whole chunks
  const float* x;  // {in, n}
  int in, n;
  // matvec_norm_kernel (one token): each block forms rms_norm(x + x_add) · norm_w itself,
  // in its shared memory from uint4 norm_at on; block 0 writes x + x_add to sum and the
  // normed row to normed.
  const float* x_add;
  const float* norm_w;
  float* sum;
  float* normed;
  float eps;
  int norm_at;
};

// f(std::integral_constant<int, A>{}) with A the alignment (8, 4 or 2 bytes) of a
// group `offset` bytes into a 16-byte aligned slot: Q6_K's 210-byte blocks read their
// codes in 2 or 4 loads instead of 8 where their place allows. offset is a constant in
// the unrolled group loops, so one call remains.
template <class F>
__device__ __forceinline__ auto with_group_align(int offset, F&& f) {
  if (offset % 8 == 0) return f(std::integral_constant<int, 8>{});
  if (offset % 4 == 0) return f(std::integral_constant<int, 4>{});
  return f(std::integral_constant<int, 2>{});
}

// The lane's 8 weights of group g of a staged slot (shared memory, 16-byte aligned)
// and the factor their dot product takes: a format with one scale per 8 elements
// (codes8) has it applied once, after the dot product.
template <DType T>
__device__ __forceinline__ float lane_weights(const uint8_t* slot, int g, int lane, float (&w)[8]) {
  const int offset = g * bytes_per_256<T>();
  const uint8_t* group = slot + offset;
  if constexpr (T == DType::Q6_K) {
    return with_group_align(offset,
                            [&](auto a) { return Dequant<T>::template block_codes8<a.value>(group, lane * 8, w); });
  } else if constexpr (requires { Dequant<T>::codes8(group, 0, w); }) {
    return Dequant<T>::codes8(group, lane * 8, w);
  } else {
    Dequant<T>::load8(group, lane * 8, w);
    return 1.0f;
  }
}

__device__ __forceinline__ float dot8(const float (&w)[8], const float (&x)[8]) {
  float s = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) s += w[i] * x[i];
  return s;
}

// Q6_K: the lane's 8 codes of group g marked (block_marked8), read as wide as the
// group's alignment in the slot allows, and their scale.
template <DType T>
__device__ __forceinline__ float lane_marked(const uint8_t* slot, int g, int lane, uint2& q) {
  const int offset = g * bytes_per_256<T>();
  const uint8_t* group = slot + offset;
  return with_group_align(offset,
                          [&](auto a) { return Dequant<T>::template block_marked8<a.value>(group, lane * 8, q); });
}

// How a warp's lanes take a type's weights (LaneActs).
enum class Lanes {
  kGroups,   // a lane the 8 elements 8·lane .. of a group, as floats (lane_weights)
  kRuns16,   // Q4_K / Q5_K: 16 elements of one run, codes as 1 + c/128
  kMarked8,  // Q6_K: as kGroups, codes as 1 + c/128
  kQ6Int8,   // Q6_K, one token, rows of one chunk: x as two int8 terms, DP4A on the 6-bit codes
  kQ8Int8,   // Q8_0, one token, rows of up to kWarps chunks: x as two int8 terms, DP4A on the codes
};
template <DType T>
constexpr Lanes lanes_of() {
  if constexpr (requires(const KRun& r, uint32_t (&c)[4]) { Dequant<T>::run_codes16(r, 0, c); }) return Lanes::kRuns16;
  else if constexpr (requires(const uint8_t* b, uint2& q) { Dequant<T>::template block_marked8<2>(b, 0, q); })
    return Lanes::kMarked8;
  else return Lanes::kGroups;
}

// One chunk of N tokens' activations for a warp, and the lane's part of the chunk's
// dot products with K rows. A step is what a lane takes at once: `live` says whether
// lane's step i lies in the chunk's `elems` elements (a row's last group may be part
// of one, in whole blocks). Generally a step is a group and a lane
// its 8 elements 8·lane .. (lane_weights), decoded once for the K rows' N tokens:
// token 0's activations stay in registers, the others' are read from L1 once per step
// for the K rows. One token uses the lane layout its weight type reads fastest.
template <DType T, int N, Lanes kLanes = (N == 1 ? lanes_of<T>() : Lanes::kGroups)>
struct LaneActs {
  static constexpr int kSteps = kStageGroups;
  float x[kSteps][8];  // token 0's
  const float* rest;   // N > 1: token t's 8 elements of step i at rest + (t - 1) · in + i · 256
  int in, n;
  __device__ static bool live(int i, int elems, int lane) { return i * 256 + lane * 8 < elems; }
  // Token 0's activations of the chunk at x0 (token t's at x0 + t · in), and where the
  // others' are (a const float*, or SharedFloats for one token).
  template <class X>
  __device__ void load(X x0, int in_, int n_, int elems, int lane) {
#pragma unroll
    for (int i = 0; i < kSteps; ++i)
      if (live(i, elems, lane)) load_floats8(x0 + i * 256 + lane * 8, x[i]);
    if constexpr (N > 1) rest = x0 + in_ + lane * 8, in = in_, n = n_;
  }
  // acc[k][t] += the lane's part of step i of the chunk in slot s[k] · token t.
  template <int K>
  __device__ void dots(const uint8_t* const (&s)[K], int i, int lane, float (&acc)[2][N]) const {
    float w[K][8], scale[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      scale[k] = lane_weights<T>(s[k], i, lane, w[k]);
      acc[k][0] += dot8(w[k], x[i]) * scale[k];
    }
#pragma unroll
    for (int t = 1; t < N; ++t) {
      if (t < n) {
        float xv[8];
        load_floats8(rest + (t - 1) * in + i * 256, xv);
#pragma unroll
        for (int k = 0; k < K; ++k) acc[k][t] += dot8(w[k], xv) * scale[k];
      }
    }
  }
};

// Q6_K, one token: codes as 1 + c/128 (marked_code), so a code costs a PRMT and an
// FFMA, and the lane's Σ x of each group, taken when x is loaded, recovers
// Σ (c - offset)·x. (For several tokens the codes as floats serve every token.)
template <DType T>
struct LaneActs<T, 1, Lanes::kMarked8> : LaneActs<T, 1, Lanes::kGroups> {
  using Base = LaneActs<T, 1, Lanes::kGroups>;
  float xsum[kStageGroups];
  template <class X>
  __device__ void load(X x0, int in, int n, int elems, int lane) {
    Base::load(x0, in, n, elems, lane);
#pragma unroll
    for (int i = 0; i < kStageGroups; ++i) {
      xsum[i] = 0;
      if (!Base::live(i, elems, lane)) continue;
#pragma unroll
      for (int j = 0; j < 8; ++j) xsum[i] += this->x[i][j];
    }
  }
  template <int K>
  __device__ void dots(const uint8_t* const (&s)[K], int i, int lane, float (&acc)[2][1]) const {
#pragma unroll
    for (int k = 0; k < K; ++k) {
      uint2 q;
      const float dl = lane_marked<T>(s[k], i, lane, q);
      float sum = 0;
#pragma unroll
      for (int b = 0; b < 8; ++b) sum += marked_code(b < 4 ? q.x : q.y, b % 4) * this->x[i][b];
      acc[k][0] += dl * (128.0f * sum - (128.0f + Dequant<T>::kCodeOffset) * xsum[i]);
    }
  }
};

// Q6_K, one token, x as two int8 terms (matvec_int8_kernel): each lane's 8
// elements of a group lie in one block of 32 whose dx = max |x| / 127 gives
// x ≈ dx · (hi + lo / 254), within 1/64516 of the block's largest element, so with the
// 6-bit codes c read as int8 Σ (c - 32)·x = dx / 254 · (254 Σ c·hi + Σ c·lo - 32 Σ (254 hi + lo)):
// four DP4A. Every per-lane constant (the code bytes' places and shifts, -32 Σ, dx / 254)
// is taken once when x is loaded (behind an opaque move, so that the compiler keeps it
// rather than recomputing it each step), the code bytes are read with the group's
// alignment mod 8 known (two wide loads and two funnel shifts at 2 mod 8), and a code
// word is two shifts and two LOP3: the step for 8 weights of two rows is 446
// instructions in SASS against kMarked8's 759 (PERFORMANCE.md, sessions 42 and 43).
template <int kMod8>  // 8 bytes at p, p ≡ kMod8 (mod 8), from aligned words
__device__ __forceinline__ uint2 load8_mod8(const uint8_t* p) {
  if constexpr (kMod8 == 0) {
    return *reinterpret_cast<const uint2*>(p);
  } else if constexpr (kMod8 == 4) {
    const auto* w = reinterpret_cast<const uint32_t*>(p);
    return make_uint2(w[0], w[1]);
  } else if constexpr (kMod8 == 2) {
    const uint2 a = *reinterpret_cast<const uint2*>(p - 2);
    const uint32_t b = *reinterpret_cast<const uint32_t*>(p + 6);
    return make_uint2(__funnelshift_r(a.x, a.y, 16), __funnelshift_r(a.y, b, 16));
  } else {
    static_assert(kMod8 == 6);
    const uint32_t a = *reinterpret_cast<const uint32_t*>(p - 2);
    const uint2 b = *reinterpret_cast<const uint2*>(p + 2);
    return make_uint2(__funnelshift_r(a, b.x, 16), __funnelshift_r(b.x, b.y, 16));
  }
}
// A lane's 8 elements of x as two int8 terms (int8_terms8), packed 4 to a word; the 4
// lanes of a block of 32 share its max |x|, taken on the bits so that a NaN or infinity in
// x shows in the dot products. xscale = dx / 254 (dx = max |x| / 127); sum = Σ (254 hi + lo).
struct LaneInt8Terms {
  int hi[2], lo[2], sum;
  float xscale;
  __device__ explicit LaneInt8Terms(const float (&v)[8]) {
    uint32_t m = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) m = max(m, abs_bits(v[j]));
    const float amax = lanes_abs_max<4>(m);
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    int h[8], o[8];
    sum = int8_terms8(v, inv, h, o);
    const auto pack = [](const int* b) { return static_cast<int>(pack_bytes4(b)); };
    hi[0] = pack(h), hi[1] = pack(h + 4), lo[0] = pack(o), lo[1] = pack(o + 4);
    xscale = amax / (127.0f * 254.0f);
  }
};
template <DType T>
struct LaneActs<T, 1, Lanes::kQ6Int8> {
  static_assert(T == DType::Q6_K);
  static constexpr int kSteps = kStageGroups;
  int hi[kSteps][2], lo[kSteps][2];  // the two terms, 4 elements a word
  int seed[kSteps];                  // -32 Σ (254 hi + lo)
  float xscale[kSteps];              // dx / 254
  int ql_at, qh_at, scale_at;        // the lane's bytes in a block
  uint32_t ql_shift, qh_rot;         // its nibble and its 2-bit field, moved to bits 0-3 / 4-5
  // Launched only for rows of exactly kStageGroups groups (launch_matvec): every step lives.
  __device__ static constexpr bool live(int, int, int) { return true; }
  __device__ void load(const float* x0, int /*in*/, int /*n*/, int /*elems*/, int lane) {
    const int e = lane * 8, half = e / 128, k = (e % 128) / 32, l = e % 32;
    const auto opaque = [](int v) {
      int r;
      asm volatile("mov.b32 %0, %1;" : "=r"(r) : "r"(v));
      return r;
    };
    ql_at = opaque(64 * half + l + 32 * (k & 1)), qh_at = opaque(128 + 32 * half + l), scale_at = opaque(192 + e / 16);
    ql_shift = opaque(k >= 2 ? 4 : 0), qh_rot = opaque((2 * k - 4) & 31);
#pragma unroll
    for (int i = 0; i < kSteps; ++i) {
      float v[8];
      load_floats8(x0 + i * 256 + e, v);
      const LaneInt8Terms t(v);
      hi[i][0] = t.hi[0], hi[i][1] = t.hi[1], lo[i][0] = t.lo[0], lo[i][1] = t.lo[1];
      seed[i] = -32 * t.sum;
      xscale[i] = t.xscale;
    }
  }
  template <int K>
  __device__ void dots(const uint8_t* const (&s)[K], int i, int /*lane*/, float (&acc)[2][1]) const {
    constexpr int kBytes = Dequant<T>::kBlockBytes;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const uint8_t* b = s[k] + i * kBytes;  // i is a constant of the unrolled loop
      const auto codes = [&]<int M>(std::integral_constant<int, M>) {
        const uint2 ql = load8_mod8<M>(b + ql_at), qh = load8_mod8<M>(b + qh_at);
        const uint32_t h0 = __funnelshift_r(qh.x, qh.x, qh_rot) & 0x30303030u;
        const uint32_t h1 = __funnelshift_r(qh.y, qh.y, qh_rot) & 0x30303030u;
        return make_uint2(((ql.x >> ql_shift) & 0x0F0F0F0Fu) | h0, ((ql.y >> ql_shift) & 0x0F0F0F0Fu) | h1);
      };
      uint2 m;
      switch ((i * kBytes) % 8) {  // folded: i is a constant
        case 0: m = codes(std::integral_constant<int, 0>{}); break;
        case 2: m = codes(std::integral_constant<int, 2>{}); break;
        case 4: m = codes(std::integral_constant<int, 4>{}); break;
        default: m = codes(std::integral_constant<int, 6>{}); break;
      }
      const int mx = static_cast<int>(m.x), my = static_cast<int>(m.y);
      const int H = __dp4a(my, hi[i][1], __dp4a(mx, hi[i][0], 0));
      const int L = __dp4a(my, lo[i][1], __dp4a(mx, lo[i][0], seed[i]));
      const float dl = half_to_float(load_u16(b + 208)) * static_cast<float>(static_cast<int8_t>(b[scale_at]));
      acc[k][0] += static_cast<float>(254 * H + L) * (dl * xscale[i]);
    }
  }
};

// Q8_0, one token, LM heads (gpt-oss-20b's: rows of 2880, two chunks): x as kQ6Int8's
// two int8 terms, so that a lane's 8 codes take two DP4A a term instead of 8 conversions
// and FMAs. The lane's codes of group i are 8 bytes at 272·i + code_at of
// its row's chunk (34·(lane / 4) + 2 + 8·(lane % 4)), the same distance from a word
// boundary for every i, as 272 is a multiple of 4: three aligned words and two funnel
// shifts; its block's f16 scale is the block's first two bytes (scale_at).
template <DType T>
struct LaneActs<T, 1, Lanes::kQ8Int8> {
  static_assert(T == DType::Q8_0);
  static constexpr int kSteps = kStageGroups;
  static constexpr int kGroupBytes = 8 * 34;
  int hi[kSteps][2], lo[kSteps][2];  // the two terms, 4 elements a word
  float xscale[kSteps];              // dx / 254
  int scale_at, code_at;             // the lane's block and codes, bytes into a group
  __device__ static bool live(int i, int elems, int lane) { return i * 256 + lane * 8 < elems; }
  __device__ void load(const float* x0, int /*in*/, int /*n*/, int elems, int lane) {
    scale_at = 34 * (lane / 4), code_at = scale_at + 2 + 8 * (lane % 4);
#pragma unroll
    for (int i = 0; i < kSteps; ++i) {
      // Every lane takes part in the block's max (lanes past the chunk's end with zeros):
      // a block's 4 lanes live or not together, as elems is a multiple of 32.
      float v[8] = {};
      if (live(i, elems, lane)) load_floats8(x0 + i * 256 + lane * 8, v);
      const LaneInt8Terms t(v);
      hi[i][0] = t.hi[0], hi[i][1] = t.hi[1], lo[i][0] = t.lo[0], lo[i][1] = t.lo[1];
      xscale[i] = t.xscale;
    }
  }
  template <int K>
  __device__ void dots(const uint8_t* const (&s)[K], int i, int /*lane*/, float (&acc)[2][1]) const {
#pragma unroll
    for (int k = 0; k < K; ++k) {
      // The same for every i (an expression without it, so that the unrolled steps share it).
      const uint32_t off = reinterpret_cast<uintptr_t>(s[k] + code_at) & 3;
      const uint8_t* group = s[k] + i * kGroupBytes;  // i is a constant of the unrolled loop
      const auto* w = reinterpret_cast<const uint32_t*>(s[k] + code_at - off + i * kGroupBytes);
      // The third word only where the codes cross into it: at a row's end it can lie past
      // the last slot.
      const uint32_t w0 = w[0], w1 = w[1], w2 = off ? w[2] : 0u;
      const int cx = static_cast<int>(__funnelshift_r(w0, w1, 8 * off));
      const int cy = static_cast<int>(__funnelshift_r(w1, w2, 8 * off));
      const int H = __dp4a(cy, hi[i][1], __dp4a(cx, hi[i][0], 0));
      const int L = __dp4a(cy, lo[i][1], __dp4a(cx, lo[i][0], 0));
      const float d = half_to_float(load_u16(group + scale_at));
      acc[k][0] += static_cast<float>(254 * H + L) * (d * xscale[i]);
    }
  }
};

// Q4_K / Q5_K (the types with run_codes16), one token: a step is two groups and a
// lane 16 elements of one run of 32 (lanes 0-15 the first group, 16-31 the second),
// so a run's scale and minimum are decoded once per 16 elements instead of once per 8,
// and applied once: Σ (dl·c - ml)·x = dl·Σ c·x - ml·Σ x, with Σ x of the lane's 16
// elements taken when x is loaded. A code costs a PRMT and an FFMA (marked_code on
// codes left unmarked). These types' one-token matvec is bound by its instructions
// (PERFORMANCE.md, sessions 21 and 24).
template <DType T>
struct LaneActs<T, 1, Lanes::kRuns16> {
  static constexpr int kSteps = kStageGroups / 2;
  float x[kSteps][16], xsum[kSteps];
  __device__ static bool live(int i, int elems, int lane) { return (2 * i + lane / 16) * 256 < elems; }
  template <class X>
  __device__ void load(X x0, int /*in*/, int /*n*/, int elems, int lane) {
#pragma unroll
    for (int i = 0; i < kSteps; ++i) {
      xsum[i] = 0;
      if (!live(i, elems, lane)) continue;
      const X at = x0 + (2 * i + lane / 16) * 256 + (lane % 16) * 16;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const float4 v = load_float4(at + 4 * q);
        x[i][4 * q] = v.x, x[i][4 * q + 1] = v.y, x[i][4 * q + 2] = v.z, x[i][4 * q + 3] = v.w;
      }
#pragma unroll
      for (int j = 0; j < 16; ++j) xsum[i] += x[i][j];
    }
  }
  template <int K>
  __device__ void dots(const uint8_t* const (&s)[K], int i, int lane, float (&acc)[2][1]) const {
    const int e = (lane % 16) * 16;  // in the group: run e / 32, half (e / 16) % 2
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const KRun r = Dequant<T>::run(s[k] + (2 * i + lane / 16) * Dequant<T>::kBlockBytes, e);
      uint32_t c[4];
      Dequant<T>::run_codes16(r, (e / 16) % 2, c);
      float sum = 0;
#pragma unroll
      for (int w = 0; w < 4; ++w)
#pragma unroll
        for (int b = 0; b < 4; ++b) sum += marked_code(c[w], b) * x[i][4 * w + b];
      acc[k][0] += r.dl * 256.0f * fmaf(-0.5f, xsum[i], sum) - r.ml * xsum[i];
    }
  }
};

// A walk over the rows row, row + step, ... of the launch's staged rows, with the
// job each is in.
struct RowCursor {
  int row, job;
  __device__ RowCursor(const MatvecParams& p, int first) : row(first), job(0) { settle(p); }
  __device__ void next(const MatvecParams& p, int step) {
    row += step;
    settle(p);
  }
  __device__ void settle(const MatvecParams& p) {
    while (job + 1 < p.n_jobs && (!p.jobs[job].staged || row >= p.jobs[job].first_row + p.jobs[job].rows)) ++job;
  }
  __device__ const uint8_t* chunk(const MatvecParams& p, int c, int chunk_bytes) const {
    const MatvecJob& j = p.jobs[job];
    return j.w + static_cast<size_t>(row - j.first_row) * j.row_bytes + c * chunk_bytes;
  }
  __device__ void store(const MatvecParams& p, int t, float v) const {
    const MatvecJob& j = p.jobs[job];
    j.y[static_cast<int64_t>(t) * j.rows + row - j.first_row] = v;
  }
};

// Whether a team's members take parts of a row as even as whole groups allow
// (gpt-oss-20b's rows of 2880: 1536 + 1344, not 2048 + 832): where a group's bytes keep
// a slot's 16-byte alignment; the others' members take kStageGroups groups each.
template <DType T>
constexpr bool even_chunks() {
  return bytes_per_256<T>() % 16 == 0;
}

// Shared memory of the staged blocks: each warp's mbarriers, then its slots.
template <DType T>
__device__ __forceinline__ WarpStream<kStages> warp_stream(uint4* smem, int warp, int slot_bytes) {
  static_assert(stage_bytes<T>() % 16 == 0, "slots 16-byte aligned (bulk copies; lane_weights)");
  return WarpStream<kStages>(reinterpret_cast<uint8_t*>(smem + kStageBarrierVecs) + warp * kStages * slot_bytes,
                             slot_bytes, reinterpret_cast<uint64_t*>(smem) + warp * kStages);
}
// A slot's bytes: one chunk of a row, and 16 more where a row that does not start on a
// 16-byte boundary is copied from the boundary below it in whole chunks.
template <DType T>
int slot_bytes_for(bool unaligned_rows) {
  return stage_bytes<T>() + (unaligned_rows ? 16 : 0);
}
// The staged blocks' shared memory: the warps' mbarriers and rings of slot_bytes slots.
size_t stage_smem_bytes(int slot_bytes) {
  return (kStageBarrierVecs + static_cast<size_t>(kWarps) * kStages * slot_bytes / 16) * 16;
}

// A barrier for the team-th group of `threads` threads (teams of 2 or more warps,
// so at most kWarps / 2 of them): named barriers 1 .. 4, spelled out so that the
// block holds only those.
__device__ __forceinline__ void team_sync(int team, int threads) {
  static_assert(kWarps / 2 == 4);
  switch (team) {
    case 0: asm volatile("bar.sync 1, %0;" ::"r"(threads) : "memory"); break;
    case 1: asm volatile("bar.sync 2, %0;" ::"r"(threads) : "memory"); break;
    case 2: asm volatile("bar.sync 3, %0;" ::"r"(threads) : "memory"); break;
    default: asm volatile("bar.sync 4, %0;" ::"r"(threads) : "memory"); break;
  }
}

// Where a block's activations come from once it has waited for the kernel before it
// (begin), and the factor its dot products take (scale): x as given (PlainInput), or
// formed by the block (NormedInput).
struct PlainInput {
  __device__ const float* begin(const MatvecParams& p) const {
    pdl_begin();
    return p.x;
  }
  __device__ static constexpr float scale() { return 1.0f; }
};
// (x + x_add) · norm_w formed by every block in its shared memory xs (one token, at most
// kNormMaxIn elements), the norm's factor applied to the dot products: a MoE block's
// router launch then needs no norm kernel before it (the one norm of a decode step
// whose launch is not hidden behind a weight stream: +2.4% bounded, PERFORMANCE.md,
// session 48). norm_w is a weight, loaded before the wait.
constexpr int kNormMaxIn = 4096;
struct NormedInput {
  float* xs;
  float inv = 0;  // rsqrt(mean((x + x_add)²) + eps)
  __device__ SharedFloats begin(const MatvecParams& p) {
    constexpr int kPer = kNormMaxIn / (4 * 32 * kWarps);
    __shared__ float warp_ss[kWarps];
    const auto at = [&](int k) { return (k * 32 * kWarps + static_cast<int>(threadIdx.x)) * 4; };
    float4 w[kPer] = {}, a[kPer] = {}, b[kPer] = {};
#pragma unroll
    for (int k = 0; k < kPer; ++k)
      if (at(k) < p.in) w[k] = load_float4(p.norm_w + at(k));
    pdl_begin();
    // Plain loads: the compiler moved read-only-path ones (__ldg) of x and x_add above
    // griddepcontrol.wait, next to norm_w's, and they read the previous kernel's output
    // before it was written (qwen35moe's tiny decode wrong, session 71).
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      if (at(k) >= p.in) continue;
      a[k] = *reinterpret_cast<const float4*>(p.x + at(k));
      b[k] = *reinterpret_cast<const float4*>(p.x_add + at(k));
    }
    float ss = 0;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      if (at(k) >= p.in) continue;
      const float4 v = make_float4(a[k].x + b[k].x, a[k].y + b[k].y, a[k].z + b[k].z, a[k].w + b[k].w);
      ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
      if (blockIdx.x == 0) *reinterpret_cast<float4*>(p.sum + at(k)) = v;
      *reinterpret_cast<float4*>(xs + at(k)) = make_float4(v.x * w[k].x, v.y * w[k].y, v.z * w[k].z, v.w * w[k].w);
    }
    ss = warp_sum(ss);
    if (threadIdx.x % 32 == 0) warp_ss[threadIdx.x / 32] = ss;
    __syncthreads();  // xs and warp_ss
    float total = 0;
#pragma unroll
    for (int i = 0; i < kWarps; ++i) total += warp_ss[i];
    inv = rsqrtf(total / p.in + p.eps);
    if (blockIdx.x == 0) {
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        if (at(k) >= p.in) continue;
        const float4 v = *reinterpret_cast<const float4*>(xs + at(k));
        *reinterpret_cast<float4*>(p.normed + at(k)) = make_float4(v.x * inv, v.y * inv, v.z * inv, v.w * inv);
      }
    }
    return {xs};
  }
  __device__ float scale() const { return inv; }
};

// Up to kMaxDotTokens tokens (n <= N), rows of at most kWarps chunks: each warp of a
// team holds its chunk of token 0's activations in registers (LaneActs) and takes its
// rows two at a time (two independent dot products per lane and token), with two more
// rows in flight. A row that does not start on a 16-byte boundary (stageable) is
// copied from the boundary below it (WarpStream::issue_unaligned). kPairs: whole rows of
// one weight (a team of one), a slot holding two adjacent rows copied together, so four
// slots keep the next six rows in flight (the LM head's 417 MB: session 42's probe moved
// them at 4.01 TB/s in two-row slots, 3.73 in one-row slots).
template <DType T, int N, bool kInt8 = false, class In = PlainInput, bool kPairs = false>
__device__ __forceinline__ void staged_rows_regs(const MatvecParams& p, uint4* smem, In in = {}) {
  static_assert(kStages == 4, "two rows in use and two in flight");
  __shared__ float part[2][2][N][kWarps];  // [row pair parity][row of the pair][token][warp]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int team = p.team, member = warp % team, c = member;
  const int team_id = ((blockIdx.x - p.direct_blocks) * kWarps + warp) / team;
  const int per = (p.staged_rows + p.teams - 1) / p.teams, first = team_id * per;
  const int rows = first < p.staged_rows ? min(per, p.staged_rows - first) : 0;
  // A member past the row's last chunk computes nothing but meets its team.
  const int chunk = even_chunks<T>() ? p.chunk : kStageGroups * 256;
  const bool idle = c * chunk >= p.in;
  const int elems = idle ? 0 : min(chunk, p.in - c * chunk);
  const int bytes = elems / Dequant<T>::kBlockElems * Dequant<T>::kBlockBytes;
  const int chunk_bytes = chunk / Dequant<T>::kBlockElems * Dequant<T>::kBlockBytes;
  WarpStream<kStages> stream = warp_stream<T>(smem, warp, p.slot_bytes);
  RowCursor fetch(p, first), work = fetch;
  // Item i: row i, or with kPairs rows 2i and 2i + 1.
  const auto issue = [&](int i) {
    if constexpr (kPairs) {
      if (idle || 2 * i >= rows) return stream.issue(i, nullptr, 0);
      const int k = min(2, rows - 2 * i);
      stream.issue_unaligned(i, fetch.chunk(p, c, chunk_bytes), k * bytes);
      fetch.next(p, k);
    } else {
      if (idle || i >= rows) return stream.issue(i, nullptr, 0);
      stream.issue_unaligned(i, fetch.chunk(p, c, chunk_bytes), bytes);
      fetch.next(p, 1);
    }
  };
  issue(0);
  issue(1);
  const auto x = in.begin(p);
  if constexpr (kPairs) issue(2);

  using Acts = std::conditional_t<kInt8, LaneActs<T, 1, T == DType::Q6_K ? Lanes::kQ6Int8 : Lanes::kQ8Int8>,
                                  LaneActs<T, N>>;
  Acts xa;
  xa.load(x + c * chunk, p.in, p.n, elems, lane);
  for (int r = 0; r < rows; r += 2) {
    const bool two = r + 1 < rows;
    if constexpr (kPairs) {
      issue(r / 2 + 3);
    } else {
      issue(r + 2);
      issue(r + 3);
    }
    float sum[2][N] = {};
    // The lane's part of K rows' dot products, the rows in slots s.
    const auto dots = [&]<int K>(const uint8_t* const (&s)[K]) {
#pragma unroll
      for (int i = 0; i < Acts::kSteps; ++i)
        if (Acts::live(i, elems, lane)) xa.dots(s, i, lane, sum);
    };
    if (!idle) {
      if (two) {
        const uint8_t* pair = kPairs ? stream.wait(r / 2) : nullptr;
        const uint8_t* const s[2] = {kPairs ? pair : stream.wait(r), kPairs ? pair + bytes : stream.wait(r + 1)};
        dots(s);
      } else {
        const uint8_t* const s[1] = {stream.wait(kPairs ? r / 2 : r)};
        dots(s);
      }
      stream.release();
    }
#pragma unroll
    for (int k = 0; k < 2; ++k)
#pragma unroll
      for (int t = 0; t < N; ++t) sum[k][t] = warp_sum(sum[k][t]);
    if (team > 1) {  // the team adds its members' parts in order
      const int par = r / 2 % 2;
      if (lane == 0) {
#pragma unroll
        for (int t = 0; t < N; ++t) part[par][0][t][warp] = sum[0][t], part[par][1][t][warp] = sum[1][t];
      }
      team_sync(warp / team, 32 * team);
#pragma unroll
      for (int kt = 0; kt < 2 * N; ++kt) {
        float& s = sum[kt / N][kt % N];
        s = 0;
        for (int m = 0; m < team; ++m) s += part[par][kt / N][kt % N][warp - member + m];
      }
    }
#pragma unroll
    for (int t = 0; t < N; ++t)
      if (lane == 0 && member == 0 && (N == 1 || t < p.n)) work.store(p, t, sum[0][t] * in.scale());
    work.next(p, 1);
    if (two) {
#pragma unroll
      for (int t = 0; t < N; ++t)
        if (lane == 0 && member == 0 && (N == 1 || t < p.n)) work.store(p, t, sum[1][t] * in.scale());
      work.next(p, 1);
    }
  }
}

// Any number of tokens (up to kMaxDotTokens) and chunks: a warp walks every chunk
// of its rows, reading the activations from memory.
template <DType T, int N>
__device__ __forceinline__ void staged_rows_mem(const MatvecParams& p, uint4* smem) {
  constexpr int kSlot = stage_bytes<T>(), kGB = bytes_per_256<T>();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n_groups = p.in / 256, chunks = (n_groups + kStageGroups - 1) / kStageGroups;
  const int first = (blockIdx.x - p.direct_blocks) * kWarps + warp;
  const int items = first < p.staged_rows ? ((p.staged_rows - 1 - first) / p.teams + 1) * chunks : 0;
  WarpStream<kStages> stream = warp_stream<T>(smem, warp, p.slot_bytes);
  RowCursor fetch(p, first), work = fetch;
  const auto issue = [&](int i) {
    if (i >= items) return stream.issue(i, nullptr, 0);
    const int c = i % chunks, bytes = min(kSlot, (n_groups - c * kStageGroups) * kGB);
    stream.issue(i, fetch.chunk(p, c, kSlot), (bytes + 15) / 16 * 16);
    if (c == chunks - 1) fetch.next(p, p.teams);
  };
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) issue(i);
  pdl_begin();

  float acc[N] = {};
  for (int i = 0; i < items; ++i) {
    issue(i + kStages - 1);
    const uint8_t* slot = stream.wait(i);
    const int c = i % chunks, g_end = min(kStageGroups, n_groups - c * kStageGroups);
#pragma unroll
    for (int g = 0; g < kStageGroups; ++g) {
      if (g < g_end) {
        float w[8];
        const float scale = lane_weights<T>(slot, g, lane, w);
        const float* x = p.x + (c * kStageGroups + g) * 256 + lane * 8;
#pragma unroll
        for (int t = 0; t < N; ++t) {
          if (t < p.n) {
            float xv[8];
            load_floats8(x + t * p.in, xv);
            acc[t] += dot8(w, xv) * scale;
          }
        }
      }
    }
    stream.release();
    if (c < chunks - 1) continue;
#pragma unroll
    for (int t = 0; t < N; ++t) {
      if (t < p.n) {
        const float v = warp_sum(acc[t]);
        if (lane == 0) work.store(p, t, v);
      }
      acc[t] = 0;
    }
    work.next(p, p.teams);
  }
}

// Directly read rows from r0 of job j: each warp its own kRowsPerWarp rows, or
// (split) all warps the same rows, adding their parts in a fixed order.
template <DType T, int N, class In = PlainInput>
__device__ __forceinline__ void direct_rows(const MatvecJob& j, const MatvecParams& p, int r0, In in = {}) {
  __shared__ float part[kWarps][kRowsPerWarp][kMaxDotTokens];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (!j.split) r0 += warp * kRowsPerWarp;
  const uint8_t* rows[kRowsPerWarp];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) rows[i] = j.w + static_cast<size_t>(min(r0 + i, j.rows - 1)) * j.row_bytes;
  if constexpr (!std::is_same_v<In, PlainInput>) {
    // The lane's weight bytes asked into L1 before the wait: NormedInput's prologue
    // would otherwise put an L2 round trip and a block barrier before their first load.
    constexpr int kElems = Dequant<T>::kBlockElems, kBytes = Dequant<T>::kBlockBytes;
    for (int e = (j.split ? warp : 0) * 256 + lane * 8; e < p.in; e += (j.split ? kWarps : 1) * 256)
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i)
        asm volatile("prefetch.global.L1 [%0];" ::"l"(rows[i] + static_cast<size_t>(e / kElems) * kBytes +
                                                      e % kElems * kBytes / kElems));
  }
  const auto x = in.begin(p);
  float acc[kRowsPerWarp][kMaxDotTokens] = {};
  if (j.split) rows_dot<T, kRowsPerWarp, kDirectGroups, N>(rows, p.in, warp, kWarps, x, p.in, p.n, acc);
  else rows_dot<T, kRowsPerWarp, kDirectGroups, N>(rows, p.in, 0, 1, x, p.in, p.n, acc);
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i)
#pragma unroll
    for (int t = 0; t < N; ++t) {
      if (t < p.n) {
        const float s = warp_sum(acc[i][t]);
        if (lane == 0) {
          if (j.split) part[warp][i][t] = s;
          else if (r0 + i < j.rows) j.y[static_cast<int64_t>(t) * j.rows + r0 + i] = s * in.scale();
        }
      }
    }
  if (!j.split) return;
  __syncthreads();
  const int i = threadIdx.x / kMaxDotTokens, t = threadIdx.x % kMaxDotTokens;
  if (i < kRowsPerWarp && t < p.n && r0 + i < j.rows) {
    float s = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += part[w][i][t];
    j.y[static_cast<int64_t>(t) * j.rows + r0 + i] = s * in.scale();
  }
}

// One token, every row staged, x as int8 terms: Q6_K rows one chunk long of one weight
// (the flagship's LM head: 2048; kQ6Int8 lanes: 119 us on an H200 against the float
// lanes' 168, PERFORMANCE.md, session 43), two rows a slot (121.0 -> 116.3 us, session
// 72), and Q8_0 rows of up to kWarps chunks (kQ8Int8).
template <DType T>
constexpr bool int8_pairs() {
  return T == DType::Q6_K;
}
template <DType T>
__global__ void __launch_bounds__(32 * kWarps, kMinBlocksPerSM)
    matvec_int8_kernel(const __grid_constant__ MatvecParams p) {
  extern __shared__ uint4 stage[];
  staged_rows_regs<T, 1, true, PlainInput, int8_pairs<T>()>(p, stage);
}

// A block's rows: staged (from blocks direct_blocks on) or read directly.
template <DType T, int N, class In = PlainInput>
__device__ __forceinline__ void block_rows(const MatvecParams& p, uint4* stage, In in = {}) {
  if constexpr (T != DType::F32) {
    if (static_cast<int>(blockIdx.x) >= p.direct_blocks) {
      if (p.team * kStageGroups * 256 >= p.in) return staged_rows_regs<T, N>(p, stage, in);
      if constexpr (std::is_same_v<In, PlainInput>) return staged_rows_mem<T, N>(p, stage);
      return;  // NormedInput's rows (kNormMaxIn) always fit a team
    }
  }
  int j = 0;  // the last direct job starting at or before this block
  for (int i = 0; i < p.n_jobs; ++i)
    if (!p.jobs[i].staged && static_cast<int>(blockIdx.x) >= p.jobs[i].first_block) j = i;
  const MatvecJob& job = p.jobs[j];
  const int r0 = (blockIdx.x - job.first_block) * job.rows_per_block;
  if constexpr (T != DType::F32) {
    if (job.f32) return direct_rows<DType::F32, N>(job, p, r0, in);
  }
  direct_rows<T, N>(job, p, r0, in);
}

// N: the token count it is compiled for, n <= N (launch_for_tokens).
template <DType T, int N>
__global__ void __launch_bounds__(32 * kWarps, kMinBlocksPerSM) matvec_kernel(const __grid_constant__ MatvecParams p) {
  extern __shared__ uint4 stage[];
  block_rows<T, N>(p, stage);
}

// One token, x formed by every block from a residual add and the RMS norm after it
// (NormedInput; add_rms_norm_matvec_many): a MoE block's router launch.
template <DType T>
__global__ void __launch_bounds__(32 * kWarps, kMinBlocksPerSM)
    matvec_norm_kernel(const __grid_constant__ MatvecParams p) {
  extern __shared__ uint4 stage[];
  block_rows<T, 1>(p, stage, NormedInput{reinterpret_cast<float*>(stage + p.norm_at)});
}

// Staged blocks: as many as fit on the GPU beside the direct ones, at most one team per row.
// norm_bytes: NormedInput's row after the slots (matvec_norm_kernel), else 0. kItemRows:
// rows a slot holds (2: staged_rows_regs' kPairs); a template argument, since the resident
// count below, which depends on it, is computed once per instance.
template <DType T, int N, auto Kernel, int kItemRows = 1>
void launch_matvec_kernel(MatvecParams& p, cudaStream_t s, size_t norm_bytes = 0) {
  size_t smem = 0;
  int staged_blocks = 0;
  if constexpr (T != DType::F32) {
    if (p.staged_rows > 0) {
      const int more_rows = (kItemRows - 1) * stage_bytes<T>();  // a slot's rows after its first
      p.slot_bytes += more_rows;
      smem = stage_smem_bytes(p.slot_bytes);
      // Counted at the padded size and the longest row: the same for every launch.
      static const int resident = resident_blocks<Kernel>(
          32 * kWarps,
          stage_smem_bytes(slot_bytes_for<T>(true) + more_rows) + (norm_bytes > 0 ? kNormMaxIn * sizeof(float) : 0));
      // A warp per chunk of a row (up to kWarps chunks).
      const int chunks = ceil_div(ceil_div(p.in, 256), kStageGroups);
      p.team = 1;
      while (p.team < chunks && p.team < kWarps) p.team *= 2;
      if (p.team < chunks) p.team = 1;
      p.chunk = kStageGroups * 256;
      if constexpr (even_chunks<T>()) p.chunk = std::min(kStageGroups, ceil_div(ceil_div(p.in, 256), p.team)) * 256;
      // Each direct block takes about one staged block's place on its SM.
      staged_blocks =
          std::min(ceil_div(p.staged_rows, kWarps / p.team), std::max(resident - p.direct_blocks, resident / 2));
      p.teams = staged_blocks * (kWarps / p.team);
    }
  }
  p.norm_at = static_cast<int>(smem / 16);
  smem += norm_bytes;
  launch_pdl_smem(Kernel, p.direct_blocks + staged_blocks, 32 * kWarps, smem, s, p);
}

template <DType T, int N>
void launch_matvec(MatvecParams& p, cudaStream_t s) {
  if constexpr ((T == DType::Q6_K || T == DType::Q8_0) && N == 1) {
    // Q8_0 only for LM heads: each warp quantizes its chunk of x before its first row,
    // which a few rows a team do not repay (H200: gpt-oss-20b's q / k / v, 5 rows a team,
    // 7.60 -> 12.21 us; its LM head, 190 rows a team, 245.6 -> 228 us; this rule +0.8%,
    // PERFORMANCE.md session 69).
    const int max_in = T == DType::Q6_K ? kStageGroups * 256 : kWarps * kStageGroups * 256;
    const bool rows_ok = T == DType::Q6_K ? p.in == max_in : p.in <= max_in && p.staged_rows >= kLmHeadMinRows;
    // Two rows a slot: adjacent rows of one weight (its rows are whole chunks).
    if (p.direct_blocks == 0 && p.staged_rows > 0 && rows_ok && (!int8_pairs<T>() || p.n_jobs == 1))
      return launch_matvec_kernel<T, N, matvec_int8_kernel<T>, int8_pairs<T>() ? 2 : 1>(p, s);
  }
  launch_matvec_kernel<T, N, matvec_kernel<T, N>>(p, s);
}

// Kernels for 1, 2 and kMaxDotTokens tokens. One compiled for more tokens than it is
// given still issues the others' instructions, predicated off: at 2 tokens the 5-token
// kernel's threads were off for a third of them, and a kernel of its own measured +7%
// at 2 sequences; kernels of their own for 3 and 4 tokens gained nothing (4: -2%),
// both measured on the path that read every token from L1 for every row
// (PERFORMANCE.md, session 17).
template <DType T>
void launch_for_tokens(MatvecParams& p, cudaStream_t s) {
  if (p.n == 1) launch_matvec<T, 1>(p, s);
  else if (p.n == 2) launch_matvec<T, 2>(p, s);
  else launch_matvec<T, kMaxDotTokens>(p, s);
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
  pdl_begin();
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

// The next launch of matvec_many: the first weight not done, of type `type` (returned), with
// any F32 weights after it, at most kMaxJobs; marks them done. y may be empty (jobs then
// have no outputs: to count launches).
DType next_launch(std::span<const Tensor> w, const Tensor& x, std::span<const Tensor> y, std::vector<bool>& done,
                  MatvecParams& p) {
  size_t first = 0;
  while (done[first]) ++first;
  DType type = w[first].type;
  for (size_t i = first; i < w.size() && type == DType::F32; ++i)
    if (!done[i]) type = w[i].type;
  p = MatvecParams{};
  p.x = x.as<const float>();
  p.in = static_cast<int>(x.ne[0]);
  p.n = static_cast<int>(x.rows());
  int direct_rows = 0;
  for (size_t i = first, jobs = 0; i < w.size() && jobs < kMaxJobs; ++i)
    if (!done[i] && (w[i].type == type || w[i].type == DType::F32)) {
      const bool staged = w[i].type != DType::F32 &&
                          stageable(w[i].data, w[i].row_bytes(), p.in, type_traits(w[i].type).block_elems);
      if (!staged) direct_rows += static_cast<int>(w[i].rows());
      ++jobs;
    }
  for (size_t i = first; i < w.size() && p.n_jobs < kMaxJobs; ++i) {
    if (done[i] || (w[i].type != type && w[i].type != DType::F32)) continue;
    done[i] = true;
    MatvecJob& j = p.jobs[p.n_jobs++];
    j.w = static_cast<const uint8_t*>(w[i].data);
    j.row_bytes = w[i].row_bytes();
    j.y = y.empty() ? nullptr : y[i].as<float>();
    j.rows = static_cast<int>(w[i].rows());
    j.f32 = w[i].type == DType::F32 && type != DType::F32;
    j.staged = w[i].type != DType::F32 && stageable(j.w, j.row_bytes, p.in, type_traits(w[i].type).block_elems);
    if (j.staged) {
      j.first_row = p.staged_rows;
      p.staged_rows += j.rows;
    } else {
      j.split = direct_rows <= kSplitMaxRows;
      j.rows_per_block = j.split ? kRowsPerWarp : kWarps * kRowsPerWarp;
      j.first_block = p.direct_blocks;
      p.direct_blocks += ceil_div(j.rows, j.rows_per_block);
    }
  }
  bool unaligned = false;  // staged rows copied from the 16-byte boundary below them
  for (int i = 0; i < p.n_jobs; ++i) unaligned = unaligned || (p.jobs[i].staged && p.jobs[i].row_bytes % 16 != 0);
  dispatch_weight_type(type, [&](auto t) {
    constexpr DType T = decltype(t)::value;
    if constexpr (T != DType::F32) p.slot_bytes = slot_bytes_for<T>(unaligned);
  });
  return type;
}

}  // namespace

void matvec_many(std::span<const Tensor> w, const Tensor& x, std::span<const Tensor> y, cudaStream_t s) {
  std::vector<bool> done(w.size(), false);
  while (std::find(done.begin(), done.end(), false) != done.end()) {
    MatvecParams p;
    dispatch_weight_type(next_launch(w, x, y, done, p), [&](auto t) { launch_for_tokens<decltype(t)::value>(p, s); });
    ZINC_CUDA_LAUNCHED("matvec");
  }
}

bool matvec_norm_takes(std::span<const Tensor> w, const Tensor& x) {
  if (x.rows() != 1 || x.ne[0] > kNormMaxIn || x.ne[0] % 8 != 0 || matmul_batched_takes(w, 1)) return false;
  std::vector<bool> done(w.size(), false);
  MatvecParams p;
  next_launch(w, x, {}, done, p);
  return std::find(done.begin(), done.end(), false) == done.end();  // one launch
}

void add_rms_norm_matvec_many(const Tensor& a, const Tensor& b, const Tensor& norm_w, float eps, const Tensor& sum,
                              const Tensor& h, std::span<const Tensor> w, std::span<const Tensor> y, cudaStream_t s) {
  std::vector<bool> done(w.size(), false);
  MatvecParams p;
  const DType type = next_launch(w, a, y, done, p);
  p.x_add = b.as<const float>();
  p.norm_w = norm_w.as<const float>();
  p.sum = sum.as<float>();
  p.normed = h.as<float>();
  p.eps = eps;
  dispatch_weight_type(type, [&](auto t) {
    constexpr DType T = decltype(t)::value;
    launch_matvec_kernel<T, 1, matvec_norm_kernel<T>>(p, s, static_cast<size_t>(p.in) * sizeof(float));
  });
  ZINC_CUDA_LAUNCHED("matvec_norm");
}

void matvec(const Tensor& w, const Tensor& x, const Tensor& y, cudaStream_t s) {
  matvec_many(std::span<const Tensor>(&w, 1), x, std::span<const Tensor>(&y, 1), s);
}

void embed(const Tensor& table, const Tensor& ids, const Tensor& out, cudaStream_t s) {
  EmbedParams p{static_cast<const uint8_t*>(table.data), table.row_bytes(), ids.as<const int32_t>(), out.as<float>(),
                static_cast<int>(table.ne[0]), static_cast<int>(table.rows())};
  const dim3 grid(ceil_div(p.d / 8, 128), static_cast<unsigned>(ids.ne[0]));
  dispatch_weight_type(table.type,
                       [&](auto type) { launch_pdl(embed_kernel<decltype(type)::value>, grid, 128, s, p); });
  ZINC_CUDA_LAUNCHED("embed");
}

}  // namespace zinc::cuda
