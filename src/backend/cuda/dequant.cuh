// Weight formats on the device: for each block type, `load8` dequantizes the 8
// consecutive elements [e0, e0 + 8) of a row (e0 a multiple of 8) into floats. Every
// kernel that reads weights (matvec, tiled matmul, embed, MoE) is written once over
// this interface and instantiated per type by dispatch_weight_type().
//
// 8 elements never straddle a block or a sub-block, so each call reads one scale
// and 8 (or fewer) bytes of codes; loads are as wide as the block's alignment in a
// row allows (blocks are packed back to back, so a 34-byte Q8_0 block is only
// 2-byte aligned).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "backend/cuda/cuda_common.cuh"
#include "quant/blocks.h"
#include "quant/types.h"

namespace zinc::cuda {

// 8 bytes from p, which is aligned to `Align` bytes.
template <int Align>
__device__ __forceinline__ uint2 load_bytes8(const uint8_t* p) {
  if constexpr (Align >= 8) {
    return *reinterpret_cast<const uint2*>(p);
  } else if constexpr (Align >= 4) {
    const auto* w = reinterpret_cast<const uint32_t*>(p);
    return make_uint2(w[0], w[1]);
  } else if constexpr (Align >= 2) {
    const auto* h = reinterpret_cast<const uint16_t*>(p);
    return make_uint2(h[0] | (static_cast<uint32_t>(h[1]) << 16), h[2] | (static_cast<uint32_t>(h[3]) << 16));
  } else {
    uint32_t lo = 0, hi = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      lo |= static_cast<uint32_t>(p[i]) << (8 * i);
      hi |= static_cast<uint32_t>(p[4 + i]) << (8 * i);
    }
    return make_uint2(lo, hi);
  }
}
__device__ __forceinline__ uint16_t load_u16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }

// Nibble codes of elements e..e+7 of a 32-element group packed as in Q4_0
// (element j low nibble of qs[j], element j+16 high nibble of qs[j]).
template <int Align>
__device__ __forceinline__ uint2 nibble_bytes(const uint8_t* qs, int e) {
  return load_bytes8<Align>(qs + (e & 15));
}

// Integer codes to floats without I2F (a quarter-rate instruction on Hopper that
// bounds a matvec's issue rate): byte i of a code word placed under the exponent of
// 2^23 is exactly 2^23 + byte, so one PRMT and one FADD give byte - offset.
__device__ __forceinline__ float code_as_float(uint2 w, int i, float offset) {
  return __uint_as_float(__byte_perm(i < 4 ? w.x : w.y, 0x4B000000u, 0x7540 | (i & 3))) - (8388608.0f + offset);
}
// A code c < 128 stored as a byte with bit 7 set (0x80 | c), byte b of w, placed under
// 1.0's exponent: exactly 1 + c/128, in one PRMT. A dot product over such codes adds
// no FADD a code and recovers Σ c·x = 128·(Σ (1 + c/128)·x - Σ x) from the Σ x it
// holds (PERFORMANCE.md, session 21). A code stored as it is (bit 7 clear) comes out
// as half that, 0.5 + c/256, and Σ c·x = 256·(Σ (0.5 + c/256)·x - Σ x / 2): no LOP
// to mark it (session 24).
__device__ __forceinline__ float marked_code(uint32_t w, int b) {
  return __uint_as_float(__byte_perm(w, 0x3F000000u, 0x7044 | (b << 8)));
}
// The 4-bit codes of 8 packed bytes, low or high nibbles, one per byte.
__device__ __forceinline__ uint2 nibble_codes(uint2 b, bool high) {
  const int s = high ? 4 : 0;
  return make_uint2((b.x >> s) & 0x0F0F0F0Fu, (b.y >> s) & 0x0F0F0F0Fu);
}
// Bits [shift, shift + width) of each of 8 packed bytes, moved to bit `to`.
__device__ __forceinline__ uint2 byte_bits(uint2 b, int shift, uint32_t mask, int to) {
  return make_uint2(((b.x >> shift) & mask) << to, ((b.y >> shift) & mask) << to);
}

__device__ __forceinline__ float e8m0_half(uint8_t e) {
  return __uint_as_float(e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23));
}

