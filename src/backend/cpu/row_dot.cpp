// Written with GCC's vector extensions (clang has them too): sixteen-float vectors
// that the compiler maps onto whatever registers the chosen level has (four SSE, two
// AVX2 or one AVX-512 register). Each block format's loop forms every weight exactly
// as dequantize.cpp does (same operands, same operations), sixteen elements at a time
// in element order, and multiplies it into the lanes as lane_dot would. The 32 lanes
// are two vectors, so that two chains of additions are in flight.
#include "backend/cpu/row_dot.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/isa_clones.h"
#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/quant.h"

namespace zinc::cpu {
namespace {

using f32x16 = float __attribute__((vector_size(64)));
using i32x16 = int32_t __attribute__((vector_size(64)));
using u32x16 = uint32_t __attribute__((vector_size(64)));
using u16x16 = uint16_t __attribute__((vector_size(32)));
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

// Sixteen signed bytes as floats. They are widened as unsigned ones (which GCC
// vectorizes; the signed conversion it does byte by byte): q = (q ^ 0x80 as unsigned) - 128.
f32x16 signed_bytes_to_floats(u8x16 q) { return to_float(widen(q ^ 0x80) - 128); }

// The entries of a 16-value code book of signed bytes (IQ4_NL / IQ4_XS, MXFP4) picked
// by 4-bit codes, as floats: one byte shuffle instead of a table of floats.
f32x16 look_up(const int8_t* book, u8x16 codes) {
  return signed_bytes_to_floats(__builtin_shuffle(bytes16<u8x16>(book), codes));
}

// half_bits_to_float (quant/half.h) on 16 lanes: the same integer steps, so the same
// floats, subnormals, infinities and NaNs included.
f32x16 halves_to_floats(u16x16 halves) {
  const u32x16 h = __builtin_convertvector(halves, u32x16);
  const u32x16 sign = (h & 0x8000u) << 16, magnitude = h & 0x7fffu;
  const auto special = reinterpret_cast<u32x16>(magnitude >= 0x7c00u);  // all ones where true
  const u32x16 widened = (magnitude << 13) + (112u << 23) + (special & (112u << 23));
  const f32x16 subnormal = to_float(reinterpret_cast<i32x16>(magnitude)) * 0x1p-24f;
  const auto small = reinterpret_cast<u32x16>(magnitude < 0x0400u);
  const u32x16 bits = (reinterpret_cast<u32x16>(subnormal) & small) | (widened & ~small);
  return reinterpret_cast<f32x16>(sign | bits);
}

// Each format's decoder calls use(e, w) with the weights of elements e .. e + 15 of
// the row, in element order, each formed as dequantize.cpp forms it. In the 32-element
// formats element j < 16 of a block is the low nibble of byte j and element j + 16
// its high nibble (blocks.h).
template <class Use>
void q4_0_weights(const BlockQ4_0* x, int64_t nb, Use& use) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = half_bits_to_float(x[b].d);
    const u8x16 q = bytes16<u8x16>(x[b].qs);
    use(32 * b, to_float(widen(q & 15) - 8) * d);
    use(32 * b + 16, to_float(widen(q >> 4) - 8) * d);
  }
}

template <class Use>
void q4_1_weights(const BlockQ4_1* x, int64_t nb, Use& use) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = half_bits_to_float(x[b].d), m = half_bits_to_float(x[b].m);
    const u8x16 q = bytes16<u8x16>(x[b].qs);
    use(32 * b, to_float(widen(q & 15)) * d + m);
    use(32 * b + 16, to_float(widen(q >> 4)) * d + m);
  }
}

template <class Use>
void q5_0_weights(const BlockQ5_0* x, int64_t nb, Use& use) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = half_bits_to_float(x[b].d);
    const u8x16 q = bytes16<u8x16>(x[b].qs);
    const uint32_t qh = bytes16<uint32_t>(x[b].qh);
    use(32 * b, to_float((widen(q & 15) | fifth_bits(qh, 0)) - 16) * d);
    use(32 * b + 16, to_float((widen(q >> 4) | fifth_bits(qh, 16)) - 16) * d);
  }
}

template <class Use>
void q5_1_weights(const BlockQ5_1* x, int64_t nb, Use& use) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = half_bits_to_float(x[b].d), m = half_bits_to_float(x[b].m);
    const u8x16 q = bytes16<u8x16>(x[b].qs);
    const uint32_t qh = bytes16<uint32_t>(x[b].qh);
    use(32 * b, to_float(widen(q & 15) | fifth_bits(qh, 0)) * d + m);
    use(32 * b + 16, to_float(widen(q >> 4) | fifth_bits(qh, 16)) * d + m);
  }
}

