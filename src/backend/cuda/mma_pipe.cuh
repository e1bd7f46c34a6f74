// The pipelined tensor-core tile product of the prefill kernels (matmul_tiled.cu,
// moe_grouped.cu) for every quantized weight type (the list: for_type): a block of 8
// warps computes 128 weight rows x BN tokens (f16 token rows, f32 accumulate).
//
// The raw weight bytes of a k-chunk (one K-quant super-block of 256, four blocks of
// 32 (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL), eight MXFP4 blocks) and the token rows'
// chunk are copied to shared memory with cp.async, up to 4 chunks in flight, so global
// latency overlaps the math of earlier chunks; one barrier per chunk. Each warp owns 16 weight rows and every
// token of the tile, and each thread dequantizes its own mma.sync A fragments
// straight from the staged bytes: every weight element is dequantized once per
// block, with no weight tile in shared memory and no barrier between the k-steps of 64.
//
// MXFP4 rows (17-byte blocks: gpt-oss's 2880-element rows are 1530 bytes) are not even
// 4-byte aligned, nor are Q6_K's 210-byte or Q3_K's 110-byte super-blocks, and Q2_K's
// 84 bytes are not whole 8-byte pieces, so each row's chunk is copied in 16-byte pieces
// from the boundary below it and read at its offset ("shifted"); MXFP4 rows need only
// k % 64 == 0 (a last chunk of 64 to 192 elements computes only its k-steps).
//
// Why f16 and not bf16: a 4- or 8-bit code ORed under the exponent of 1024.0 is an
// exact f16, so two codes become f16 with one LOP3 or PRMT, and one HSUB2 + HFMA2
// scale them: about 2 instructions per element, against ~5 through f32 and a
// conversion, which made these tiles issue-bound rather than tensor-bound. f16 also
// keeps 3 more mantissa bits than bf16; token rows are clamped to f16's range.
//
// k order: a product sums over k, so any order works as long as weights and tokens
// agree. Thread t (lane % 4) takes elements [8t, 8t + 8) and [32 + 8t, 40 + 8t) of
// each 64-step (for K-quants the low and high nibbles of the same 8 bytes). The
// codes of elements (e, e + 2) share a 32-bit word's two halves, as do (e + 1,
// e + 3), so those pairs are what the fragments hold: token rows are stored with
// each group of 4 elements permuted to (0, 2, 1, 3) (to_f16_pairs), and a 16-byte
// load of 8 permuted elements then matches the 4 weight words of the same 8.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dequant.cuh"
#include "backend/cuda/mma_tile.cuh"

namespace zinc::cuda::pipe {

constexpr int kThreads = 256;
constexpr int kRows = 128;  // 16 per warp
// Shared memory of one block, so that two blocks fit on an H100/H200 multiprocessor
// (228 KiB, 1 KiB reserved per block).
constexpr int kSmemBudget = 113 * 1024;

// Rows staged from the 16-byte boundary below each chunk and read at their offset.
template <DType T>
inline constexpr bool kShifted = T == DType::MXFP4 || T == DType::Q6_K || T == DType::Q3_K || T == DType::Q2_K;
// The alignment a shifted type's Frag needs of its rows (the widest load it makes).
template <DType T>
inline constexpr int kRowAlign = T == DType::Q2_K ? 4 : T == DType::MXFP4 ? 1 : 2;
// The most tokens a tile of type T takes: Q6_K's staged rows leave room for two stages
// of 32 tokens, not of 64.
template <DType T>
inline constexpr int kMaxTokens = T == DType::Q6_K ? 32 : 64;

// Staged bytes per weight row: the chunk padded (by at most 32) to 32 or 96 mod 128,
// so the 4 rows of a half-warp's 8-byte loads fall on distinct banks.
constexpr int a_stride(int chunk_bytes) {
  const int s = (chunk_bytes + 15) / 16 * 16;
  for (int p = s; p <= s + 32; p += 16)
    if (p % 128 == 32 || p % 128 == 96) return p;
  return s;
}

template <DType T, int BN>
struct Config {
  static constexpr int kChunk = Dequant<T>::kBlockElems == 256 || kShifted<T> ? 256 : 128;  // k per stage
  static constexpr int kChunkBytes = kChunk / Dequant<T>::kBlockElems * Dequant<T>::kBlockBytes;
  static constexpr int kPiece = kShifted<T> || kChunkBytes % 16 == 0 ? 16 : 8;  // cp.async size for weights
  // Per weight row; a shifted chunk starts up to 15 bytes into its first piece.
  static constexpr int kAPieces = kShifted<T> ? (kChunkBytes + 15 + 15) / 16 : kChunkBytes / kPiece;
  static constexpr int kAStride = a_stride(kAPieces * kPiece);
  static constexpr int kBPieces = kChunk / 8;                    // 16-byte pieces per token row
  static constexpr int kStageBytes = kRows * kAStride + BN * kChunk * 2;
  static constexpr int kPtrBytes = (kRows + BN) * 8;             // the tile's row pointers
  static constexpr int kStages = std::min(4, (kSmemBudget - kPtrBytes) / kStageBytes);
  static constexpr int kSmemBytes = kStages * kStageBytes + kPtrBytes;
  static_assert((kShifted<T> || kChunkBytes % 8 == 0) && kStages >= 2 && BN % 16 == 0 && BN <= kMaxTokens<T>);
};

// Whether rows of `row_bytes` at `data` with k elements can be staged in pieces.
template <DType T>
bool fits(const void* data, size_t row_bytes, int64_t k) {
  using C = Config<T, 16>;
  if constexpr (kShifted<T>)
    return k % 64 == 0 && k % Dequant<T>::kBlockElems == 0 && reinterpret_cast<uintptr_t>(data) % kRowAlign<T> == 0 &&
           row_bytes % kRowAlign<T> == 0;
  return k % C::kChunk == 0 && row_bytes % C::kPiece == 0 && reinterpret_cast<uintptr_t>(data) % C::kPiece == 0;
}

// Copies `Bytes` from global src to shared dst, or zeros when !valid (src then unread).
template <int Bytes>
__device__ __forceinline__ void cp_async(void* dst, const void* src, bool valid) {
  const auto d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  if constexpr (Bytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(valid ? 16 : 0));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(d), "l"(src), "n"(Bytes),
                 "r"(valid ? Bytes : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(Pending));
}

// Token row j's 8-element group c sits at group c ^ 4 in odd rows: the 8 lanes of a
// 16-byte load phase (two rows, 4 groups each) then hit 8 distinct bank quads.
__device__ __forceinline__ int b_group(int j, int c) { return c ^ ((j & 1) << 2); }

__device__ __forceinline__ void mma_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ __half2 as_half2(uint32_t w) { return *reinterpret_cast<const __half2*>(&w); }
__device__ __forceinline__ uint32_t as_u32(__half2 h) { return *reinterpret_cast<const uint32_t*>(&h); }
// Two codes c0 | c1 << 16 (each < 1024) ORed under 1024.0's exponent, minus `bias`:
// exactly the f16 pair (c0 - bias + 1024, c1 - bias + 1024) - 1024.
__device__ __forceinline__ __half2 codes_f16(uint32_t magic_codes, uint32_t bias2) {
  return __hsub2(as_half2(magic_codes), as_half2(bias2));
}
constexpr uint32_t kMagic = 0x64006400u;  // f16 1024.0 in both halves
// (x & mask) | kMagic in one LOP3. Written as C++, ptxas emits an AND and an OR, since
// one LOP3 takes one immediate; here kMagic comes in a register.
__device__ __forceinline__ uint32_t masked_magic(uint32_t x, uint32_t mask) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(x), "r"(mask), "r"(kMagic));
  return r;
}

