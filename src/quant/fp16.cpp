// The exported fp16 / bf16 <-> fp32 conversions of quant.h (inline versions: half.h).
#include "quant/half.h"
#include "quant/quant.h"

namespace zinc {

HalfFloats::HalfFloats() {
  for (uint32_t h = 0; h < 65536; ++h) v[h] = half_bits_to_float(static_cast<uint16_t>(h));
}
const HalfFloats kHalfFloats;

float fp16_to_fp32(uint16_t h) { return half_bits_to_float(h); }

float bf16_to_fp32(uint16_t h) { return bf16_bits_to_float(h); }

uint16_t fp32_to_fp16(float f) { return float_to_half_bits(f); }

uint16_t fp32_to_bf16(float f) { return float_to_bf16_bits(f); }

}  // namespace zinc
