// Written with GCC's vector extensions (clang has them too): sixteen-float vectors
// that the compiler maps onto whatever registers the chosen level has (four SSE, two
// AVX2 or one AVX-512 register). Each block format's loop forms every weight exactly
// as dequantize.cpp does (same operands, same operations), sixteen elements at a time
// in element order, and multiplies it into the lanes as lane_dot would. The 32 lanes
// are two vectors, so that two chains of additions are in flight.
#include "backend/cpu/row_dot.h"

#include <cstring>
#include <vector>

#include "quant/blocks.h"
#include "quant/half.h"
#include "backend/cpu/isa_clones.h"
#include "quant/quant.h"

namespace zinc::cpu {
namespace {

using f32x16 = float __attribute__((vector_size(64)));
using i32x16 = int32_t __attribute__((vector_size(64)));
using u32x16 = uint32_t __attribute__((vector_size(64)));
using u8x16 = uint8_t __attribute__((vector_size(16)));
constexpr int kLanes = 32;

// Lanes 0-15 and 16-31.
struct Lanes {
  f32x16 lo = {}, hi = {};
};

f32x16 floats16(const float* p) {
  f32x16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class V>
V bytes16(const void* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
i32x16 widen(u8x16 q) { return __builtin_convertvector(q, i32x16); }
f32x16 to_float(i32x16 q) { return __builtin_convertvector(q, f32x16); }

double reduce(const Lanes& acc) {
  double s = 0;
  for (int j = 0; j < 16; ++j) s += acc.lo[j];
  for (int j = 0; j < 16; ++j) s += acc.hi[j];
  return s;
}

// Bit j (of 0..15) of a Q5_0 / Q5_1 block's qh word shifted by `from`, as bit 4 of a code.
i32x16 fifth_bits(uint32_t qh, int from) {
  const u32x16 lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  const u32x16 bits = ((u32x16{} + (qh >> from)) >> lane) & 1u;
  return __builtin_convertvector(bits << 4, i32x16);
}

// In each block format below, element j < 16 of a 32-element group is the low nibble
// of byte j and element j + 16 its high nibble (blocks.h).
void add_q4_0(const BlockQ4_0* x, int64_t nb, const float* v, Lanes& acc) {
  for (int64_t b = 0; b < nb; ++b, v += kBlock32) {
    const float d = half_bits_to_float(x[b].d);
    const u8x16 q = bytes16<u8x16>(x[b].qs);
    acc.lo += to_float(widen(q & 15) - 8) * d * floats16(v);
    acc.hi += to_float(widen(q >> 4) - 8) * d * floats16(v + 16);
  }
}

void add_q4_1(const BlockQ4_1* x, int64_t nb, const float* v, Lanes& acc) {
  for (int64_t b = 0; b < nb; ++b, v += kBlock32) {
    const float d = half_bits_to_float(x[b].d), m = half_bits_to_float(x[b].m);
    const u8x16 q = bytes16<u8x16>(x[b].qs);
    acc.lo += (to_float(widen(q & 15)) * d + m) * floats16(v);
    acc.hi += (to_float(widen(q >> 4)) * d + m) * floats16(v + 16);
  }
}

void add_q5_0(const BlockQ5_0* x, int64_t nb, const float* v, Lanes& acc) {
  for (int64_t b = 0; b < nb; ++b, v += kBlock32) {
    const float d = half_bits_to_float(x[b].d);
    const u8x16 q = bytes16<u8x16>(x[b].qs);
    const uint32_t qh = bytes16<uint32_t>(x[b].qh);
    acc.lo += to_float((widen(q & 15) | fifth_bits(qh, 0)) - 16) * d * floats16(v);
    acc.hi += to_float((widen(q >> 4) | fifth_bits(qh, 16)) - 16) * d * floats16(v + 16);
  }
}

void add_q5_1(const BlockQ5_1* x, int64_t nb, const float* v, Lanes& acc) {
  for (int64_t b = 0; b < nb; ++b, v += kBlock32) {
    const float d = half_bits_to_float(x[b].d), m = half_bits_to_float(x[b].m);
    const u8x16 q = bytes16<u8x16>(x[b].qs);
    const uint32_t qh = bytes16<uint32_t>(x[b].qh);
    acc.lo += (to_float(widen(q & 15) | fifth_bits(qh, 0)) * d + m) * floats16(v);
    acc.hi += (to_float(widen(q >> 4) | fifth_bits(qh, 16)) * d + m) * floats16(v + 16);
  }
}

void add_q8_0(const BlockQ8_0* x, int64_t nb, const float* v, Lanes& acc) {
  for (int64_t b = 0; b < nb; ++b, v += kBlock32) {
    const float d = half_bits_to_float(x[b].d);
    // The signed codes widened as unsigned ones (which GCC vectorizes; the signed
    // conversion it does byte by byte): q = (q ^ 0x80 as unsigned) - 128.
    const auto weights = [&](int h) { return to_float(widen(bytes16<u8x16>(x[b].qs + 16 * h) ^ 0x80) - 128) * d; };
    acc.lo += weights(0) * floats16(v);
    acc.hi += weights(1) * floats16(v + 16);
  }
}

// Q4_K / Q5_K: 64-element pairs of sub-blocks, the low nibbles of 32 bytes then the
// high ones; Q5_K's fifth bit of element 32i + l is bit i of qh[l].
template <bool kFifth, class Block>
void add_q45_k(const Block* x, int64_t nb, const float* v, Lanes& acc) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = half_bits_to_float(x[b].d), dmin = half_bits_to_float(x[b].dmin);
    for (int pair = 0; pair < 4; ++pair, v += 64) {
      for (int h = 0; h < 2; ++h) {
        const ScaleMin sm = k_quant_scale_min(x[b].scales, 2 * pair + h);
        const float dl = d * static_cast<float>(sm.scale), ml = dmin * static_cast<float>(sm.min);
        for (int c = 0; c < 32; c += 16) {
          const u8x16 q = bytes16<u8x16>(x[b].qs + 32 * pair + c);
          u8x16 code = h == 0 ? q & 15 : q >> 4;
          if constexpr (kFifth) code |= ((bytes16<u8x16>(x[b].qh + c) >> (2 * pair + h)) & 1) << 4;
          (c == 0 ? acc.lo : acc.hi) += (dl * to_float(widen(code)) - ml) * floats16(v + 32 * h + c);
        }
      }
    }
  }
}

// Q6_K: element 128·half + 32k + l takes its low nibble from ql[l + 32(k & 1)] (low
// nibble for k < 2) and its top two bits from bits 2k..2k+1 of qh[l]; each 16
// elements share a scale.
void add_q6_k(const BlockQ6_K* x, int64_t nb, const float* v, Lanes& acc) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = half_bits_to_float(x[b].d);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = x[b].ql + 64 * half;
      const uint8_t* qh = x[b].qh + 32 * half;
      for (int k = 0; k < 4; ++k) {
        for (int c = 0; c < 32; c += 16, v += 16) {
          const u8x16 low = bytes16<u8x16>(ql + 32 * (k & 1) + c);
          const u8x16 top = (bytes16<u8x16>(qh + c) >> (2 * k)) & 3;
          const u8x16 code = (k < 2 ? low & 15 : low >> 4) | top << 4;
          const float dl = d * static_cast<float>(x[b].scales[(128 * half + 32 * k + c) / 16]);
          (c == 0 ? acc.lo : acc.hi) += dl * to_float(widen(code) - 32) * floats16(v);
        }
      }
    }
  }
}