// A code book of 16 small integers held in four words as value + 128, entry 4i + b in
// byte b of word i, read with PRMT: a table in constant memory serves a warp's
// different addresses one at a time, and the lanes' codes differ (gpt-oss-20b's MXFP4
// experts streamed at 0.14 TB/s so; PERFORMANCE.md, session 28).
struct CodeBook16 {
  uint32_t w[4];
};
constexpr CodeBook16 code_book(const int8_t (&v)[16]) {
  CodeBook16 t{};
  for (int i = 0; i < 16; ++i) t.w[i / 4] |= static_cast<uint32_t>(v[i] + 128) << (8 * (i % 4));
  return t;
}
inline constexpr CodeBook16 kIq4nlBook = code_book(kIq4nlValues), kMxfp4Book = code_book(kMxfp4Values);
// The entries (value + 128) of four codes at once, one code (0..15) a byte of c: the
// codes' low three bits as PRMT's four selectors pick from entries 0-7 and from 8-15,
// and bit 3 chooses.
__device__ __forceinline__ uint32_t book_bytes4(const CodeBook16& t, uint32_t c) {
  uint32_t s = c & 0x07070707u;
  s = (s | (s >> 4)) & 0x00FF00FFu;
  s = (s | (s >> 8)) & 0x0000FFFFu;
  const uint32_t lo = __byte_perm(t.w[0], t.w[1], s), hi = __byte_perm(t.w[2], t.w[3], s);
  const uint32_t upper = ((c >> 3) & 0x01010101u) * 0xFFu;
  return (lo & ~upper) | (hi & upper);
}
// The same as floats: each byte goes under the exponent of 2^23 (code_as_float's
// trick: no I2F).
__device__ __forceinline__ void book_values4(const CodeBook16& t, uint32_t c, float* v) {
  const uint32_t b = book_bytes4(t, c);
#pragma unroll
  for (int i = 0; i < 4; ++i) v[i] = __uint_as_float(__byte_perm(b, 0x4B000000u, 0x7540 | i)) - (8388608.0f + 128.0f);
}
// The entries of the eight codes of nibble_bytes' q: low nibbles, or high ones.
__device__ __forceinline__ void book_values8(const CodeBook16& t, uint2 q, bool high, float* v) {
  const int shift = high ? 4 : 0;
  book_values4(t, (q.x >> shift) & 0x0F0F0F0Fu, v);
  book_values4(t, (q.y >> shift) & 0x0F0F0F0Fu, v + 4);
}

template <DType T> struct Dequant;