// A weight row's staged chunk as mma A fragments: load(row, s, l, scale(row, s))
// gives elements e = 32s + l .. e + 7 of the chunk (s: its 32-element block or
// sub-block, l a multiple of 8) as the f16 pairs (e, e+2), (e+1, e+3), (e+4, e+6),
// (e+5, e+7); scale(row, s) is the block's packed scale.
template <DType T> struct Frag;

// Eight values stored as value + 128, a byte each (bytes e..e+3 in x, e+4..e+7 in y),
// times d as those f16 pairs.
__device__ __forceinline__ void biased_bytes_frag(uint32_t x, uint32_t y, __half2 d, uint32_t (&out)[4]) {
  const uint32_t bias = 0x64806480u;  // 1024 + 128
  out[0] = as_u32(__hmul2(codes_f16(__byte_perm(x, 0x64646464u, 0x4240), bias), d));
  out[1] = as_u32(__hmul2(codes_f16(__byte_perm(x, 0x64646464u, 0x4341), bias), d));
  out[2] = as_u32(__hmul2(codes_f16(__byte_perm(y, 0x64646464u, 0x4240), bias), d));
  out[3] = as_u32(__hmul2(codes_f16(__byte_perm(y, 0x64646464u, 0x4341), bias), d));
}

// The f16 at p in both halves of a word.
__device__ __forceinline__ uint32_t d_pair(const uint8_t* p) {
  const uint32_t d = *reinterpret_cast<const uint16_t*>(p);
  return d | (d << 16);
}

// Q8_0 chunk: 4 blocks of (f16 d, 32 int8). Scale word: d in both halves.
template <> struct Frag<DType::Q8_0> {
  __device__ static uint32_t scale(const uint8_t* row, int s) { return d_pair(row + 34 * s); }
  __device__ static void load(const uint8_t* row, int s, int l, uint32_t scale, uint32_t (&out)[4]) {
    const uint2 q = load_bytes8<2>(row + 34 * s + 2 + l);
    biased_bytes_frag(q.x ^ 0x80808080u, q.y ^ 0x80808080u, as_half2(scale), out);  // int8 to unsigned + 128
  }
};