template <class Block>
const Block* blocks(const void* row) {
  return static_cast<const Block*>(row);
}

}  // namespace

ZINC_ISA_CLONES double lane_dot(const float* a, const float* b, int64_t n) {
  Lanes acc;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    acc.lo += floats16(a + i) * floats16(b + i);
    acc.hi += floats16(a + i + 16) * floats16(b + i + 16);
  }
  double s = reduce(acc);
  for (; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

ZINC_ISA_CLONES double row_dot(DType t, const void* row, const float* x, int64_t n) {
  Lanes acc;
  const int64_t n32 = n / kBlock32, nk = n / kBlockK;
  switch (t) {
    case DType::F32: return lane_dot(static_cast<const float*>(row), x, n);
    case DType::Q4_0: add_q4_0(blocks<BlockQ4_0>(row), n32, x, acc); return reduce(acc);
    case DType::Q4_1: add_q4_1(blocks<BlockQ4_1>(row), n32, x, acc); return reduce(acc);
    case DType::Q5_0: add_q5_0(blocks<BlockQ5_0>(row), n32, x, acc); return reduce(acc);
    case DType::Q5_1: add_q5_1(blocks<BlockQ5_1>(row), n32, x, acc); return reduce(acc);
    case DType::Q8_0: add_q8_0(blocks<BlockQ8_0>(row), n32, x, acc); return reduce(acc);
    case DType::Q4_K: add_q45_k<false>(blocks<BlockQ4_K>(row), nk, x, acc); return reduce(acc);
    case DType::Q5_K: add_q45_k<true>(blocks<BlockQ5_K>(row), nk, x, acc); return reduce(acc);
    case DType::Q6_K: add_q6_k(blocks<BlockQ6_K>(row), nk, x, acc); return reduce(acc);
    default: {  // the rarer formats: the row written out first
      thread_local std::vector<float> values;
      values.resize(static_cast<size_t>(n));
      dequantize_row(t, row, values.data(), n);
      return lane_dot(values.data(), x, n);
    }
  }
}

}  // namespace zinc::cpu
