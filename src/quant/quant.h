// Reference codecs for every block format in types.h: dequantization (bit-exact to
// the format definition), quantization for the formats zinc writes, and random
// blocks with sane scales for synthetic models.
#pragma once

#include <cstdint>

#include "quant/types.h"

namespace zinc {

float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);  // round to nearest even
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);  // round to nearest even

// dst[0..n) = values of the n elements at src, bit-exact to GGML. n is a multiple of
// the block size (else std::invalid_argument). Every DType except the integer types.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);

// Quantizes n floats (a multiple of the block size) into dst. The 32-element formats
// reproduce GGML's reference quantizers byte for byte; the K-quants search their
// scales (error bounds: tests/quant/quantize_test.cpp).
bool can_quantize(DType t);
void quantize_row(DType t, const float* src, void* dst, int64_t n);

// Fills dst with n elements' worth of random blocks of type t (every quantized type,
// F32, F16, BF16). Scales are set so the dequantized values have standard deviation
// ~`scale` (>= 0), and are never NaN or infinite; block scales vary by +-25%.
// Deterministic: the bytes depend only on (t, seed, stream) and the position in the
// call, so a shorter call writes a prefix of a longer one. To be independent of the
// thread count, split a tensor into fixed row ranges and pass the range's index as
// `stream`. Runs at several GB/s per core for the block formats.
void fill_random_blocks(DType t, uint64_t seed, uint64_t stream, void* dst, int64_t n, float scale);

}  // namespace zinc