// (d · sc, -dmin · m) for the f16 pair (d, dmin) at dm, each product rounded once to f16.
__device__ __forceinline__ uint32_t dmin_word(const uint8_t* dm, uint32_t sc, uint32_t m) {
  const uint32_t d_neg_dmin = *reinterpret_cast<const uint32_t*>(dm) ^ 0x80000000u;
  return as_u32(__hmul2(as_half2(d_neg_dmin), codes_f16(sc | (m << 16) | kMagic, kMagic)));
}
// Q4_K / Q5_K chunk: one super-block. Scale word: (d · sc, -dmin · m) of sub-block s.
__device__ __forceinline__ uint32_t k_scale_word(const uint8_t* block, int s) {
  const uint8_t* q = block + 4;
  uint32_t sc, m;
  if (s < 4) {
    sc = q[s] & 63, m = q[s + 4] & 63;
  } else {
    sc = (q[s + 4] & 15) | ((q[s - 4] >> 6) << 4);
    m = (q[s + 4] >> 4) | ((q[s] >> 6) << 4);
  }
  return dmin_word(block, sc, m);
}
// c · scale.x + scale.y for both halves.
__device__ __forceinline__ uint32_t k_value(uint32_t magic_codes, uint32_t scale) {
  const __half2 sm = as_half2(scale);
  return as_u32(__hfma2(codes_f16(magic_codes, kMagic), __low2half2(sm), __high2half2(sm)));
}

// The 4-bit codes of elements e..e+7 of a 32-element block packed as Q4_0's (element
// j the low nibble of byte j, j + 16 the high one; q: bytes (e % 16)..+7, high: e >= 16)
// as the pairs (e, e+2), (e+1, e+3), (e+4, e+6), (e+5, e+7) in bits 0-3 and 16-19.
__device__ __forceinline__ void nibble_pairs(uint2 q, bool high, uint32_t (&c)[4]) {
  const int shift = high ? 4 : 0;
  c[0] = (q.x >> shift) & 0x000F000Fu, c[1] = (q.x >> (shift + 8)) & 0x000F000Fu;
  c[2] = (q.y >> shift) & 0x000F000Fu, c[3] = (q.y >> (shift + 8)) & 0x000F000Fu;
}
// Q5_0 / Q5_1's fifth bits of those pairs: bit e + o of qh (o = 0, 1, 4, 5) and bit
// e + o + 2, placed at bits 4 and 20.
__device__ __forceinline__ void fifth_bits(uint32_t qh, int e, uint32_t (&c)[4]) {
  const uint32_t h = qh >> e;
  const auto place = [](uint32_t b) { return ((b << 4) & 0x10u) | ((b << 18) & 0x100000u); };
  c[0] |= place(h), c[1] |= place(h >> 1), c[2] |= place(h >> 4), c[3] |= place(h >> 5);
}
// Codes c (bits 0-4 and 16-20 of each pair) minus `bias`, times the f16 pair d.
template <uint32_t kBias>
__device__ __forceinline__ void signed_frag(const uint32_t (&c)[4], __half2 d, uint32_t (&out)[4]) {
  constexpr uint32_t bias = (0x6400u + kBias) * 0x10001u;  // 1024 + kBias in both halves
#pragma unroll
  for (int i = 0; i < 4; ++i) out[i] = as_u32(__hmul2(codes_f16(c[i] | kMagic, bias), d));
}

// The IQ4_NL code book's entries for the low (l < 16) or high nibbles of q, times d.
__device__ __forceinline__ void iq4_frag(uint2 q, int l, __half2 d, uint32_t (&out)[4]) {
  const int shift = l & 16 ? 4 : 0;
  constexpr CodeBook16 book = kIq4nlBook;  // a copy in registers (device code cannot refer to the global)
  biased_bytes_frag(book_bytes4(book, (q.x >> shift) & 0x0F0F0F0Fu), book_bytes4(book, (q.y >> shift) & 0x0F0F0F0Fu), d,
                    out);  // entries are value + 128
}

// Q4_0 / Q5_0 / IQ4_NL chunks: 4 blocks of f16 d, (Q5_0: 32 fifth bits,) 16 bytes of
// codes c; d · (c - 8), d · (c - 16), d · table[c]. Q4_1 / Q5_1: f16 d and m first,
// d · c + m. Scale word: d in both halves, or (d, m) as stored.
template <> struct Frag<DType::Q4_0> {
  __device__ static uint32_t scale(const uint8_t* row, int s) { return d_pair(row + 18 * s); }
  __device__ static void load(const uint8_t* row, int s, int l, uint32_t scale, uint32_t (&out)[4]) {
    uint32_t c[4];
    nibble_pairs(load_bytes8<2>(row + 18 * s + 2 + (l & 15)), l >= 16, c);
    signed_frag<8>(c, as_half2(scale), out);
  }
};
template <> struct Frag<DType::Q5_0> {
  __device__ static uint32_t scale(const uint8_t* row, int s) { return d_pair(row + 22 * s); }
  __device__ static void load(const uint8_t* row, int s, int l, uint32_t scale, uint32_t (&out)[4]) {
    const uint8_t* b = row + 22 * s;
    uint32_t c[4];
    nibble_pairs(load_bytes8<2>(b + 6 + (l & 15)), l >= 16, c);
    fifth_bits(load_u16(b + 2) | (static_cast<uint32_t>(load_u16(b + 4)) << 16), l, c);
    signed_frag<16>(c, as_half2(scale), out);
  }
};
template <> struct Frag<DType::Q4_1> {
  __device__ static uint32_t scale(const uint8_t* row, int s) {
    return *reinterpret_cast<const uint32_t*>(row + 20 * s);
  }
  __device__ static void load(const uint8_t* row, int s, int l, uint32_t scale, uint32_t (&out)[4]) {
    uint32_t c[4];
    nibble_pairs(load_bytes8<4>(row + 20 * s + 4 + (l & 15)), l >= 16, c);
#pragma unroll
    for (int i = 0; i < 4; ++i) out[i] = k_value(c[i] | kMagic, scale);
  }
};
template <> struct Frag<DType::Q5_1> {
  __device__ static uint32_t scale(const uint8_t* row, int s) {
    return *reinterpret_cast<const uint32_t*>(row + 24 * s);
  }
  __device__ static void load(const uint8_t* row, int s, int l, uint32_t scale, uint32_t (&out)[4]) {
    const uint8_t* b = row + 24 * s;
    uint32_t c[4];
    nibble_pairs(*reinterpret_cast<const uint2*>(b + 8 + (l & 15)), l >= 16, c);
    fifth_bits(*reinterpret_cast<const uint32_t*>(b + 4), l, c);
#pragma unroll
    for (int i = 0; i < 4; ++i) out[i] = k_value(c[i] | kMagic, scale);
  }
};
template <> struct Frag<DType::IQ4_NL> {
  __device__ static uint32_t scale(const uint8_t* row, int s) { return Frag<DType::Q4_0>::scale(row, s); }
  __device__ static void load(const uint8_t* row, int s, int l, uint32_t scale, uint32_t (&out)[4]) {
    iq4_frag(load_bytes8<2>(row + 18 * s + 2 + (l & 15)), l, as_half2(scale), out);
  }
};