// Q8_0 / Q8_1 (whose block also holds a sum, unused here).
template <class Block, class Use>
void q8_weights(const Block* x, int64_t nb, Use& use) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = half_bits_to_float(x[b].d);
    for (int h = 0; h < 2; ++h) use(32 * b + 16 * h, signed_bytes_to_floats(bytes16<u8x16>(x[b].qs + 16 * h)) * d);
  }
}

// dequantize_row looks IQ4_NL and MXFP4 codes up in a table of the code book times the
// block's scale; these are the same products, formed per element.
template <class Use>
void iq4_nl_weights(const BlockIQ4_NL* x, int64_t nb, Use& use) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = half_bits_to_float(x[b].d);
    const u8x16 q = bytes16<u8x16>(x[b].qs);
    use(32 * b, d * look_up(kIq4nlValues, q & 15));
    use(32 * b + 16, d * look_up(kIq4nlValues, q >> 4));
  }
}

template <class Use>
void mxfp4_weights(const BlockMXFP4* x, int64_t nb, Use& use) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = e8m0_half_to_fp32(x[b].e);
    const u8x16 q = bytes16<u8x16>(x[b].qs);
    use(32 * b, look_up(kMxfp4Values, q & 15) * d);
    use(32 * b + 16, look_up(kMxfp4Values, q >> 4) * d);
  }
}

// Q2_K / Q3_K: element 128·half + 32k + l of a block is bits 2k..2k+1 of
// qs[32·half + l]; each 16 elements share a scale.
template <class Use>
void q2_k_weights(const BlockQ2_K* x, int64_t nb, Use& use) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = half_bits_to_float(x[b].d), dmin = half_bits_to_float(x[b].dmin);
    for (int half = 0; half < 2; ++half)
      for (int k = 0; k < 4; ++k)
        for (int c = 0; c < 32; c += 16) {
          const int e = 128 * half + 32 * k + c;
          const u8x16 code = (bytes16<u8x16>(x[b].qs + 32 * half + c) >> (2 * k)) & 3;
          const uint8_t scale_min = x[b].scales[e / 16];
          const float dl = d * static_cast<float>(scale_min & 15), ml = dmin * static_cast<float>(scale_min >> 4);
          use(kBlockK * b + e, dl * to_float(widen(code)) - ml);
        }
  }
}

// Q3_K: element e's code is q - 4 unless bit e / 32 of hmask[e % 32] is set, that is
// (q | bit << 2) - 4. The sixteen scales are formed first, out of the vector loop.
template <class Use>
void q3_k_weights(const BlockQ3_K* x, int64_t nb, Use& use) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = half_bits_to_float(x[b].d);
    float dl[16];
    for (int sub = 0; sub < 16; ++sub) dl[sub] = d * static_cast<float>(q3_k_scale(x[b].scales, sub) - 32);
    for (int half = 0; half < 2; ++half)
      for (int k = 0; k < 4; ++k)
        for (int c = 0; c < 32; c += 16) {
          const int e = 128 * half + 32 * k + c;
          const u8x16 code = (bytes16<u8x16>(x[b].qs + 32 * half + c) >> (2 * k)) & 3;
          const u8x16 high = (bytes16<u8x16>(x[b].hmask + c) >> (4 * half + k)) & 1;
          use(kBlockK * b + e, dl[e / 16] * to_float(widen(code | high << 2) - 4));
        }
  }
}

// Q4_K / Q5_K: 64-element pairs of sub-blocks, the low nibbles of 32 bytes then the
// high ones; Q5_K's fifth bit of element 32i + l is bit i of qh[l].
template <bool kFifth, class Block, class Use>
void q45_k_weights(const Block* x, int64_t nb, Use& use) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = half_bits_to_float(x[b].d), dmin = half_bits_to_float(x[b].dmin);
    for (int sub = 0; sub < 8; ++sub) {
      const ScaleMin sm = k_quant_scale_min(x[b].scales, sub);
      const float dl = d * static_cast<float>(sm.scale), ml = dmin * static_cast<float>(sm.min);
      for (int c = 0; c < 32; c += 16) {
        const u8x16 q = bytes16<u8x16>(x[b].qs + 32 * (sub / 2) + c);
        u8x16 code = sub % 2 == 0 ? q & 15 : q >> 4;
        if constexpr (kFifth) code |= ((bytes16<u8x16>(x[b].qh + c) >> sub) & 1) << 4;
        use(kBlockK * b + 32 * sub + c, dl * to_float(widen(code)) - ml);
      }
    }
  }
}

