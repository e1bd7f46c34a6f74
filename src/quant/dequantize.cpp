// dequantize_row: block bytes -> floats for every non-integer type in the table,
// bit-exact to GGML's definitions (same float operations in the same order). The
// type switch happens once per row; each format's inner loops run over whole
// sub-blocks with fixed trip counts so the compiler can vectorize them.
#include <cstring>
#include <stdexcept>
#include <string>

#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/quant.h"

namespace zinc {
namespace {

template <typename Block>
const Block* blocks_of(const void* src) {
  return static_cast<const Block*>(src);
}

void dequantize_f16(const void* src, float* dst, int64_t n) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, bytes + 2 * i, 2);
    dst[i] = half_bits_to_float(h);
  }
}

void dequantize_bf16(const void* src, float* dst, int64_t n) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, bytes + 2 * i, 2);
    dst[i] = bf16_bits_to_float(h);
  }
}

void dequantize_f64(const void* src, float* dst, int64_t n) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    double v;
    std::memcpy(&v, bytes + 8 * i, 8);
    dst[i] = static_cast<float>(v);
  }
}

// Codes of a 32-element nibble-packed group, in element order.
inline void unpack_nibbles(const uint8_t* qs, uint8_t* q) {
  for (int j = 0; j < kBlock32 / 2; ++j) {
    q[j] = qs[j] & 15;
    q[j + 16] = qs[j] >> 4;
  }
}

// Adds bit j of the little-endian word at qh as bit 4 of code j (Q5_0 / Q5_1).
inline void add_fifth_bits(const uint8_t* qh_bytes, uint8_t* q) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  for (int j = 0; j < kBlock32; ++j) q[j] = static_cast<uint8_t>(q[j] | (((qh >> j) & 1) << 4));
}

void dequantize_q4_0(const BlockQ4_0* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kBlock32) {
    const float d = half_float(x[b].d);
    uint8_t q[kBlock32];
    unpack_nibbles(x[b].qs, q);
    for (int j = 0; j < kBlock32; ++j) y[j] = static_cast<float>(q[j] - 8) * d;
  }
}

void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kBlock32) {
    const float d = half_float(x[b].d);
    const float m = half_float(x[b].m);
    uint8_t q[kBlock32];
    unpack_nibbles(x[b].qs, q);
    for (int j = 0; j < kBlock32; ++j) y[j] = static_cast<float>(q[j]) * d + m;
  }
}

void dequantize_q5_0(const BlockQ5_0* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kBlock32) {
    const float d = half_float(x[b].d);
    uint8_t q[kBlock32];
    unpack_nibbles(x[b].qs, q);
    add_fifth_bits(x[b].qh, q);
    for (int j = 0; j < kBlock32; ++j) y[j] = static_cast<float>(q[j] - 16) * d;
  }
}

void dequantize_q5_1(const BlockQ5_1* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kBlock32) {
    const float d = half_float(x[b].d);
    const float m = half_float(x[b].m);
    uint8_t q[kBlock32];
    unpack_nibbles(x[b].qs, q);
    add_fifth_bits(x[b].qh, q);
    for (int j = 0; j < kBlock32; ++j) y[j] = static_cast<float>(q[j]) * d + m;
  }
}

void dequantize_q8_0(const BlockQ8_0* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kBlock32) {
    const float d = half_float(x[b].d);
    for (int j = 0; j < kBlock32; ++j) y[j] = static_cast<float>(x[b].qs[j]) * d;
  }
}

void dequantize_q8_1(const BlockQ8_1* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kBlock32) {
    const float d = half_float(x[b].d);
    for (int j = 0; j < kBlock32; ++j) y[j] = static_cast<float>(x[b].qs[j]) * d;
  }
}

// Q2_K / Q3_K 2-bit codes in element order: element 128h + 32k + l is bits 2k..2k+1
// of qs[32h + l].
inline void unpack_crumbs(const uint8_t* qs, uint8_t* q) {
  for (int half = 0; half < 2; ++half)
    for (int k = 0; k < 4; ++k)
      for (int l = 0; l < 32; ++l) q[128 * half + 32 * k + l] = (qs[32 * half + l] >> (2 * k)) & 3;
}