template <> struct Frag<DType::Q4_K> {
  __device__ static uint32_t scale(const uint8_t* row, int s) { return k_scale_word(row, s); }
  __device__ static void load(const uint8_t* row, int s, int l, uint32_t scale, uint32_t (&out)[4]) {
    const int shift = 4 * (s & 1);
    const uint2 q = *reinterpret_cast<const uint2*>(row + 16 + 32 * (s / 2) + l);
    out[0] = k_value(masked_magic(q.x >> shift, 0x000F000Fu), scale);
    out[1] = k_value(masked_magic(q.x >> (shift + 8), 0x000F000Fu), scale);
    out[2] = k_value(masked_magic(q.y >> shift, 0x000F000Fu), scale);
    out[3] = k_value(masked_magic(q.y >> (shift + 8), 0x000F000Fu), scale);
  }
};

template <> struct Frag<DType::Q5_K> {
  __device__ static uint32_t scale(const uint8_t* row, int s) { return k_scale_word(row, s); }
  __device__ static void load(const uint8_t* row, int s, int l, uint32_t scale, uint32_t (&out)[4]) {
    const int shift = 4 * (s & 1);
    const uint2 q = *reinterpret_cast<const uint2*>(row + 48 + 32 * (s / 2) + l);
    const uint2 h = *reinterpret_cast<const uint2*>(row + 16 + l);
    // Bit s of bytes 0 and 2 of a high-bit word to bits 4 and 20, of bytes 1 and 3 likewise, under kMagic.
    auto high02 = [&](uint32_t w) { return masked_magic(s <= 4 ? w << (4 - s) : w >> (s - 4), 0x00100010u); };
    auto high13 = [&](uint32_t w) { return masked_magic(w >> (s + 4), 0x00100010u); };
    out[0] = k_value(((q.x >> shift) & 0x000F000Fu) | high02(h.x), scale);
    out[1] = k_value(((q.x >> (shift + 8)) & 0x000F000Fu) | high13(h.x), scale);
    out[2] = k_value(((q.y >> shift) & 0x000F000Fu) | high02(h.y), scale);
    out[3] = k_value(((q.y >> (shift + 8)) & 0x000F000Fu) | high13(h.y), scale);
  }
};

// 8 bytes at any address of shared memory: two funnel shifts over the 3 words around them.
__device__ __forceinline__ uint2 load_unaligned8(const uint8_t* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  const auto* w = reinterpret_cast<const uint32_t*>(a & ~uintptr_t{3});
  const uint32_t sh = 8 * (a & 3);
  return make_uint2(__funnelshift_r(w[0], w[1], sh), __funnelshift_r(w[1], w[2], sh));
}