template <> struct Dequant<DType::F32> {
  static constexpr int kBlockElems = 1, kBlockBytes = 4;
  __device__ static void load8(const uint8_t* row, int e0, float* v) {
    const float4* p = reinterpret_cast<const float4*>(row + 4 * e0);
    const float4 a = p[0], b = p[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  }
};
template <> struct Dequant<DType::F16> {
  static constexpr int kBlockElems = 1, kBlockBytes = 2;
  __device__ static void load8(const uint8_t* row, int e0, float* v) {
    const uint4 q = *reinterpret_cast<const uint4*>(row + 2 * e0);
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) v[2 * i] = half_to_float(w[i] & 0xffff), v[2 * i + 1] = half_to_float(w[i] >> 16);
  }
};
template <> struct Dequant<DType::BF16> {
  static constexpr int kBlockElems = 1, kBlockBytes = 2;
  __device__ static void load8(const uint8_t* row, int e0, float* v) {
    const uint4 q = *reinterpret_cast<const uint4*>(row + 2 * e0);
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int i = 0; i < 4; ++i)
      v[2 * i] = __uint_as_float(w[i] << 16), v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
};
// Formats whose 8 elements are codes times one scale also offer codes8: the codes as
// floats, returning the scale, so a dot product can apply it once. ScaledCodes gives
// them load8: the codes times their scale.
template <class D>
struct ScaledCodes {
  __device__ static void load8(const uint8_t* row, int e0, float* v) {
    const float scale = D::codes8(row, e0, v);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] *= scale;
  }
};
template <> struct Dequant<DType::Q8_0> : ScaledCodes<Dequant<DType::Q8_0>> {
  static constexpr int kBlockElems = 32, kBlockBytes = 34;
  __device__ static float codes8(const uint8_t* row, int e0, float* v) {
    const uint8_t* b = row + (e0 / 32) * kBlockBytes;
    uint2 q = load_bytes8<2>(b + 2 + (e0 & 31));
    q.x ^= 0x80808080u, q.y ^= 0x80808080u;  // signed codes to unsigned + 128
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = code_as_float(q, i, 128.0f);
    return half_to_float(load_u16(b));
  }
};
// Q5_0 / Q5_1: bits e .. e + 7 of the fifth bits qh, one per byte at bit 4 (a multiply
// spreads four bits to four bytes).
__device__ __forceinline__ uint2 fifth_bit_bytes(uint32_t qh, int e) {
  const uint32_t h = qh >> e;
  return make_uint2(((h & 15u) * 0x00204081u & 0x01010101u) << 4, (((h >> 4) & 15u) * 0x00204081u & 0x01010101u) << 4);
}
template <> struct Dequant<DType::Q4_0> : ScaledCodes<Dequant<DType::Q4_0>> {
  static constexpr int kBlockElems = 32, kBlockBytes = 18;
  __device__ static float codes8(const uint8_t* row, int e0, float* v) {
    const uint8_t* b = row + (e0 / 32) * kBlockBytes;
    const int e = e0 & 31;
    const uint2 q = nibble_codes(nibble_bytes<2>(b + 2, e), e >= 16);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = code_as_float(q, i, 8.0f);
    return half_to_float(load_u16(b));
  }
};
template <> struct Dequant<DType::Q4_1> {
  static constexpr int kBlockElems = 32, kBlockBytes = 20;
  __device__ static void load8(const uint8_t* row, int e0, float* v) {
    const uint8_t* b = row + (e0 / 32) * kBlockBytes;
    const float d = half_to_float(load_u16(b)), m = half_to_float(load_u16(b + 2));
    const int e = e0 & 31;
    const uint2 q = nibble_codes(nibble_bytes<4>(b + 4, e), e >= 16);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = code_as_float(q, i, 0.0f) * d + m;
  }
};
template <> struct Dequant<DType::Q5_0> : ScaledCodes<Dequant<DType::Q5_0>> {
  static constexpr int kBlockElems = 32, kBlockBytes = 22;
  __device__ static float codes8(const uint8_t* row, int e0, float* v) {
    const uint8_t* b = row + (e0 / 32) * kBlockBytes;
    const uint32_t qh = load_u16(b + 2) | (static_cast<uint32_t>(load_u16(b + 4)) << 16);
    const int e = e0 & 31;
    uint2 q = nibble_codes(nibble_bytes<2>(b + 6, e), e >= 16);
    const uint2 h = fifth_bit_bytes(qh, e);
    q.x |= h.x, q.y |= h.y;
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = code_as_float(q, i, 16.0f);
    return half_to_float(load_u16(b));
  }
};
template <> struct Dequant<DType::Q5_1> {
  static constexpr int kBlockElems = 32, kBlockBytes = 24;
  __device__ static void load8(const uint8_t* row, int e0, float* v) {
    const uint8_t* b = row + (e0 / 32) * kBlockBytes;
    const float d = half_to_float(load_u16(b)), m = half_to_float(load_u16(b + 2));
    const int e = e0 & 31;
    uint2 q = nibble_codes(nibble_bytes<8>(b + 8, e), e >= 16);
    const uint2 h = fifth_bit_bytes(*reinterpret_cast<const uint32_t*>(b + 4), e);
    q.x |= h.x, q.y |= h.y;
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = code_as_float(q, i, 0.0f) * d + m;
  }
};
template <> struct Dequant<DType::IQ4_NL> : ScaledCodes<Dequant<DType::IQ4_NL>> {
  static constexpr int kBlockElems = 32, kBlockBytes = 18;
  __device__ static float codes8(const uint8_t* row, int e0, float* v) {
    const uint8_t* b = row + (e0 / 32) * kBlockBytes;
    constexpr CodeBook16 book = kIq4nlBook;  // a copy in registers (device code cannot refer to the global)
    book_values8(book, nibble_bytes<2>(b + 2, e0 & 31), (e0 & 31) >= 16, v);
    return half_to_float(load_u16(b));
  }
};
template <> struct Dequant<DType::MXFP4> {
  static constexpr int kBlockElems = 32, kBlockBytes = 17;
  __device__ static void load8(const uint8_t* row, int e0, float* v) {
    const uint8_t* b = row + (e0 / 32) * kBlockBytes;
    constexpr CodeBook16 book = kMxfp4Book;
    book_values8(book, nibble_bytes<1>(b + 1, e0 & 31), (e0 & 31) >= 16, v);
    const float d = e8m0_half(b[0]);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] *= d;
  }
};