// Q6_K: element 128·half + 32k + l takes its low nibble from ql[l + 32(k & 1)] (low
// nibble for k < 2) and its top two bits from bits 2k..2k+1 of qh[l]; each 16
// elements share a scale.
template <class Use>
void q6_k_weights(const BlockQ6_K* x, int64_t nb, Use& use) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = half_bits_to_float(x[b].d);
    for (int half = 0; half < 2; ++half)
      for (int k = 0; k < 4; ++k)
        for (int c = 0; c < 32; c += 16) {
          const int e = 128 * half + 32 * k + c;
          const u8x16 low = bytes16<u8x16>(x[b].ql + 64 * half + 32 * (k & 1) + c);
          const u8x16 top = (bytes16<u8x16>(x[b].qh + 32 * half + c) >> (2 * k)) & 3;
          const u8x16 code = (k < 2 ? low & 15 : low >> 4) | top << 4;
          const float dl = d * static_cast<float>(x[b].scales[e / 16]);
          use(kBlockK * b + e, dl * to_float(widen(code) - 32));
        }
  }
}

// Q8_K: a float scale (its sums of 16 are not needed here).
template <class Use>
void q8_k_weights(const BlockQ8_K* x, int64_t nb, Use& use) {
  for (int64_t b = 0; b < nb; ++b)
    for (int e = 0; e < kBlockK; e += 16)
      use(kBlockK * b + e, x[b].d * signed_bytes_to_floats(bytes16<u8x16>(x[b].qs + e)));
}

// IQ4_XS: IQ4_NL's code book scaled per 32-element sub-block.
template <class Use>
void iq4_xs_weights(const BlockIQ4_XS* x, int64_t nb, Use& use) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = half_bits_to_float(x[b].d);
    for (int sub = 0; sub < 8; ++sub) {
      const float dl = d * static_cast<float>(iq4_xs_scale(x[b], sub) - 32);
      const u8x16 q = bytes16<u8x16>(x[b].qs + 16 * sub);
      use(kBlockK * b + 32 * sub, dl * look_up(kIq4nlValues, q & 15));
      use(kBlockK * b + 32 * sub + 16, dl * look_up(kIq4nlValues, q >> 4));
    }
  }
}

// F32, F16 and BF16 rows, sixteen values at a time.
template <class Use>
void f32_weights(const uint8_t* row, int64_t n, Use& use) {
  for (int64_t e = 0; e < n; e += 16) use(e, floats16(reinterpret_cast<const float*>(row) + e));
}

template <class Use>
void f16_weights(const uint8_t* row, int64_t n, Use& use) {
  for (int64_t e = 0; e < n; e += 16) use(e, halves_to_floats(bytes16<u16x16>(row + 2 * e)));
}

template <class Use>
void bf16_weights(const uint8_t* row, int64_t n, Use& use) {
  for (int64_t e = 0; e < n; e += 16)
    use(e, reinterpret_cast<f32x16>(__builtin_convertvector(bytes16<u16x16>(row + 2 * e), u32x16) << 16));
}

template <class Block>
const Block* blocks(const void* row) {
  return static_cast<const Block*>(row);
}