// Q6_K chunk: one super-block of ql[128] (low 4 bits), qh[64] (high 2 bits), 16 int8
// scales (one per 16 elements) and f16 d. Element 128h + 32m + j (m < 4, j < 32) is
// nibble m / 2 of ql[64h + 32(m % 2) + j] with bits 2m, 2m + 1 of qh[32h + j] above it,
// a 6-bit code c for d · scale · (c - 32). The chunk lies at an even offset of its
// staged copy. q6k_frag: elements 32s + l .. + 7 (within one scale's 16) times
// scale_of(), the f16 pair of their d · scale (taken once the code bytes are loading).
template <class ScaleOf>
__device__ __forceinline__ void q6k_frag(const uint8_t* chunk, int s, int l, ScaleOf scale_of, uint32_t (&out)[4]) {
  const int h = s / 4, m = s % 4, low = 4 * (m / 2), high = 2 * m;
  const uint2 q = load_unaligned8(chunk + 64 * h + 32 * (m % 2) + l);
  const uint2 b = load_unaligned8(chunk + 128 + 32 * h + l);
  const __half2 d = scale_of();
  const uint32_t bias = 0x64206420u;  // 1024 + 32
  // Bytes `at` / 8 and that + 2 of a word: 6-bit codes under 1024.0's exponent.
  const auto code = [&](uint32_t ql, uint32_t qh, int at) {
    return ((ql >> (low + at)) & 0x000F000Fu) | (((qh >> (high + at)) & 0x00030003u) << 4) | kMagic;
  };
  out[0] = as_u32(__hmul2(codes_f16(code(q.x, b.x, 0), bias), d));
  out[1] = as_u32(__hmul2(codes_f16(code(q.x, b.x, 8), bias), d));
  out[2] = as_u32(__hmul2(codes_f16(code(q.y, b.y, 0), bias), d));
  out[3] = as_u32(__hmul2(codes_f16(code(q.y, b.y, 8), bias), d));
}
// Scale word: d · scale of the sub-block's two halves of 16, each product rounded once
// to f16 (d · scale below 2^-14 keeps about as many bits as bf16 would).
template <> struct Frag<DType::Q6_K> {
  __device__ static uint32_t scale(const uint8_t* row, int s) {
    const uint32_t sc = *reinterpret_cast<const uint16_t*>(row + 192 + 2 * s) ^ 0x8080u;  // int8 to unsigned + 128
    const uint32_t d = d_pair(row + 208);
    const uint32_t codes = (sc & 0xFFu) | ((sc & 0xFF00u) << 8) | kMagic;
    return as_u32(__hmul2(as_half2(d), codes_f16(codes, 0x64806480u)));  // bias 1024 + 128
  }
  __device__ static void load(const uint8_t* row, int s, int l, uint32_t scale, uint32_t (&out)[4]) {
    q6k_frag(row, s, l, [&] { return l < 16 ? __low2half2(as_half2(scale)) : __high2half2(as_half2(scale)); }, out);
  }
};

// Q3_K chunk: one super-block of hmask[32], qs[64], 12 bytes of 6-bit scales and f16 d.
// Element 128h + 32m + j (m < 4, j < 32) has the code bits 2m, 2m + 1 of qs[32h + j] with
// bit 4h + m of hmask[j] above them (c < 8) for d · (scale - 32) · (c - 4), the scale
// of its 16: scale i's low 4 bits are byte i's low nibble (i < 8) or byte i - 8's high
// one, its top 2 bits those at 2 (i / 4) of byte 8 + i % 4. Scale word: d · (scale - 32)
// of sub-block s's two halves, each product rounded once to f16. Its rows are 2-byte aligned.
template <> struct Frag<DType::Q3_K> {
  __device__ static uint32_t scale(const uint8_t* row, int s) {
    const uint8_t* sc = row + 96;
    const int i = 2 * s, top = 2 * (i / 4);  // scales i and i + 1
    const uint32_t lo0 = i < 8 ? sc[i] & 15 : sc[i - 8] >> 4, lo1 = i < 8 ? sc[i + 1] & 15 : sc[i - 7] >> 4;
    const uint32_t s0 = lo0 | ((sc[8 + i % 4] >> top) & 3) << 4, s1 = lo1 | ((sc[9 + i % 4] >> top) & 3) << 4;
    return as_u32(__hmul2(as_half2(d_pair(row + 108)), codes_f16(s0 | (s1 << 16) | kMagic, 0x64206420u)));  // 1024 + 32
  }
  __device__ static void load(const uint8_t* row, int s, int l, uint32_t scale, uint32_t (&out)[4]) {
    const int low = 2 * (s % 4);
    const uint2 q = load_unaligned8(row + 32 + 32 * (s / 4) + l);
    const uint2 h = load_unaligned8(row + l);
    const auto code = [&](uint32_t ql, uint32_t hm, int at) {
      return ((ql >> (low + at)) & 0x00030003u) | (((hm >> (s + at)) & 0x00010001u) << 2);
    };
    const uint32_t c[4] = {code(q.x, h.x, 0), code(q.x, h.x, 8), code(q.y, h.y, 0), code(q.y, h.y, 8)};
    signed_frag<4>(c, l < 16 ? __low2half2(as_half2(scale)) : __high2half2(as_half2(scale)), out);
  }
};

// Q2_K chunk: one super-block of 16 scale bytes (a 4-bit scale, and a 4-bit minimum
// above it, for each 16 elements), qs[64], f16 d and dmin. Element 128h + 32m + j is
// bits 2m, 2m + 1 of qs[32h + j], a code c for d · scale · c - dmin · minimum, with
// scale byte 8h + 2m + j / 16. Scale word: sub-block s's two scale bytes; load forms
// (d · scale, -dmin · minimum) of its half as Q4_K's scale word. Its rows are 4-byte aligned.
template <> struct Frag<DType::Q2_K> {
  __device__ static uint32_t scale(const uint8_t* row, int s) {
    return *reinterpret_cast<const uint16_t*>(row + 2 * s);
  }
  __device__ static void load(const uint8_t* row, int s, int l, uint32_t scale, uint32_t (&out)[4]) {
    const uint32_t b = (l < 16 ? scale : scale >> 8) & 0xFFu;
    const uint32_t word = dmin_word(row + 80, b & 15, b >> 4);
    const uint2 q = load_bytes8<4>(row + 16 + 32 * (s / 4) + l);
    const int low = 2 * (s % 4);
    out[0] = k_value(masked_magic(q.x >> low, 0x00030003u), word);
    out[1] = k_value(masked_magic(q.x >> (low + 8), 0x00030003u), word);
    out[2] = k_value(masked_magic(q.y >> low, 0x00030003u), word);
    out[3] = k_value(masked_magic(q.y >> (low + 8), 0x00030003u), word);
  }
};

