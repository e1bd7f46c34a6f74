// One token's product with a warp's 16 staged K-quant rows (matmul_few.cu) on DP4A, not
// on the tensor cores. ncu found Gemma 3 27B's one-token gate / up launch (130 MB of
// Q4_K) bound by issue on an H200: 67% of issue slots, the integer pipe the busiest (the
// codes' decode into f16 A fragments), 2.3 TB/s. Here the codes stay bytes: x is staged
// once per warp as two int8 terms per 32 elements, x ≈ e · (254 hi + lo) with e = max |x|
// / (127 · 254) (within 1/64516 of the block's largest element, as the matvec's Q6_K LM
// head takes it), and a code word meets them in two DP4A. With the rows' tensor copy
// that launch went from 35.6 to 28.9 M warp instructions and 57.9 to 47.1 us under ncu,
// Gemma 3 27B from 113.3 to 126.0 tokens/s and Llama-3.1-8B from 373.3 to 414.7
// (PERFORMANCE.md, session 66).
//
// Lanes: lane 2r + h takes row r's half h of each chunk (128 elements, four runs of 32),
// so a run's scale and minimum are decoded once per 32 weights. Rows are staged densely
// (int8_stride: the bulk tensor copy's box); where that is 32 mod 128 bytes (two chunks)
// rows 2 and 3 of every four read their two 16-byte pieces of a run in the other order,
// so that a quarter-warp's loads fall on distinct banks (Q5_K's two chunks, 96 mod 128,
// take the same order). Q5_K is Q4_K with a fifth bit per code: an all-Q5_K
// Llama-3.1-8B went from 362.4 to 433.7 tokens/s on an H200 (session 67).
#pragma once

#include "backend/cuda/few_tile.cuh"

namespace zinc::cuda::few {

template <DType T>
constexpr bool kInt8Lanes = T == DType::Q4_K || T == DType::Q5_K || T == DType::Q6_K;

// Q4_K, Q5_K: rows densely, as the bulk tensor copy stages them (matmul_few.cu). Q6_K: copied
// row by row from the 16-byte boundary below (kShifted), in the mma layout's stride.
template <DType T>
constexpr int int8_stride(int C) {
  return T == DType::Q6_K ? row_stride<T>(C) : C * chunk_bytes<T>();
}
// Whether row r's lanes take a run's second piece first (above).
template <DType T, int C>
__device__ __forceinline__ int piece_order(int r) {
  constexpr int units = int8_stride<T>(C) / 16;
  static_assert(int8_stride<T>(C) % 16 == 0 && (units % 2 == 1 || units % 4 == 2));
  return units % 2 == 1 ? 0 : (r >> 1) & 1;
}

// A warp's staged token: per chunk and term (hi, lo) 256 bytes as two halves of 128, 32
// bytes apart (with piece_order, the four addresses a quarter-warp reads fall on distinct
// banks), then per run of 32 (e, Σ x; Q6_K: Σ x left 0) as a float2, then (kSeeds, Q6_K) per 16 elements
// -32 Σ (254 hi + lo): a Q6_K code stores its value + 32.
template <int C, bool kSeeds = false>
struct Int8Token {
  static constexpr int kHalf = 160, kTerm = 2 * kHalf, kMeta = 2 * C * kTerm, kSeedAt = kMeta + C * 8 * 8;
  static constexpr int kBytes = kSeedAt + (kSeeds ? C * 16 * 4 : 0);
  const uint8_t* base;
  __device__ const uint4* hi(int c, int h, int run) const {
    return reinterpret_cast<const uint4*>(base + c * kTerm + h * kHalf + run * 32);
  }
  __device__ const uint4* lo(int c, int h, int run) const {
    return reinterpret_cast<const uint4*>(base + C * kTerm + c * kTerm + h * kHalf + run * 32);
  }
  __device__ float2 meta(int c, int run) const { return reinterpret_cast<const float2*>(base + kMeta)[c * 8 + run]; }
  __device__ int2 seeds(int c, int run) const { return reinterpret_cast<const int2*>(base + kSeedAt)[c * 8 + run]; }
};

// Lane L quantizes elements 8L .. 8L + 7 of each of the slice's chunks; the four lanes
// of a run share its max |x| (on the bits, so a NaN or infinity in x shows in the sums).
template <int C, bool kSeeds = false>
__device__ __forceinline__ Int8Token<C, kSeeds> stage_token_int8(uint8_t* words, const float* tok, int count) {
  using X = Int8Token<C, kSeeds>;
  const int lane = threadIdx.x % 32, h = lane / 16, at = h * X::kHalf + 8 * (lane % 16);
#pragma unroll
  for (int c = 0; c < C; ++c) {
    if (c > 0 && c >= count) break;  // past the row: a ragged team's last warp
    const auto* src = reinterpret_cast<const float4*>(tok + kChunk * c + 8 * lane);
    const float4 a = __ldg(src), b = __ldg(src + 1);
    const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    uint32_t m = 0;
    float sum = 0;  // Σ x of the run, for Q4_K's minimums (Q6_K has none)
#pragma unroll
    for (int j = 0; j < 8; ++j) m = max(m, abs_bits(v[j])), sum += kSeeds ? 0.0f : v[j];
    const float amax = lanes_abs_max<4>(m);
    if constexpr (!kSeeds) {
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    }
    const float inv = amax > 0.0f ? __fdividef(127.0f, amax) : 0.0f;  // x then holds a NaN or infinity
    int hi[8], lo[8];
    const int terms = int8_terms8(v, inv, hi, lo);  // Σ (254 hi + lo): the Q6_K seeds'
    *reinterpret_cast<uint2*>(words + c * X::kTerm + at) = make_uint2(pack_bytes4(hi), pack_bytes4(hi + 4));
    *reinterpret_cast<uint2*>(words + (C + c) * X::kTerm + at) = make_uint2(pack_bytes4(lo), pack_bytes4(lo + 4));
    if (lane % 4 == 0) {
      const float e = amax * (1.0f / (127.0f * 254.0f));
      reinterpret_cast<float2*>(words + X::kMeta)[c * 8 + lane / 4] = make_float2(e, sum);
    }
    if constexpr (kSeeds) {  // lanes 2i and 2i + 1 hold a group of 16
      const int q = terms + __shfl_xor_sync(0xffffffffu, terms, 1);
      if (lane % 2 == 0) reinterpret_cast<int*>(words + X::kSeedAt)[c * 16 + lane / 2] = -32 * q;
    }
  }
  __syncwarp();
  return {words};
}

// A run's 32 bytes at p (two 16-byte pieces) as eight words, piece `first` first
// (piece_order): the order in which code words and x's terms meet.
__device__ __forceinline__ void run_words(const uint4* p, int first, uint32_t (&w)[8]) {
  const uint4 a = p[first], b = p[first ^ 1];
  w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w, w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
}

// Σ over the 32 codes c (bytes of the eight words: pieces `first` and first ^ 1 of the
// run, 16 codes each) of c · (254 hi + lo).
__device__ __forceinline__ int run_dot_int8(const uint32_t (&code)[8], const uint4* hi, const uint4* lo, int first) {
  uint32_t hw[8], lw[8];
  run_words(hi, first, hw);
  run_words(lo, first, lw);
  int H = 0, L = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    H = __dp4a(static_cast<int>(code[i]), static_cast<int>(hw[i]), H);
    L = __dp4a(static_cast<int>(code[i]), static_cast<int>(lw[i]), L);
  }
  return 254 * H + L;
}