// K-quants: 256-element super-blocks. Element e of a block: half = e / 128,
// k = (e % 128) / 32, l = e % 32 for the 2-bit layouts.
template <> struct Dequant<DType::Q2_K> {
  static constexpr int kBlockElems = 256, kBlockBytes = 84;
  __device__ static void load8(const uint8_t* row, int e0, float* v) {
    const uint8_t* b = row + (e0 / 256) * kBlockBytes;
    const int e = e0 & 255, half = e / 128, k = (e % 128) / 32, l = e % 32;
    const int sc = b[e / 16];
    const float dl = half_to_float(load_u16(b + 80)) * static_cast<float>(sc & 15);
    const float ml = half_to_float(load_u16(b + 82)) * static_cast<float>(sc >> 4);
    const uint2 q = byte_bits(load_bytes8<4>(b + 16 + 32 * half + l), 2 * k, 0x03030303u, 0);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = dl * code_as_float(q, i, 0.0f) - ml;
  }
};
template <> struct Dequant<DType::Q3_K> : ScaledCodes<Dequant<DType::Q3_K>> {
  static constexpr int kBlockElems = 256, kBlockBytes = 110;
  // Codes c - 4, c the two low bits with the hmask bit above them.
  __device__ static float codes8(const uint8_t* row, int e0, float* v) {
    const uint8_t* b = row + (e0 / 256) * kBlockBytes;
    const int e = e0 & 255, half = e / 128, k = (e % 128) / 32, l = e % 32, m = e / 32, sub = e / 16;
    const uint8_t* scales = b + 96;
    const int low = sub < 8 ? (scales[sub] & 15) : (scales[sub - 8] >> 4);
    const int high = (scales[8 + sub % 4] >> (2 * (sub / 4))) & 3;
    uint2 q = byte_bits(load_bytes8<2>(b + 32 + 32 * half + l), 2 * k, 0x03030303u, 0);
    const uint2 h = byte_bits(load_bytes8<2>(b + l), m, 0x01010101u, 2);
    q.x |= h.x, q.y |= h.y;
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = code_as_float(q, i, 4.0f);
    return half_to_float(load_u16(b + 108)) * static_cast<float>((low | (high << 4)) - 32);
  }
};