// IQ4_XS chunk: one super-block of f16 d, 16 bits of high scale bits, 4 bytes of low
// scale nibbles and qs[128]. Sub-block s's scale is (low nibble s | high bits s << 4) -
// 32; its element j is the IQ4_NL table's entry at the low nibble of qs[16s + j]
// (j < 16) or the high one of qs[16s + j - 16]. Scale word: d · scale in both halves,
// rounded once to f16.
template <> struct Frag<DType::IQ4_XS> {
  __device__ static uint32_t scale(const uint8_t* row, int s) {
    const uint32_t low = (row[4 + s / 2] >> (4 * (s % 2))) & 15u;
    const uint32_t high = (*reinterpret_cast<const uint16_t*>(row + 2) >> (2 * s)) & 3u;
    const uint32_t ls = low | (high << 4);
    return as_u32(__hmul2(as_half2(d_pair(row)), codes_f16(ls | (ls << 16) | kMagic, 0x64206420u)));  // 1024 + 32
  }
  __device__ static void load(const uint8_t* row, int s, int l, uint32_t scale, uint32_t (&out)[4]) {
    iq4_frag(*reinterpret_cast<const uint2*>(row + 8 + 16 * s + (l & 15)), l, as_half2(scale), out);
  }
};

// MXFP4 chunk: 8 blocks of (E8M0 exponent e, 16 bytes of 4-bit E2M1 codes; element j
// the low nibble of byte j, element j + 16 its high nibble). A code's 3 magnitude
// bits placed at f16 bits 9-11 and its sign at bit 15 are exactly its E2M1 value
// (0, 0.5, 1, 1.5, 2, 3, 4, 6) times 2^-14, the subnormal codes included; ggml's
// value is twice the E2M1 value times 2^(e - 128), so the scale word is 2^(e - 113)
// in both halves. The products are the weights as f16 numbers: exact for e in
// 104..128 (blocks whose weights lie between 2^-24 and 12 in magnitude); below, the
// small ones round to f16 subnormals or 0; above 128 the scale is infinite, so such
// a file shows NaN rather than a quietly wrong product.
template <> struct Frag<DType::MXFP4> {
  __device__ static uint32_t scale(const uint8_t* row, int s) {
    const int e = row[17 * s];
    const uint32_t h = e > 128 ? 0x7C00u
                       : e >= 99 ? static_cast<uint32_t>(e - 98) << 10
                       : e >= 89 ? 1u << (e - 89)
                                 : 0u;
    return h | (h << 16);
  }
  // The codes in bits 0-3 and 16-19 of w (the rest ignored) as an f16 pair.
  __device__ static uint32_t e2m1_pair(uint32_t w) { return ((w << 9) & 0x0E000E00u) | ((w << 12) & 0x80008000u); }
  __device__ static void load(const uint8_t* row, int s, int l, uint32_t scale, uint32_t (&out)[4]) {
    const uint2 q = load_unaligned8(row + 17 * s + 1 + (l & 15));
    const int shift = l & 16 ? 4 : 0;
    const uint32_t x = q.x >> shift, y = q.y >> shift;
    const __half2 d = as_half2(scale);
    out[0] = as_u32(__hmul2(as_half2(e2m1_pair(x)), d));
    out[1] = as_u32(__hmul2(as_half2(e2m1_pair(x >> 8)), d));
    out[2] = as_u32(__hmul2(as_half2(e2m1_pair(y)), d));
    out[3] = as_u32(__hmul2(as_half2(e2m1_pair(y >> 8)), d));
  }
};

template <DType T, int BN>
struct Tile {
  using C = Config<T, BN>;
  uint8_t* smem;
  const uint8_t* const* arows;        // [kRows], null: zeros
  const __half* const* brows;  // [BN], null: zeros
  const void* any;                    // a valid global address for the zero copies
  int k;                              // elements per row

  __device__ uint8_t* stage(int i) const { return smem + i * C::kStageBytes; }

  // How far a weight row's chunk starts past a 16-byte boundary: where it starts in its staged copy (shifted).
  __device__ static int shift(const uint8_t* row, int chunk) {
    return static_cast<int>((reinterpret_cast<uintptr_t>(row) + static_cast<size_t>(chunk) * C::kChunkBytes) % 16);
  }

  __device__ void issue(int chunk, uint8_t* st) const {
    issue_weights(chunk, st);
    issue_tokens(chunk, st);
  }

