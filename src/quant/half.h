// Inline fp16 / bf16 <-> fp32 conversions for loops over many values (dequantization,
// random data, the CPU backend); quant.h exports the same as ordinary functions.
// Widening is exact and branch-free so it vectorizes. Narrowing rounds to nearest,
// ties to even, as IEEE 754 and GGML do; NaN stays a (quiet) NaN, overflow becomes
// infinity, subnormals are kept.
#pragma once

#include <bit>
#include <cstdint>

namespace zinc {

// Exact for every input: zero, subnormals, normals, inf, and NaN (payload kept).
// Written with all-ones masks rather than ?: so that GCC vectorizes loops over it.
inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t magnitude = h & 0x7fff;
  // Normal numbers: move exponent and mantissa into fp32 position and rebias (15 -> 127).
  uint32_t widened = (magnitude << 13) + (112u << 23);
  // Inf / NaN: the exponent must become all ones rather than 31 + 112.
  const uint32_t special_mask = 0u - static_cast<uint32_t>(magnitude >= 0x7c00);
  widened += special_mask & (112u << 23);
  // Subnormals (and zero) are mantissa * 2^-24, which a float holds exactly.
  const float subnormal = static_cast<float>(static_cast<int32_t>(magnitude)) * 0x1p-24f;
  const uint32_t subnormal_mask = 0u - static_cast<uint32_t>(magnitude < 0x0400);
  const uint32_t bits = (std::bit_cast<uint32_t>(subnormal) & subnormal_mask) | (widened & ~subnormal_mask);
  return std::bit_cast<float>(sign | bits);
}

// Every half's float as half_bits_to_float forms it (256 KB, filled before main by
// fp16.cpp): a block's scale in one load instead of the conversion's dozen scalar
// steps, which made SmolLM2's CPU decode 45% slower (PERFORMANCE.md, session 62). Loops
// over many halves keep half_bits_to_float, which vectorizes.
struct HalfFloats {
  float v[65536];
  HalfFloats();
};
extern const HalfFloats kHalfFloats;
inline float half_float(uint16_t h) { return kHalfFloats.v[h]; }

// bf16 is the top half of an fp32.
inline float bf16_bits_to_float(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t float_to_half_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t magnitude = x & 0x7fffffff;

  if (magnitude > 0x7f800000)  // NaN: keep the top payload bits, force the quiet bit
    return static_cast<uint16_t>(sign | 0x7e00 | ((magnitude >> 13) & 0x03ff));
  // 65520 = 65504 + half an ulp: from there on the rounded value is infinity.
  if (magnitude >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);

  if (magnitude >= 0x38800000) {  // normal fp16 range, |f| >= 2^-14
    const uint32_t rebiased = magnitude - (112u << 23);
    // Round on the 13 dropped bits; a carry into the exponent is the correct result.
    const uint32_t rounded = rebiased + 0x0fff + ((rebiased >> 13) & 1);
    return static_cast<uint16_t>(sign | (rounded >> 13));
  }

  // Subnormal fp16: the result is |f| / 2^-24 rounded to an integer in 0..1024.
  const int exponent = static_cast<int>(magnitude >> 23);
  const int shift = 126 - exponent;  // |f| = mantissa24 * 2^(exponent - 150)
  if (shift > 25) return sign;  // below 2^-25 (fp32 subnormals included): rounds to zero
  const uint32_t mantissa = (magnitude & 0x007fffff) | 0x00800000;
  uint32_t q = mantissa >> shift;
  const uint32_t remainder = mantissa & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (remainder > half || (remainder == half && (q & 1))) ++q;
  return static_cast<uint16_t>(sign | q);
}

inline uint16_t float_to_bf16_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffff) > 0x7f800000)  // NaN: truncate, force the quiet bit
    return static_cast<uint16_t>((x >> 16) | 0x0040);
  // Overflow to infinity happens naturally through the carry.
  return static_cast<uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

}  // namespace zinc