// A 32-element sub-block of a Q4_K / Q5_K block with its scale and minimum decoded
// (dl, ml): kernels that walk a row by runs of 32 decode them once per run (run8),
// not once per 8 elements (load8). run_codes8 gives the codes alone, so a dot
// product can apply dl and ml once per run.
struct KRun {
  const uint8_t* block;
  int sub;
  float dl, ml;
};
// The six-bit scale and min of sub-block `sub` (quant/blocks.h) from the 12 scale
// bytes read as three words: runs 0-3 are the low 6 bits of bytes 0-3 / 4-7, runs 4-7
// the nibbles of bytes 8-11 under the top 2 bits of bytes 0-3 / 4-7. Word-wide masks
// and a select instead of byte loads on two branches: the decode is most of what a
// one-token matvec spends on these types (PERFORMANCE.md, session 21).
__device__ __forceinline__ KRun k_run(const uint8_t* row, int e0, int block_bytes) {
  const uint8_t* b = row + (e0 / 256) * block_bytes;  // 4-byte aligned: blocks of whole 16-byte units
  const int sub = (e0 & 255) / 32;
  const auto* w = reinterpret_cast<const uint32_t*>(b);
  const uint32_t dm = w[0], s0 = w[1], s1 = w[2], s2 = w[3];
  const bool low = sub < 4;
  const uint32_t sc = low ? s0 & 0x3F3F3F3Fu : (s2 & 0x0F0F0F0Fu) | ((s0 >> 2) & 0x30303030u);
  const uint32_t mn = low ? s1 & 0x3F3F3F3Fu : ((s2 >> 4) & 0x0F0F0F0Fu) | ((s1 >> 2) & 0x30303030u);
  const int shift = 8 * (sub & 3);
  return {b, sub, half_to_float(dm & 0xffff) * static_cast<float>((sc >> shift) & 0xFFu),
          half_to_float(dm >> 16) * static_cast<float>((mn >> shift) & 0xFFu)};
}
// Codes of elements 16·half .. 16·half + 15 of run r of a Q4_K (kQh 0) or Q5_K block
// (16-byte aligned), a byte each: qs bytes 32·(r / 2) + 16·half .., nibble r % 2, and
// for Q5_K bit r of qh bytes 16·half .. as the fifth bit.
template <int kQs, bool kQh>
__device__ __forceinline__ void k_codes16(const KRun& r, int half, uint32_t (&c)[4]) {
  const uint4 q = *reinterpret_cast<const uint4*>(r.block + kQs + 32 * (r.sub / 2) + 16 * half);
  uint2 lo = nibble_codes(make_uint2(q.x, q.y), r.sub & 1), hi = nibble_codes(make_uint2(q.z, q.w), r.sub & 1);
  if constexpr (kQh) {
    const uint4 h = *reinterpret_cast<const uint4*>(r.block + 16 + 16 * half);
    const uint2 h_lo = byte_bits(make_uint2(h.x, h.y), r.sub, 0x01010101u, 4);
    const uint2 h_hi = byte_bits(make_uint2(h.z, h.w), r.sub, 0x01010101u, 4);
    lo.x |= h_lo.x, lo.y |= h_lo.y, hi.x |= h_hi.x, hi.y |= h_hi.y;
  }
  c[0] = lo.x, c[1] = lo.y, c[2] = hi.x, c[3] = hi.y;
}
template <> struct Dequant<DType::Q4_K> {
  static constexpr int kBlockElems = 256, kBlockBytes = 144;
  __device__ static KRun run(const uint8_t* row, int e0) { return k_run(row, e0, kBlockBytes); }
  __device__ static void run_codes16(const KRun& r, int half, uint32_t (&c)[4]) { k_codes16<16, false>(r, half, c); }
  // Codes of elements l .. l + 7 of the run (l a multiple of 8).
  __device__ static void run_codes8(const KRun& r, int l, float* v) {
    const uint2 q = nibble_codes(load_bytes8<8>(r.block + 16 + 32 * (r.sub / 2) + l), r.sub & 1);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = code_as_float(q, i, 0.0f);
  }
  __device__ static void run8(const KRun& r, int l, float* v) {
    run_codes8(r, l, v);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = r.dl * v[i] - r.ml;
  }
  __device__ static void load8(const uint8_t* row, int e0, float* v) { run8(run(row, e0), e0 % 32, v); }
};
template <> struct Dequant<DType::Q5_K> {
  static constexpr int kBlockElems = 256, kBlockBytes = 176;
  __device__ static KRun run(const uint8_t* row, int e0) { return k_run(row, e0, kBlockBytes); }
  __device__ static void run_codes16(const KRun& r, int half, uint32_t (&c)[4]) { k_codes16<48, true>(r, half, c); }
  __device__ static void run_codes8(const KRun& r, int l, float* v) {
    const uint2 h = byte_bits(load_bytes8<8>(r.block + 16 + l), r.sub, 0x01010101u, 4);
    uint2 q = nibble_codes(load_bytes8<8>(r.block + 48 + 32 * (r.sub / 2) + l), r.sub & 1);
    q.x |= h.x, q.y |= h.y;
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = code_as_float(q, i, 0.0f);
  }
  __device__ static void run8(const KRun& r, int l, float* v) {
    run_codes8(r, l, v);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = r.dl * v[i] - r.ml;
  }
  __device__ static void load8(const uint8_t* row, int e0, float* v) { run8(run(row, e0), e0 % 32, v); }
};
template <> struct Dequant<DType::Q6_K> : ScaledCodes<Dequant<DType::Q6_K>> {
  static constexpr int kBlockElems = 256, kBlockBytes = 210;
  // codes8 of the block at b, which is aligned to Align bytes: the 210-byte blocks of
  // a row alternate between 2- and 4-byte alignment (every fourth is 8-byte aligned)
  // and a lane's code bytes lie at multiples of 8 in its block, so a caller that
  // knows the block's alignment reads them in 2 or 4 loads instead of 8.
  // block_marked8: the 6-bit codes c with bit 7 set, a byte each (0x80 | c), and the
  // scale: element i is scale · (c_i - kCodeOffset).
  static constexpr int kCodeOffset = 32;
  template <int Align>
  __device__ static float block_marked8(const uint8_t* b, int e, uint2& q) {
    const int half = e / 128, k = (e % 128) / 32, l = e % 32;
    const uint2 qh = byte_bits(load_bytes8<Align>(b + 128 + 32 * half + l), 2 * k, 0x03030303u, 4);
    q = nibble_codes(load_bytes8<Align>(b + 64 * half + l + 32 * (k & 1)), k >= 2);
    q.x |= qh.x | 0x80808080u, q.y |= qh.y | 0x80808080u;
    return half_to_float(load_u16(b + 208)) * static_cast<float>(static_cast<int8_t>(b[192 + e / 16]));
  }
  template <int Align>
  __device__ static float block_codes8(const uint8_t* b, int e, float* v) {
    uint2 q;
    const float dl = block_marked8<Align>(b, e, q);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = code_as_float(q, i, 128.0f + kCodeOffset);
    return dl;
  }
  __device__ static float codes8(const uint8_t* row, int e0, float* v) {
    return block_codes8<2>(row + (e0 / 256) * kBlockBytes, e0 & 255, v);
  }
};
template <> struct Dequant<DType::IQ4_XS> : ScaledCodes<Dequant<DType::IQ4_XS>> {
  static constexpr int kBlockElems = 256, kBlockBytes = 136;
  __device__ static float codes8(const uint8_t* row, int e0, float* v) {
    const uint8_t* b = row + (e0 / 256) * kBlockBytes;
    const int e = e0 & 255, sub = e / 32;
    const int low = (b[4 + sub / 2] >> (4 * (sub % 2))) & 15;
    const int high = (load_u16(b + 2) >> (2 * sub)) & 3;
    const uint2 q = nibble_bytes<8>(b + 8 + 16 * sub, e & 31);
    constexpr CodeBook16 book = kIq4nlBook;
    book_values8(book, q, (e & 31) >= 16, v);
    return half_to_float(load_u16(b)) * static_cast<float>((low | (high << 4)) - 32);
  }
};