  __device__ void issue_weights(int chunk, uint8_t* st) const {
    const size_t row_bytes = static_cast<size_t>(k) / Dequant<T>::kBlockElems * Dequant<T>::kBlockBytes;
#pragma unroll
    for (int q = threadIdx.x; q < kRows * C::kAPieces; q += kThreads) {
      const int r = q / C::kAPieces, p = q % C::kAPieces;
      const uint8_t* src = arows[r];
      const uint8_t* piece = nullptr;
      if (src) {
        const int64_t at = static_cast<int64_t>(chunk) * C::kChunkBytes + p * C::kPiece;
        if constexpr (kShifted<T>) {  // from the boundary below the chunk; pieces past the row's end are zeros
          const int64_t from = at - shift(src, chunk);
          if (from < static_cast<int64_t>(row_bytes)) piece = src + from;
        } else {
          piece = src + at;
        }
      }
      cp_async<C::kPiece>(st + r * C::kAStride + p * C::kPiece, piece ? piece : any, piece != nullptr);
    }
  }

  __device__ void issue_tokens(int chunk, uint8_t* st) const {
    auto* sb = reinterpret_cast<__half*>(st + kRows * C::kAStride);
#pragma unroll
    for (int q = threadIdx.x; q < BN * C::kBPieces; q += kThreads) {
      const int j = q / C::kBPieces, p = q % C::kBPieces;
      const __half* src = brows[j];
      const int e = chunk * C::kChunk + 8 * p;
      cp_async<16>(sb + j * C::kChunk + 8 * b_group(j, p), src && e < k ? src + e : any, src && e < k);
    }
  }

  // acc[nt][i]: rows 16·warp + lane / 4 + 8·(i / 2), token 8·nt + 2·(lane % 4) + i % 2.
  __device__ void compute(const uint8_t* st, int chunk, float (&acc)[BN / 8][4]) const {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
    const int r0 = 16 * warp + g, r1 = r0 + 8;
    const uint8_t* rows[2] = {st + r0 * C::kAStride, st + r1 * C::kAStride};
    if constexpr (kShifted<T>) {
      if (arows[r0]) rows[0] += shift(arows[r0], chunk);
      if (arows[r1]) rows[1] += shift(arows[r1], chunk);
    }
    const int left = k - chunk * C::kChunk;  // a shifted type's last chunk may be short
    const auto* sb = reinterpret_cast<const __half*>(st + kRows * C::kAStride);
#pragma unroll
    for (int j = 0; j < C::kChunk / 64; ++j) {
      if (kShifted<T> && 64 * j >= left) break;
      // The 4 scales of this step (rows g, g + 8 x runs 0, 1): lane t of the 4 that
      // share g decodes scale t, then they swap.
      const uint32_t mine = Frag<T>::scale(rows[t / 2], 2 * j + t % 2);
      uint32_t sc[4];
#pragma unroll
      for (int c = 0; c < 4; ++c) sc[c] = __shfl_sync(0xffffffffu, mine, (lane & ~3) | c);
      uint32_t v[2][2][4];  // [row][run]: words (e, e+2), (e+1, e+3), (e+4, e+6), (e+5, e+7)
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int run = 0; run < 2; ++run) Frag<T>::load(rows[r], 2 * j + run, 8 * t, sc[2 * r + run], v[r][run]);
      uint32_t a[4][4];
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const int run = m / 2, o = 2 * (m % 2);
        a[m][0] = v[0][run][o], a[m][1] = v[1][run][o], a[m][2] = v[0][run][o + 1], a[m][3] = v[1][run][o + 1];
      }
      const int e0 = 64 * j + 8 * t, e1 = e0 + 32;
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt) {
        const int tok = 8 * nt + g;
        const __half* row = sb + tok * C::kChunk;
        const uint4 b0 = *reinterpret_cast<const uint4*>(row + 8 * b_group(tok, e0 / 8));
        const uint4 b1 = *reinterpret_cast<const uint4*>(row + 8 * b_group(tok, e1 / 8));
        mma_f16(acc[nt], a[0], b0.x, b0.y);
        mma_f16(acc[nt], a[1], b0.z, b0.w);
        mma_f16(acc[nt], a[2], b1.x, b1.y);
        mma_f16(acc[nt], a[3], b1.z, b1.w);
      }
    }
  }
};

