// quantize_row: floats -> blocks. The 32-element formats follow GGML's reference
// quantizers exactly (their rounding is part of what files in the wild contain, and
// tests compare them bit for bit against gguf-py); the K-quants search their scales
// (quantize_k.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/quant.h"
#include "quant/quantize_k.h"

namespace zinc {
namespace {

// The element of largest magnitude, with its sign (the first one on ties).
float signed_abs_max(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

float inverse_or_zero(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

void pack_nibbles(const uint8_t* q, uint8_t* qs) {
  for (int j = 0; j < kBlock32 / 2; ++j) qs[j] = static_cast<uint8_t>((q[j] & 15) | ((q[j + 16] & 15) << 4));
}

void pack_fifth_bits(const uint8_t* q, uint8_t* qh) {
  uint32_t bits = 0;
  for (int j = 0; j < kBlock32; ++j) bits |= static_cast<uint32_t>(q[j] >> 4) << j;
  std::memcpy(qh, &bits, 4);
}

// Symmetric: the largest magnitude maps to code 0 (value -levels/2 * d).
template <typename Block>
void quantize_symmetric_4_5(const float* x, Block* y, int64_t nb, int levels) {
  const float half = static_cast<float>(levels / 2);
  for (int64_t b = 0; b < nb; ++b, x += kBlock32) {
    const float d = signed_abs_max(x, kBlock32) / -half;
    const float id = inverse_or_zero(d);
    uint8_t q[kBlock32];
    for (int j = 0; j < kBlock32; ++j)
      q[j] = static_cast<uint8_t>(std::min(levels - 1, static_cast<int>(x[j] * id + (half + 0.5f))));
    y[b].d = fp32_to_fp16(d);
    pack_nibbles(q, y[b].qs);
    if constexpr (requires { y[b].qh; }) pack_fifth_bits(q, y[b].qh);
  }
}

// Affine: the block's minimum is the offset m, its range spans the codes.
template <typename Block>
void quantize_affine_4_5(const float* x, Block* y, int64_t nb, int levels) {
  for (int64_t b = 0; b < nb; ++b, x += kBlock32) {
    const auto [lo, hi] = std::minmax_element(x, x + kBlock32);
    const float min = *lo;
    const float d = (*hi - min) / static_cast<float>(levels - 1);
    const float id = inverse_or_zero(d);
    uint8_t q[kBlock32];
    for (int j = 0; j < kBlock32; ++j)
      q[j] = static_cast<uint8_t>(std::min(levels - 1, static_cast<int>((x[j] - min) * id + 0.5f)));
    y[b].d = fp32_to_fp16(d);
    y[b].m = fp32_to_fp16(min);
    pack_nibbles(q, y[b].qs);
    if constexpr (requires { y[b].qh; }) pack_fifth_bits(q, y[b].qh);
  }
}

// d = max|x| / 127 and round-half-away-from-zero codes, as GGML; Q8_1 also stores d * sum(q).
template <typename Block>
void quantize_8bit(const float* x, Block* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kBlock32) {
    float amax = 0.0f;
    for (int j = 0; j < kBlock32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = inverse_or_zero(d);
    int sum = 0;
    for (int j = 0; j < kBlock32; ++j) {
      y[b].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
      sum += y[b].qs[j];
    }
    y[b].d = fp32_to_fp16(d);
    if constexpr (requires { y[b].s; }) y[b].s = fp32_to_fp16(static_cast<float>(sum) * d);
  }
}

void quantize_q8_k(const float* x, BlockQ8_K* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kBlockK) {
    float amax = 0.0f;
    for (int j = 0; j < kBlockK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int j = 0; j < kBlockK; ++j)
      y[b].qs[j] = static_cast<int8_t>(std::clamp(static_cast<int>(std::lround(x[j] * id)), -127, 127));
    for (int g = 0; g < kBlockK / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += y[b].qs[16 * g + j];
      y[b].bsums[g] = static_cast<int16_t>(sum);
    }
    y[b].d = amax > 0.0f ? 1.0f / id : 0.0f;
  }
}

// MXFP4: the power-of-two scale that brings the block's largest magnitude within the
// code book's 12 (GGML's doubled e2m1 values), then each value's nearest code.
void quantize_mxfp4(const float* x, BlockMXFP4* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kBlock32) {
    float amax = 0;
    for (int j = 0; j < kBlock32; ++j) amax = std::max(amax, std::fabs(x[j]));
    // e8m0_half(e) = 2^(e - 128); e in [1, 250] as the random blocks use.
    const int e = amax > 0 ? std::clamp(static_cast<int>(std::ceil(std::log2(amax / 12.0f))) + 128, 1, 250) : 1;
    const float d = e8m0_half_to_fp32(static_cast<uint8_t>(e));
    uint8_t q[kBlock32];
    for (int j = 0; j < kBlock32; ++j) {
      int best = 0;
      for (int c = 1; c < 16; ++c)
        if (std::fabs(x[j] - kMxfp4Values[c] * d) < std::fabs(x[j] - kMxfp4Values[best] * d)) best = c;
      q[j] = static_cast<uint8_t>(best);
    }
    y[b].e = static_cast<uint8_t>(e);
    pack_nibbles(q, y[b].qs);
  }
}

template <uint16_t (*Narrow)(float)>
void store_halves(const float* x, void* dst, int64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = Narrow(x[i]);
    std::memcpy(out + 2 * i, &h, 2);
  }
}

template <typename Block>
Block* blocks_of(void* dst) {
  return static_cast<Block*>(dst);
}

}  // namespace