// Calls f(std::integral_constant<DType, T>{}) for the weight type t; throws for a
// type no kernel reads.
template <class F>
void dispatch_weight_type(DType t, F&& f) {
  switch (t) {
#define ZINC_WEIGHT_CASE(T) \
  case DType::T: f(std::integral_constant<DType, DType::T>{}); return;
    ZINC_WEIGHT_CASE(F32) ZINC_WEIGHT_CASE(F16) ZINC_WEIGHT_CASE(BF16) ZINC_WEIGHT_CASE(Q8_0)
    ZINC_WEIGHT_CASE(Q4_0) ZINC_WEIGHT_CASE(Q4_1) ZINC_WEIGHT_CASE(Q5_0) ZINC_WEIGHT_CASE(Q5_1)
    ZINC_WEIGHT_CASE(IQ4_NL) ZINC_WEIGHT_CASE(MXFP4) ZINC_WEIGHT_CASE(Q2_K) ZINC_WEIGHT_CASE(Q3_K)
    ZINC_WEIGHT_CASE(Q4_K) ZINC_WEIGHT_CASE(Q5_K) ZINC_WEIGHT_CASE(Q6_K) ZINC_WEIGHT_CASE(IQ4_XS)
#undef ZINC_WEIGHT_CASE
    default:
      throw std::invalid_argument("cuda: no kernel reads weights of type " + std::string(type_name(t)));
  }
}

}  // namespace zinc::cuda