// acc (product_of's layout, token 0: lane 4g's acc[0] and acc[2], rows g and g + 8) +=
// the sums of lanes 2r (row r) and 2r + 1 (its other half).
__device__ __forceinline__ void to_mma_layout(float sum, float (&acc)[1][4], int lane) {
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  const int g = lane / 4;
  acc[0][0] += __shfl_sync(0xffffffffu, sum, 2 * g);
  acc[0][2] += __shfl_sync(0xffffffffu, sum, 2 * (g + 8));
}

// acc (product_of's layout) +=
// the warp's 16 staged Q4_K or Q5_K rows (stride int8_stride) · the staged token, over
// `count` chunks. Σ (d·sc·c - dmin·m)·x = d · Σ sc·e·Σ c·(254 hi + lo) - dmin · Σ m·Σ x
// per run. Q5_K's fifth bit of run s's element l is bit s of qh byte l (its 32 bytes
// after the scales, the codes after them).
template <DType T, int C>
__device__ __forceinline__ void product_int8(const uint8_t* slot, const Int8Token<C>& x, float (&acc)[1][4],
                                             int count, int /*shift*/) {
  static_assert(T == DType::Q4_K || T == DType::Q5_K);
  constexpr int kQs = T == DType::Q5_K ? 48 : 16;  // the codes' first byte in a block
  constexpr int kStride = int8_stride<T>(C), kBytes = chunk_bytes<T>();
  const int lane = threadIdx.x % 32, h = lane % 2, first = piece_order<T, C>(lane / 2);
  const uint8_t* row = slot + lane / 2 * kStride;
  float sum = 0;
#pragma unroll
  for (int c = 0; c < C; ++c) {
    if (c > 0 && c >= count) break;
    const uint8_t* b = row + c * kBytes;
    const uint4 head = *reinterpret_cast<const uint4*>(b);  // d, dmin, the 12 scale bytes (k_run's words)
    const uint32_t sc = h == 0 ? head.y & 0x3F3F3F3Fu : (head.w & 0x0F0F0F0Fu) | ((head.y >> 2) & 0x30303030u);
    const uint32_t mn = h == 0 ? head.z & 0x3F3F3F3Fu : ((head.w >> 4) & 0x0F0F0F0Fu) | ((head.z >> 2) & 0x30303030u);
    float scaled = 0, mins = 0;
    uint32_t qh[8] = {};  // Q5_K's fifth bits, in run_words' order (written out: its call reorders the Q5_K code)
    if constexpr (T == DType::Q5_K) {
      const auto* at = reinterpret_cast<const uint4*>(b + 16);
      const uint4 h0 = at[first], h1 = at[first ^ 1];
      const uint32_t words[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
#pragma unroll
      for (int i = 0; i < 8; ++i) qh[i] = words[i];
    }
#pragma unroll
    for (int g = 0; g < 2; ++g) {  // qs group 2h + g: runs 4h + 2g (low nibbles) and 4h + 2g + 1 (high)
      uint32_t w[8];
      run_words(reinterpret_cast<const uint4*>(b + kQs + 32 * (2 * h + g)), first, w);
#pragma unroll
      for (int nib = 0; nib < 2; ++nib) {
        const int k = 2 * g + nib;  // the run in the lane's half
        uint32_t code[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) code[i] = (w[i] >> (4 * nib)) & 0x0F0F0F0Fu;
        if constexpr (T == DType::Q5_K) {
          const int s = 4 * h + k;  // the run in the block: its bit of each qh byte to bit 4
#pragma unroll
          for (int i = 0; i < 8; ++i) code[i] |= ((qh[i] >> s) & 0x01010101u) << 4;
        }
        const int t = run_dot_int8(code, x.hi(c, h, k), x.lo(c, h, k), first);
        const float2 m = x.meta(c, 4 * h + k);
        scaled += m.x * static_cast<float>((sc >> (8 * k)) & 0xFFu) * static_cast<float>(t);
        mins += static_cast<float>((mn >> (8 * k)) & 0xFFu) * m.y;
      }
    }
    sum += half_to_float(head.x & 0xffff) * scaled - half_to_float(head.x >> 16) * mins;
  }
  to_mma_layout(sum, acc, lane);
}

// N words from p, which is 2-byte aligned: aligned loads and a funnel shift each.
template <int N>
__device__ __forceinline__ void load_words(const uint8_t* p, uint32_t (&out)[N]) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  const auto* w = reinterpret_cast<const uint32_t*>(at & ~uintptr_t{3});
  const uint32_t s = (at & 3) * 8;
  uint32_t prev = w[0];
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const uint32_t next = w[i + 1];
    out[i] = __funnelshift_r(prev, next, s);
    prev = next;
  }
}