// The tile product over k elements: a_row(r) gives weight row r of the tile (r <
// kRows) and b_row(j) token row j (j < BN), null for padding; `any` is any valid
// global address. smem holds Config<T, BN>::kSmemBytes (dynamic shared memory).
// kPdl: the kernel was launched with PDL, and waits for the previous one (pdl_begin)
// after the first stages' weight copies are issued and before any token row is read.
template <DType T, int BN, bool kPdl = false, class ARow, class BRow>
__device__ __forceinline__ void product(uint8_t* smem, ARow a_row, BRow b_row, const void* any, int k,
                                        float (&acc)[BN / 8][4]) {
  using C = Config<T, BN>;
  auto** arows = reinterpret_cast<const uint8_t**>(smem + C::kStages * C::kStageBytes);
  auto** brows = reinterpret_cast<const __half**>(arows + kRows);
  for (int r = threadIdx.x; r < kRows; r += kThreads) arows[r] = a_row(r);
  for (int j = threadIdx.x; j < BN; j += kThreads) brows[j] = b_row(j);
#pragma unroll
  for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[nt][i] = 0.0f;
  __syncthreads();
  const Tile<T, BN> tile{smem, arows, brows, any, k};
  const int chunks = (k + C::kChunk - 1) / C::kChunk;
  if constexpr (kPdl) {
    // The first stages' weights, then (after the wait) their token rows, one commit
    // group per stage: the weights ride in stage 0's group.
#pragma unroll
    for (int s = 0; s < C::kStages - 1; ++s)
      if (s < chunks) tile.issue_weights(s, tile.stage(s));
    pdl_begin();
#pragma unroll
    for (int s = 0; s < C::kStages - 1; ++s) {
      if (s < chunks) tile.issue_tokens(s, tile.stage(s));
      cp_async_commit();
    }
  } else {
#pragma unroll
    for (int s = 0; s < C::kStages - 1; ++s) {
      if (s < chunks) tile.issue(s, tile.stage(s));
      cp_async_commit();
    }
  }
  for (int c = 0; c < chunks; ++c) {
    cp_async_wait<C::kStages - 2>();
    __syncthreads();  // chunk c is in for every thread; every thread is done with chunk c - 1's stage
    const int next = c + C::kStages - 1;
    if (next < chunks) tile.issue(next, tile.stage(next % C::kStages));
    cp_async_commit();
    tile.compute(tile.stage(c % C::kStages), c, acc);
  }
}

// Calls f(std::integral_constant<DType, T>{}) when t is a pipelined type T; returns
// whether it was one. The one list of these types.
template <class F>
bool for_type(DType t, F&& f) {
  switch (t) {
#define ZINC_PIPE_CASE(T) \
  case DType::T: f(std::integral_constant<DType, DType::T>{}); return true;
    ZINC_PIPE_CASE(Q8_0) ZINC_PIPE_CASE(Q4_0) ZINC_PIPE_CASE(Q4_1) ZINC_PIPE_CASE(Q5_0) ZINC_PIPE_CASE(Q5_1)
    ZINC_PIPE_CASE(IQ4_NL) ZINC_PIPE_CASE(MXFP4) ZINC_PIPE_CASE(Q2_K) ZINC_PIPE_CASE(Q3_K) ZINC_PIPE_CASE(Q4_K)
    ZINC_PIPE_CASE(Q5_K) ZINC_PIPE_CASE(Q6_K) ZINC_PIPE_CASE(IQ4_XS)
#undef ZINC_PIPE_CASE
    default: return false;
  }
}
// Whether rows of type t at `data` (row_bytes each, k elements) go through the tiles.
inline bool takes(DType t, const void* data, size_t row_bytes, int64_t k) {
  bool ok = false;
  for_type(t, [&](auto type) { ok = fits<decltype(type)::value>(data, row_bytes, k); });
  return ok;
}
// kMaxTokens and Config's k per chunk of a pipelined type t.
inline int max_tokens(DType t) {
  int m = 0;
  for_type(t, [&](auto type) { m = kMaxTokens<decltype(type)::value>; });
  return m;
}
inline int chunk_elems(DType t) {
  int c = 0;
  for_type(t, [&](auto type) { c = Config<decltype(type)::value, 16>::kChunk; });
  return c;
}

// Tile coordinates of acc[nt][i] (see Tile::compute).
__device__ __forceinline__ int acc_row(int i) {
  return 16 * (static_cast<int>(threadIdx.x) / 32) + (threadIdx.x % 32) / 4 + 8 * (i / 2);
}
__device__ __forceinline__ int acc_token(int nt, int i) { return 8 * nt + 2 * (threadIdx.x % 4) + i % 2; }

// Launches Kernel, a pipelined kernel of weight type T and BN tokens per tile, with
// its dynamic shared memory.
template <DType T, int BN, auto Kernel, class Params>
void launch(dim3 grid, cudaStream_t s, const Params& p) {
  constexpr int bytes = Config<T, BN>::kSmemBytes;
  allow_smem<Kernel>(bytes);
  Kernel<<<grid, kThreads, bytes, s>>>(p);
}
// The same for a kernel that waits for the previous one itself (pdl_wait: cuda_common.cuh).
template <DType T, int BN, auto Kernel, class Params>
void launch_pdl(dim3 grid, cudaStream_t s, const Params& p) {
  constexpr int bytes = Config<T, BN>::kSmemBytes;
  allow_smem<Kernel>(bytes);
  launch_pdl_smem(Kernel, grid, dim3(kThreads), bytes, s, p);
}

}  // namespace zinc::cuda::pipe

namespace zinc::cuda {
// y = x rounded to bf16; count a multiple of 8 (matmul_tiled.cu).
void to_bf16(const float* x, __nv_bfloat16* y, int64_t count, cudaStream_t s);
// y = x rounded to f16 (clamped to its range), each group of 4 stored in the order
// (0, 2, 1, 3): the token rows of the pipelined tiles. count a multiple of 8.
void to_f16_pairs(const float* x, __half* y, int64_t count, cudaStream_t s);
// y = x rounded to f16 (clamped), in order (DenseGemm's token rows). count a multiple of 8.
void to_f16(const float* x, __half* y, int64_t count, cudaStream_t s);
}  // namespace zinc::cuda