void dequantize_q2_k(const BlockQ2_K* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kBlockK) {
    const float d = half_float(x[b].d);
    const float dmin = half_float(x[b].dmin);
    uint8_t q[kBlockK];
    unpack_crumbs(x[b].qs, q);
    for (int sub = 0; sub < 16; ++sub) {
      const float dl = d * static_cast<float>(x[b].scales[sub] & 15);
      const float ml = dmin * static_cast<float>(x[b].scales[sub] >> 4);
      for (int l = 0; l < 16; ++l) y[16 * sub + l] = dl * static_cast<float>(q[16 * sub + l]) - ml;
    }
  }
}

void dequantize_q3_k(const BlockQ3_K* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kBlockK) {
    const float d = half_float(x[b].d);
    uint8_t q[kBlockK];
    unpack_crumbs(x[b].qs, q);
    // Element 32m + l subtracts 4 unless bit m of hmask[l] is set.
    int8_t v[kBlockK];
    for (int m = 0; m < 8; ++m)
      for (int l = 0; l < 32; ++l)
        v[32 * m + l] = static_cast<int8_t>(q[32 * m + l] - (((x[b].hmask[l] >> m) & 1) ? 0 : 4));
    for (int sub = 0; sub < 16; ++sub) {
      const float dl = d * static_cast<float>(q3_k_scale(x[b].scales, sub) - 32);
      for (int l = 0; l < 16; ++l) y[16 * sub + l] = dl * static_cast<float>(v[16 * sub + l]);
    }
  }
}

void dequantize_q4_k(const BlockQ4_K* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = half_float(x[b].d);
    const float dmin = half_float(x[b].dmin);
    for (int pair = 0; pair < 4; ++pair, y += 64) {
      const ScaleMin a = k_quant_scale_min(x[b].scales, 2 * pair);
      const ScaleMin c = k_quant_scale_min(x[b].scales, 2 * pair + 1);
      const float d1 = d * static_cast<float>(a.scale), m1 = dmin * static_cast<float>(a.min);
      const float d2 = d * static_cast<float>(c.scale), m2 = dmin * static_cast<float>(c.min);
      const uint8_t* q = x[b].qs + 32 * pair;
      for (int l = 0; l < 32; ++l) y[l] = d1 * static_cast<float>(q[l] & 15) - m1;
      for (int l = 0; l < 32; ++l) y[l + 32] = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

void dequantize_q5_k(const BlockQ5_K* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = half_float(x[b].d);
    const float dmin = half_float(x[b].dmin);
    for (int pair = 0; pair < 4; ++pair, y += 64) {
      const ScaleMin a = k_quant_scale_min(x[b].scales, 2 * pair);
      const ScaleMin c = k_quant_scale_min(x[b].scales, 2 * pair + 1);
      const float d1 = d * static_cast<float>(a.scale), m1 = dmin * static_cast<float>(a.min);
      const float d2 = d * static_cast<float>(c.scale), m2 = dmin * static_cast<float>(c.min);
      const uint8_t* q = x[b].qs + 32 * pair;
      const uint8_t* qh = x[b].qh;
      for (int l = 0; l < 32; ++l) {
        const int v = (q[l] & 15) | (((qh[l] >> (2 * pair)) & 1) << 4);
        y[l] = d1 * static_cast<float>(v) - m1;
      }
      for (int l = 0; l < 32; ++l) {
        const int v = (q[l] >> 4) | (((qh[l] >> (2 * pair + 1)) & 1) << 4);
        y[l + 32] = d2 * static_cast<float>(v) - m2;
      }
    }
  }
}

void dequantize_q6_k(const BlockQ6_K* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kBlockK) {
    const float d = half_float(x[b].d);
    // Codes minus 32 in element order first (byte ops with fixed shifts), then scale.
    int8_t v[kBlockK];
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = x[b].ql + 64 * half;
      const uint8_t* qh = x[b].qh + 32 * half;
      int8_t* out = v + 128 * half;
      for (int l = 0; l < 32; ++l) {
        out[l] = static_cast<int8_t>(((ql[l] & 15) | ((qh[l] & 3) << 4)) - 32);
        out[l + 32] = static_cast<int8_t>(((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32);
        out[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
        out[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
      }
    }
    for (int sub = 0; sub < 16; ++sub) {
      const float dl = d * static_cast<float>(x[b].scales[sub]);
      for (int l = 0; l < 16; ++l) y[16 * sub + l] = dl * static_cast<float>(v[16 * sub + l]);
    }
  }
}

void dequantize_q8_k(const BlockQ8_K* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kBlockK) {
    const float d = x[b].d;
    for (int j = 0; j < kBlockK; ++j) y[j] = d * static_cast<float>(x[b].qs[j]);
  }
}

// The non-linear formats look their values up in a per-block table of scaled values
// (the same products GGML forms, so still bit-exact).
void dequantize_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kBlock32) {
    const float d = half_float(x[b].d);
    float table[16];
    for (int k = 0; k < 16; ++k) table[k] = d * static_cast<float>(kIq4nlValues[k]);
    uint8_t q[kBlock32];
    unpack_nibbles(x[b].qs, q);
    for (int j = 0; j < kBlock32; ++j) y[j] = table[q[j]];
  }
}