// Feeds the row's weights to use; false for F64 rows and for plain rows whose length
// is not a multiple of 32 (which lane_dot ends in double).
template <class Use>
bool each_weight(DType t, const void* row, int64_t n, Use& use) {
  const int64_t n32 = n / kBlock32, nk = n / kBlockK;
  const auto* bytes = static_cast<const uint8_t*>(row);
  const bool whole_lanes = n % kLanes == 0;
  switch (t) {
    case DType::F32: return whole_lanes && (f32_weights(bytes, n, use), true);
    case DType::F16: return whole_lanes && (f16_weights(bytes, n, use), true);
    case DType::BF16: return whole_lanes && (bf16_weights(bytes, n, use), true);
    case DType::Q4_0: q4_0_weights(blocks<BlockQ4_0>(row), n32, use); return true;
    case DType::Q4_1: q4_1_weights(blocks<BlockQ4_1>(row), n32, use); return true;
    case DType::Q5_0: q5_0_weights(blocks<BlockQ5_0>(row), n32, use); return true;
    case DType::Q5_1: q5_1_weights(blocks<BlockQ5_1>(row), n32, use); return true;
    case DType::Q8_0: q8_weights(blocks<BlockQ8_0>(row), n32, use); return true;
    case DType::Q8_1: q8_weights(blocks<BlockQ8_1>(row), n32, use); return true;
    case DType::Q2_K: q2_k_weights(blocks<BlockQ2_K>(row), nk, use); return true;
    case DType::Q3_K: q3_k_weights(blocks<BlockQ3_K>(row), nk, use); return true;
    case DType::Q4_K: q45_k_weights<false>(blocks<BlockQ4_K>(row), nk, use); return true;
    case DType::Q5_K: q45_k_weights<true>(blocks<BlockQ5_K>(row), nk, use); return true;
    case DType::Q6_K: q6_k_weights(blocks<BlockQ6_K>(row), nk, use); return true;
    case DType::Q8_K: q8_k_weights(blocks<BlockQ8_K>(row), nk, use); return true;
    case DType::IQ4_NL: iq4_nl_weights(blocks<BlockIQ4_NL>(row), n32, use); return true;
    case DType::IQ4_XS: iq4_xs_weights(blocks<BlockIQ4_XS>(row), nk, use); return true;
    case DType::MXFP4: mxfp4_weights(blocks<BlockMXFP4>(row), n32, use); return true;
    default: return false;
  }
}

// T tokens' lanes: element e's product goes to lane e % 32 of each token's sums.
template <int T>
struct TokenLanes {
  const float* x[T];
  Lanes acc[T];
  void operator()(int64_t e, f32x16 w) {
    for (int j = 0; j < T; ++j) (e % 32 == 0 ? acc[j].lo : acc[j].hi) += w * floats16(x[j] + e);
  }
};

// y[j · y_stride] = row · x_j for T tokens, each block decoded once for all of them.
template <int T>
bool dot_tokens(DType t, const void* row, const float* x, int64_t x_stride, int64_t n, float* y, int64_t y_stride) {
  TokenLanes<T> lanes;
  for (int j = 0; j < T; ++j) lanes.x[j] = x + j * x_stride;
  if (!each_weight(t, row, n, lanes)) return false;
  for (int j = 0; j < T; ++j) y[j * y_stride] = static_cast<float>(reduce(lanes.acc[j]));
  return true;
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

// The decoders pay off only where a sixteen-float vector is one register (AVX-512).
// With AVX2 or SSE, GCC 12 widens their code bytes to 32 bits one at a time, and a
// row decoded that way is several times slower than one written out by dequantize_row
// (SmolLM2-135M Q4_1 on two threads: 7.5 tokens/s against 20-24, docs/PERFORMANCE.md,
// session 32). Elsewhere rows are written out; the sums are the same either way.
bool decoders_pay_off() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool wide = __builtin_cpu_supports("avx512f");
  return wide;
#else
  return false;
#endif
}

ZINC_ISA_CLONES void row_dot(DType t, const void* row, const float* x, int64_t x_stride, int64_t n_tokens,
                             int64_t n, float* y, int64_t y_stride) {
  // Four tokens a pass over the row: each x vector is loaded once per weight vector
  // and the row stays in L1, so this beats a written-out row at any token count.
  bool decoded = decoders_pay_off();
  for (int64_t j = 0; decoded && j < n_tokens; j += 4) {
    const float* xj = x + j * x_stride;
    float* yj = y + j * y_stride;
    switch (std::min<int64_t>(n_tokens - j, 4)) {
      case 1: decoded = dot_tokens<1>(t, row, xj, x_stride, n, yj, y_stride); break;
      case 2: decoded = dot_tokens<2>(t, row, xj, x_stride, n, yj, y_stride); break;
      case 3: decoded = dot_tokens<3>(t, row, xj, x_stride, n, yj, y_stride); break;
      default: decoded = dot_tokens<4>(t, row, xj, x_stride, n, yj, y_stride); break;
    }
  }
  if (decoded) return;
  // The rest: the row written out once (an F32 row is already).
  thread_local std::vector<float> values;
  const float* w = static_cast<const float*>(row);
  if (t != DType::F32) {
    values.resize(static_cast<size_t>(n));
    dequantize_row(t, row, values.data(), n);
    w = values.data();
  }
  for (int64_t j = 0; j < n_tokens; ++j) y[j * y_stride] = static_cast<float>(lane_dot(w, x + j * x_stride, n));
}

}  // namespace zinc::cpu
