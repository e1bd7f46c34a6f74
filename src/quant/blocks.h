// Byte layouts of GGML's block formats, one packed struct per type, plus the value
// tables of the non-linear formats. The structs mirror the bytes in a GGUF file, so
// a tensor's data can be viewed as an array of them; each size is checked against
// the type table (types.cpp). Half-precision fields are raw IEEE fp16 bits (see quant/half.h).
#pragma once

#include <bit>
#include <cstdint>

namespace zinc {

// Elements per block: 32 for the simple formats, 256 for the K-quants ("super-blocks").
inline constexpr int kBlock32 = 32;
inline constexpr int kBlockK = 256;

#pragma pack(push, 1)

// x = d * (q - 8), q in 0..15. Element j is the low nibble of qs[j], element j+16
// the high nibble (for j < 16); every 32-element nibble format below packs this way.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kBlock32 / 2];
};

// x = d * q + m, q in 0..15.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kBlock32 / 2];
};

// x = d * (q - 16), q in 0..31: the low 4 bits in qs as in Q4_0, bit 4 of element j
// is bit j of the little-endian 32-bit qh.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kBlock32 / 2];
};

// x = d * q + m, q in 0..31, bits as in Q5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kBlock32 / 2];
};

// x = d * q.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kBlock32];
};

// x = d * q; s = d * sum(q), kept for dot products against offset formats.
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[kBlock32];
};

// 16 sub-blocks of 16: x = d * (scales[i] & 15) * q - dmin * (scales[i] >> 4),
// q in 0..3. Each 128-element half uses 32 bytes of qs; element 32*k + l of the half
// (k = 0..3, l < 32) is bits 2k..2k+1 of byte l.
struct BlockQ2_K {
  uint8_t scales[kBlockK / 16];
  uint8_t qs[kBlockK / 4];
  uint16_t d;
  uint16_t dmin;
};

// 16 sub-blocks of 16: x = d * (s - 32) * (q - 4 * !h), q in 0..3 laid out as in
// Q2_K, h = bit (element / 32) of hmask[element % 32]. The 16 six-bit scales s: low
// nibbles in bytes 0..7 (sub-blocks 0..7 low nibble, 8..15 high nibble), top two bits
// of sub-block i at bits 2*(i/4) of byte 8 + i%4.
struct BlockQ3_K {
  uint8_t hmask[kBlockK / 8];
  uint8_t qs[kBlockK / 4];
  uint8_t scales[12];
  uint16_t d;
};

// 8 sub-blocks of 32: x = d * sc[i] * q - dmin * m[i], q in 0..15. Each 64-element
// pair of sub-blocks uses 32 bytes of qs: low nibbles for the first, high for the
// second. Six-bit sc/m packing: for i < 4, sc = scales[i] & 63, m = scales[i+4] & 63;
// for i >= 4 the low nibbles of scales[i+4] (sc) / its high nibble (m) plus the top
// two bits of scales[i-4] (sc) / scales[i] (m).
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[kBlockK / 2];
};

// Q4_K plus a fifth bit: bit 4 of element 32*i + l is bit i of qh[l].
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[kBlockK / 8];
  uint8_t qs[kBlockK / 2];
};

// 16 sub-blocks of 16: x = d * scales[i] * (q - 32), q in 0..63. Per 128-element
// half (64 bytes of ql, 32 of qh), element 32*k + l (k = 0..3, l < 32) takes its low
// nibble from ql[l + 32*(k&1)] (low nibble for k < 2, high for k >= 2) and its top
// two bits from bits 2k..2k+1 of qh[l].
struct BlockQ6_K {
  uint8_t ql[kBlockK / 2];
  uint8_t qh[kBlockK / 4];
  int8_t scales[kBlockK / 16];
  uint16_t d;
};

// Activation format of the K-quant dot products: x = d * q, with a float d and the
// sums of each 16 quants.
struct BlockQ8_K {
  float d;
  int8_t qs[kBlockK];
  int16_t bsums[kBlockK / 16];
};

// x = d * kIq4nlValues[q], q in 0..15, nibbles as in Q4_0.
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kBlock32 / 2];
};

// 8 sub-blocks of 32: x = d * (ls - 32) * kIq4nlValues[q]; the six-bit ls of
// sub-block i is nibble i%2 of scales_l[i/2] plus bits 2i..2i+1 of scales_h above it.
// Each sub-block's 16 bytes of qs are nibble-packed as in Q4_0.
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kBlockK / 64];
  uint8_t qs[kBlockK / 2];
};

// OCP microscaling FP4: an E8M0 exponent e and 32 e2m1 codes nibble-packed as in
// Q4_0. x = e8m0_half(e) * kMxfp4Values[q] (see below).
struct BlockMXFP4 {
  uint8_t e;
  uint8_t qs[kBlock32 / 2];
};

#pragma pack(pop)

// The IQ4_NL / IQ4_XS code book.
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// e2m1 values times two (GGML's convention), indexed by the 4-bit code (sign in bit 3).
// The factor two is undone by the scale: e8m0_half(e) = 2^(e - 128), not 2^(e - 127).
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// Half the E8M0 scale, 2^(e - 128), as GGML computes it: e = 0 and 1 give the fp32
// subnormals 2^-128 and 2^-127; e = 255 (NaN in the OCP spec) gives 2^127.
inline float e8m0_half_to_fp32(uint8_t e) {
  uint32_t bits = e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23);
  return std::bit_cast<float>(bits);
}

// The six-bit scale and min of sub-block i (0..7) of a Q4_K / Q5_K block.
struct ScaleMin {
  uint8_t scale;
  uint8_t min;
};
inline ScaleMin k_quant_scale_min(const uint8_t* scales, int i) {
  if (i < 4) return {static_cast<uint8_t>(scales[i] & 63), static_cast<uint8_t>(scales[i + 4] & 63)};
  return {static_cast<uint8_t>((scales[i + 4] & 15) | ((scales[i - 4] >> 6) << 4)),
          static_cast<uint8_t>((scales[i + 4] >> 4) | ((scales[i] >> 6) << 4))};
}

// The six-bit scale s (0..63, applied as s - 32) of sub-block i (0..15) of a Q3_K block.
inline int q3_k_scale(const uint8_t* scales, int i) {
  const int low = i < 8 ? (scales[i] & 15) : (scales[i - 8] >> 4);
  const int high = (scales[8 + i % 4] >> (2 * (i / 4))) & 3;
  return low | (high << 4);
}

// The six-bit scale (0..63, applied as ls - 32) of sub-block i (0..7) of an IQ4_XS block.
inline int iq4_xs_scale(const BlockIQ4_XS& b, int i) {
  const int low = (b.scales_l[i / 2] >> (4 * (i % 2))) & 15;
  const int high = (b.scales_h >> (2 * i)) & 3;
  return low | (high << 4);
}

}  // namespace zinc