void dequantize_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = half_float(x[b].d);
    for (int sub = 0; sub < kBlockK / 32; ++sub, y += 32) {
      const float dl = d * static_cast<float>(iq4_xs_scale(x[b], sub) - 32);
      float table[16];
      for (int k = 0; k < 16; ++k) table[k] = dl * static_cast<float>(kIq4nlValues[k]);
      uint8_t q[kBlock32];
      unpack_nibbles(x[b].qs + 16 * sub, q);
      for (int j = 0; j < kBlock32; ++j) y[j] = table[q[j]];
    }
  }
}

void dequantize_mxfp4(const BlockMXFP4* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kBlock32) {
    const float d = e8m0_half_to_fp32(x[b].e);
    float table[16];
    for (int k = 0; k < 16; ++k) table[k] = static_cast<float>(kMxfp4Values[k]) * d;
    uint8_t q[kBlock32];
    unpack_nibbles(x[b].qs, q);
    for (int j = 0; j < kBlock32; ++j) y[j] = table[q[j]];
  }
}

}  // namespace

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  const TypeTraits& tt = type_traits(t);
  if (n < 0 || n % tt.block_elems != 0)
    throw std::invalid_argument("dequantize_row: " + std::to_string(n) + " elements is not a whole number of " +
                                std::string(tt.name) + " blocks");
  const int64_t nb = n / tt.block_elems;
  switch (t) {
    case DType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); return;
    case DType::F16: return dequantize_f16(src, dst, n);
    case DType::BF16: return dequantize_bf16(src, dst, n);
    case DType::F64: return dequantize_f64(src, dst, n);
    case DType::Q4_0: return dequantize_q4_0(blocks_of<BlockQ4_0>(src), dst, nb);
    case DType::Q4_1: return dequantize_q4_1(blocks_of<BlockQ4_1>(src), dst, nb);
    case DType::Q5_0: return dequantize_q5_0(blocks_of<BlockQ5_0>(src), dst, nb);
    case DType::Q5_1: return dequantize_q5_1(blocks_of<BlockQ5_1>(src), dst, nb);
    case DType::Q8_0: return dequantize_q8_0(blocks_of<BlockQ8_0>(src), dst, nb);
    case DType::Q8_1: return dequantize_q8_1(blocks_of<BlockQ8_1>(src), dst, nb);
    case DType::Q2_K: return dequantize_q2_k(blocks_of<BlockQ2_K>(src), dst, nb);
    case DType::Q3_K: return dequantize_q3_k(blocks_of<BlockQ3_K>(src), dst, nb);
    case DType::Q4_K: return dequantize_q4_k(blocks_of<BlockQ4_K>(src), dst, nb);
    case DType::Q5_K: return dequantize_q5_k(blocks_of<BlockQ5_K>(src), dst, nb);
    case DType::Q6_K: return dequantize_q6_k(blocks_of<BlockQ6_K>(src), dst, nb);
    case DType::Q8_K: return dequantize_q8_k(blocks_of<BlockQ8_K>(src), dst, nb);
    case DType::IQ4_NL: return dequantize_iq4_nl(blocks_of<BlockIQ4_NL>(src), dst, nb);
    case DType::IQ4_XS: return dequantize_iq4_xs(blocks_of<BlockIQ4_XS>(src), dst, nb);
    case DType::MXFP4: return dequantize_mxfp4(blocks_of<BlockMXFP4>(src), dst, nb);
    case DType::I8:
    case DType::I16:
    case DType::I32:
    case DType::I64: break;
  }
  throw std::invalid_argument("dequantize_row: integer type " + std::string(tt.name) + " has no float values");
}

}  // namespace zinc