// Q6_K (Dequant's layout): half h of a block holds ql bytes 64h .. (runs k and k + 2 of
// the half in their low and high nibbles, k = 0, 1, 32 bytes each), qh bytes 128 + 32h
// .. (run k's two high bits at bits 2k), and an int8 scale per 16 elements at 192 + 8h.
// The lane's row starts `shift` bytes into its staged copy, so words are read on 4-byte
// boundaries and funnel-shifted. Σ d·sc·(c - 32)·x = d · Σ e · Σ sc · (Σ c·(254 hi + lo)
// - 32 Σ (254 hi + lo)) over the groups of 16.
template <DType T, int C>
__device__ __forceinline__ void product_int8(const uint8_t* slot, const Int8Token<C, true>& x, float (&acc)[1][4],
                                             int count, int shift) {
  static_assert(T == DType::Q6_K);
  constexpr int kStride = int8_stride<T>(C), kBytes = chunk_bytes<T>();
  const int lane = threadIdx.x % 32, h = lane % 2;
  const uint8_t* row = slot + lane / 2 * kStride + shift;
  float sum = 0;
#pragma unroll
  for (int c = 0; c < C; ++c) {
    if (c > 0 && c >= count) break;
    const uint8_t* b = row + c * kBytes;
    uint32_t ql[16], qh[8], sc[2];
    load_words(b + 64 * h, ql);
    load_words(b + 128 + 32 * h, qh);
    load_words(b + 192 + 8 * h, sc);
    float part = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint4* hi = x.hi(c, h, k);
      const uint4* lo = x.lo(c, h, k);
      const int2 seed = x.seeds(c, 4 * h + k);
      float groups = 0;
#pragma unroll
      for (int g = 0; g < 2; ++g) {  // elements 16g .. 16g + 15 of the run
        const uint4 hv = hi[g], lv = lo[g];
        const uint32_t hw[4] = {hv.x, hv.y, hv.z, hv.w}, lw[4] = {lv.x, lv.y, lv.z, lv.w};
        int H = 0, L = g == 0 ? seed.x : seed.y;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const uint32_t low = (ql[8 * (k & 1) + 4 * g + i] >> (4 * (k >> 1))) & 0x0F0F0F0Fu;
          const uint32_t q = qh[4 * g + i], high = (k < 2 ? q << (4 - 2 * k) : q >> (2 * k - 4)) & 0x30303030u;
          const int code = static_cast<int>(low | high);
          H = __dp4a(code, static_cast<int>(hw[i]), H);
          L = __dp4a(code, static_cast<int>(lw[i]), L);
        }
        const int j = 2 * k + g;  // the group's scale byte in the half
        const float scale = static_cast<float>(static_cast<int8_t>(sc[j / 4] >> (8 * (j % 4))));
        groups += scale * static_cast<float>(254 * H + L);
      }
      part += x.meta(c, 4 * h + k).x * groups;
    }
    sum += half_to_float(*reinterpret_cast<const uint16_t*>(b + 208)) * part;
  }
  to_mma_layout(sum, acc, lane);
}

}  // namespace zinc::cuda::few