bool can_quantize(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0:
    case DType::Q8_1:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::Q8_K:
    case DType::MXFP4: return true;
    default: return false;
  }
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  const TypeTraits& tt = type_traits(t);
  if (!can_quantize(t)) throw std::invalid_argument("quantize_row: zinc does not write " + std::string(tt.name));
  if (n < 0 || n % tt.block_elems != 0)
    throw std::invalid_argument("quantize_row: " + std::to_string(n) + " elements is not a whole number of " +
                                std::string(tt.name) + " blocks");
  const int64_t nb = n / tt.block_elems;
  switch (t) {
    case DType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); return;
    case DType::F16: return store_halves<float_to_half_bits>(src, dst, n);
    case DType::BF16: return store_halves<float_to_bf16_bits>(src, dst, n);
    case DType::Q4_0: return quantize_symmetric_4_5(src, blocks_of<BlockQ4_0>(dst), nb, 16);
    case DType::Q5_0: return quantize_symmetric_4_5(src, blocks_of<BlockQ5_0>(dst), nb, 32);
    case DType::Q4_1: return quantize_affine_4_5(src, blocks_of<BlockQ4_1>(dst), nb, 16);
    case DType::Q5_1: return quantize_affine_4_5(src, blocks_of<BlockQ5_1>(dst), nb, 32);
    case DType::Q8_0: return quantize_8bit(src, blocks_of<BlockQ8_0>(dst), nb);
    case DType::Q8_1: return quantize_8bit(src, blocks_of<BlockQ8_1>(dst), nb);
    case DType::Q4_K: return quantize_q4_k(src, blocks_of<BlockQ4_K>(dst), nb);
    case DType::Q5_K: return quantize_q5_k(src, blocks_of<BlockQ5_K>(dst), nb);
    case DType::Q6_K: return quantize_q6_k(src, blocks_of<BlockQ6_K>(dst), nb);
    case DType::Q8_K: return quantize_q8_k(src, blocks_of<BlockQ8_K>(dst), nb);
    case DType::MXFP4: return quantize_mxfp4(src, blocks_of<BlockMXFP4>(dst), nb);
    default: break;
  }
}

}  // namespace zinc
