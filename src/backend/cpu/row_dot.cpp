// Written with GCC's vector extensions: vectors of W floats, W the chosen level's
// register width (sixteen with AVX-512, eight with AVX2, four below), so that every
// vector a loop carries is one register. (GCC 12 keeps a vector wider than the
// machine's in memory, and widens its bytes to 32 bits one at a time: AVX2 decoded
// three times slower than AVX-512 when both ran sixteen-float vectors,
// docs/PERFORMANCE.md, session 32.) Each block format's loop forms every weight exactly
// as dequantize.cpp does (same operands, same operations), W elements at a time, and
// multiplies it into the 32 lanes as lane_dot would. Each lane gets its products in
// element order at every width, so every level's sums are the same bits.
#include "backend/cpu/row_dot.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <utility>
#include <vector>

#include "backend/cpu/isa_levels.h"
#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/quant.h"

namespace zinc::cpu {
namespace {

constexpr int kLanes = 32;

// Vectors of W lanes (typedefs: GCC ignores a dependent vector_size on `using`).
template <int W>
struct V {
  typedef float f32 __attribute__((vector_size(4 * W)));
  typedef int32_t i32 __attribute__((vector_size(4 * W)));
  typedef uint32_t u32 __attribute__((vector_size(4 * W)));
  typedef uint16_t u16 __attribute__((vector_size(2 * W)));
  typedef float f32_half __attribute__((vector_size(2 * W)));
  typedef double f64 __attribute__((vector_size(4 * W)));  // W / 2 doubles: one register
};

template <class Vec>
Vec load(const void* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// f(c) for c = 0, W, .. N - W, each a constant: the lanes a weight vector goes to
// must be known when compiling (a vector picked at run time lives in memory).
template <int W, int N, class F>
void each_vector(F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) { (f(I * W), ...); }(std::make_integer_sequence<int, N / W>());
}

template <class Vec, size_t... I>
Vec iota(std::index_sequence<I...>) {
  return Vec{static_cast<decltype(Vec{}[0])>(I)...};
}

// W bytes from p, unsigned or signed, widened to 32 bits. GCC 12 splits a widening
// of bytes into one per byte and leaves it to the SLP vectorizer to join them again,
// which it does only for bytes it cannot trace to their load or to byte operations
// (with AVX2 it did not, vpextrb / vpinsrd); a volatile load it keeps whole, so
// vpmovzxbd, from memory with AVX-512. The decoders mask and shift their codes
// after widening: for unsigned bytes, the same values.
template <int W, class Byte = uint8_t>
typename V<W>::i32 widen(const void* p) {
  typedef Byte bytes __attribute__((vector_size(W), aligned(1), may_alias));
  return __builtin_convertvector(*static_cast<const volatile bytes*>(p), typename V<W>::i32);
}
template <int W>
typename V<W>::f32 to_float(typename V<W>::i32 q) {
  return __builtin_convertvector(q, typename V<W>::f32);
}

// The 32 lanes in order, as lane_dot sums them.
template <int W>
double reduce(const typename V<W>::f32 (&acc)[kLanes / W]) {
  double s = 0;
  for (int v = 0; v < kLanes / W; ++v)
    for (int j = 0; j < W; ++j) s += acc[v][j];
  return s;
}

// lane_dot's 32 float lanes over the first `whole` elements (a multiple of 32): element
// i's product goes to lane i % 32. Zeroed by assignment: `= {}` on an array that is
// then stored became a `rep stos` in lane_dots (PERFORMANCE.md, session 59).
template <int W>
void lane_products(const float* a, const float* b, int64_t whole, typename V<W>::f32 (&acc)[kLanes / W]) {
  using F = typename V<W>::f32;
  for (int v = 0; v < kLanes / W; ++v) acc[v] = F{};
  for (int64_t i = 0; i < whole; i += kLanes)
    for (int v = 0; v < kLanes / W; ++v) acc[v] += load<F>(a + i + W * v) * load<F>(b + i + W * v);
}

// s plus the products of elements from .. n - 1 in double: how lane_dot ends a row
// whose length is not a multiple of 32.
double plus_tail(const float* a, const float* b, int64_t from, int64_t n, double s) {
  for (int64_t i = from; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

template <int W>
double lane_dot_w(const float* a, const float* b, int64_t n) {
  typename V<W>::f32 acc[kLanes / W];
  const int64_t whole = n / kLanes * kLanes;
  lane_products<W>(a, b, whole, acc);
  return plus_tail(a, b, whole, n, reduce<W>(acc));
}

// lane_dot of a with count rows of b. Each row's lanes are summed as lane_dot sums
// them, but kRows rows at a time, one double lane per row, so that the 32 dependent
// adds of one row overlap with the other rows' (one row's alone are the chain that
// bounded attention's scores). Each vector of sums is one register (V<W>::f64).
template <int W>
void lane_dots_w(const float* a, const float* b, int64_t b_stride, int64_t count, int64_t n, double* out) {
  using F = typename V<W>::f32;
  using D = typename V<W>::f64;
  constexpr int kRows = 8, kPer = W / 2, kSums = kRows / kPer;
  const int64_t whole = n / kLanes * kLanes;
  int64_t r = 0;
  for (; r + kRows <= count; r += kRows) {
    float lanes[kRows][kLanes];
    for (int k = 0; k < kRows; ++k) {
      F acc[kLanes / W];
      lane_products<W>(a, b + (r + k) * b_stride, whole, acc);
      for (int v = 0; v < kLanes / W; ++v) std::memcpy(lanes[k] + W * v, &acc[v], sizeof(F));
    }
    D sums[kSums] = {};
    for (int l = 0; l < kLanes; ++l)
      for (int g = 0; g < kSums; ++g) {
        D lane;
        for (int e = 0; e < kPer; ++e) lane[e] = lanes[g * kPer + e][l];
        sums[g] += lane;
      }
    for (int k = 0; k < kRows; ++k)
      out[r + k] = plus_tail(a, b + (r + k) * b_stride, whole, n, sums[k / kPer][k % kPer]);
  }
  for (; r < count; ++r) out[r] = lane_dot_w<W>(a, b + r * b_stride, n);
}

// acc += w[r] · row r, in double, 2W elements of acc held in registers over all rows.
template <int W>
void add_weighted_rows_w(const double* w, const float* b, int64_t b_stride, int64_t count, int64_t n, double* acc) {
  using half_f = typename V<W>::f32_half;
  using dv = typename V<W>::f64;
  constexpr int kPer = W / 2, kVecs = 4, kSpan = kPer * kVecs;
  int64_t j = 0;
  for (; j + kSpan <= n; j += kSpan) {
    dv sum[kVecs];
    for (int v = 0; v < kVecs; ++v) sum[v] = load<dv>(acc + j + kPer * v);
    for (int64_t r = 0; r < count; ++r) {
      const float* row = b + r * b_stride + j;
      for (int v = 0; v < kVecs; ++v) sum[v] += w[r] * __builtin_convertvector(load<half_f>(row + kPer * v), dv);
    }
    std::memcpy(acc + j, sum, sizeof sum);
  }
  for (; j < n; ++j)
    for (int64_t r = 0; r < count; ++r) acc[j] += w[r] * b[r * b_stride + j];
}

// Bits from .. from + W - 1 of a Q5_0 / Q5_1 block's qh word, as bit 4 of a code.
template <int W>
typename V<W>::i32 fifth_bits(uint32_t qh, int from) {
  using U = typename V<W>::u32;
  const U bits = ((U{} + (qh >> from)) >> iota<U>(std::make_index_sequence<W>())) & 1u;
  return __builtin_convertvector(bits << 4, typename V<W>::i32);
}

// A 16-value code book of signed bytes (IQ4_NL / IQ4_XS, MXFP4) as floats, and
// dequantize_row's table of its values times a block's scale, in 16 / W vectors,
// from which a vector of 4-bit codes picks the weights (one vpermps with AVX-512; two
// and a blend with AVX2).
struct CodeBook {
  float v[16];
};
constexpr CodeBook as_floats(const int8_t (&book)[16]) {
  CodeBook f{};
  for (int k = 0; k < 16; ++k) f.v[k] = static_cast<float>(book[k]);
  return f;
}
constexpr CodeBook kIq4nlFloats = as_floats(kIq4nlValues), kMxfp4Floats = as_floats(kMxfp4Values);

template <int W>
struct Table {
  static_assert(W == 8 || W == 16);
  typename V<W>::f32 v[16 / W];
  typename V<W>::f32 pick(typename V<W>::i32 codes) const {
#if defined(__clang__)  // no shuffle by a run-time mask: each lane reads the table (the same values)
    float f[16];
    std::memcpy(f, v, sizeof f);
    typename V<W>::f32 w;
    for (int i = 0; i < W; ++i) w[i] = f[codes[i]];
    return w;
#else
    if constexpr (W == 16)
      return __builtin_shuffle(v[0], codes);
    else
      return __builtin_shuffle(v[0], v[1], codes);
#endif
  }
};
// dequantize_row's IQ4_NL / IQ4_XS table, d · book[k] ...
template <int W>
Table<W> scaled_before(float d, const CodeBook& book) {
  Table<W> t;
  for (int i = 0; i < 16 / W; ++i) t.v[i] = d * load<typename V<W>::f32>(book.v + W * i);
  return t;
}
// ... and its MXFP4 table, book[k] · d.
template <int W>
Table<W> scaled_after(const CodeBook& book, float d) {
  Table<W> t;
  for (int i = 0; i < 16 / W; ++i) t.v[i] = load<typename V<W>::f32>(book.v + W * i) * d;
  return t;
}

// half_bits_to_float (quant/half.h) on W lanes: the same integer steps, so the same
// floats, subnormals, infinities and NaNs included.
template <int W>
typename V<W>::f32 halves_to_floats(typename V<W>::u16 halves) {
  using U = typename V<W>::u32;
  const U h = __builtin_convertvector(halves, U);
  const U sign = (h & 0x8000u) << 16, magnitude = h & 0x7fffu;
  const auto special = reinterpret_cast<U>(magnitude >= 0x7c00u);  // all ones where true
  const U widened = (magnitude << 13) + (112u << 23) + (special & (112u << 23));
  const auto subnormal = to_float<W>(reinterpret_cast<typename V<W>::i32>(magnitude)) * 0x1p-24f;
  const auto small = reinterpret_cast<U>(magnitude < 0x0400u);
  const U bits = (reinterpret_cast<U>(subnormal) & small) | (widened & ~small);
  return reinterpret_cast<typename V<W>::f32>(sign | bits);
}

// Each format's decoder calls use(e, w) with the weights of elements e .. e + W - 1
// of the row, each formed as dequantize.cpp forms it, and element e + 32 after
// element e, the order of each lane's sum. (The 256-element formats take each W lanes
// through all their 32-element groups in turn, so that each byte vector is loaded
// once.) In the 32-element formats element j < 16 of a block is the low nibble of
// byte j and element j + 16 its high nibble (blocks.h).
template <int W, class Use>
void q4_0_weights(const BlockQ4_0* x, int64_t nb, Use& use) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = half_float(x[b].d);
    each_vector<W, 16>([&](int c) {
      const auto q = widen<W>(x[b].qs + c);
      use(32 * b + c, to_float<W>((q & 15) - 8) * d);
      use(32 * b + 16 + c, to_float<W>((q >> 4) - 8) * d);
    });
  }
}

template <int W, class Use>
void q4_1_weights(const BlockQ4_1* x, int64_t nb, Use& use) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = half_float(x[b].d), m = half_float(x[b].m);
    each_vector<W, 16>([&](int c) {
      const auto q = widen<W>(x[b].qs + c);
      use(32 * b + c, to_float<W>(q & 15) * d + m);
      use(32 * b + 16 + c, to_float<W>(q >> 4) * d + m);
    });
  }
}

template <int W, class Use>
void q5_0_weights(const BlockQ5_0* x, int64_t nb, Use& use) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = half_float(x[b].d);
    const uint32_t qh = load<uint32_t>(x[b].qh);
    each_vector<W, 16>([&](int c) {
      const auto q = widen<W>(x[b].qs + c);
      use(32 * b + c, to_float<W>(((q & 15) | fifth_bits<W>(qh, c)) - 16) * d);
      use(32 * b + 16 + c, to_float<W>(((q >> 4) | fifth_bits<W>(qh, 16 + c)) - 16) * d);
    });
  }
}

template <int W, class Use>
void q5_1_weights(const BlockQ5_1* x, int64_t nb, Use& use) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = half_float(x[b].d), m = half_float(x[b].m);
    const uint32_t qh = load<uint32_t>(x[b].qh);
    each_vector<W, 16>([&](int c) {
      const auto q = widen<W>(x[b].qs + c);
      use(32 * b + c, to_float<W>((q & 15) | fifth_bits<W>(qh, c)) * d + m);
      use(32 * b + 16 + c, to_float<W>((q >> 4) | fifth_bits<W>(qh, 16 + c)) * d + m);
    });
  }
}

// Q8_0 / Q8_1 (whose block also holds a sum, unused here).
template <int W, class Block, class Use>
void q8_weights(const Block* x, int64_t nb, Use& use) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = half_float(x[b].d);
    each_vector<W, 32>([&](int c) { use(32 * b + c, to_float<W>(widen<W, int8_t>(x[b].qs + c)) * d); });
  }
}

// The 32 weights e .. e + 31 of 16 bytes of 4-bit codes (element j the low nibble of
// byte j, element j + 16 its high nibble), picked from a scaled code book.
template <int W, class Use>
void pick_nibbles(const Table<W>& table, const uint8_t* qs, int64_t e, Use& use) {
  each_vector<W, 16>([&](int c) {
    const auto q = widen<W>(qs + c);
    use(e + c, table.pick(q & 15));
    use(e + 16 + c, table.pick(q >> 4));
  });
}

// IQ4_NL and MXFP4 pick from dequantize_row's table of the code book times the
// block's scale.
template <int W, class Use>
void iq4_nl_weights(const BlockIQ4_NL* x, int64_t nb, Use& use) {
  for (int64_t b = 0; b < nb; ++b)
    pick_nibbles<W>(scaled_before<W>(half_float(x[b].d), kIq4nlFloats), x[b].qs, 32 * b, use);
}

template <int W, class Use>
void mxfp4_weights(const BlockMXFP4* x, int64_t nb, Use& use) {
  for (int64_t b = 0; b < nb; ++b)
    pick_nibbles<W>(scaled_after<W>(kMxfp4Floats, e8m0_half_to_fp32(x[b].e)), x[b].qs, 32 * b, use);
}

// Q2_K / Q3_K: element 128·half + 32k + l of a block is bits 2k..2k+1 of
// qs[32·half + l]; each 16 elements share a scale.
template <int W, class Use>
void q2_k_weights(const BlockQ2_K* x, int64_t nb, Use& use) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = half_float(x[b].d), dmin = half_float(x[b].dmin);
    each_vector<W, 32>([&](int c) {
      for (int half = 0; half < 2; ++half) {
        const auto q = widen<W>(x[b].qs + 32 * half + c);
        for (int k = 0; k < 4; ++k) {
          const int e = 128 * half + 32 * k + c;
          const uint8_t scale_min = x[b].scales[e / 16];
          const float dl = d * static_cast<float>(scale_min & 15), ml = dmin * static_cast<float>(scale_min >> 4);
          use(kBlockK * b + e, dl * to_float<W>((q >> (2 * k)) & 3) - ml);
        }
      }
    });
  }
}

// Q3_K: element e's code is q - 4 unless bit e / 32 of hmask[e % 32] is set, that is
// (q | bit << 2) - 4. The sixteen scales are formed first, out of the vector loop.
template <int W, class Use>
void q3_k_weights(const BlockQ3_K* x, int64_t nb, Use& use) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = half_float(x[b].d);
    float dl[16];
    for (int sub = 0; sub < 16; ++sub) dl[sub] = d * static_cast<float>(q3_k_scale(x[b].scales, sub) - 32);
    each_vector<W, 32>([&](int c) {
      const auto hmask = widen<W>(x[b].hmask + c);
      for (int half = 0; half < 2; ++half) {
        const auto q = widen<W>(x[b].qs + 32 * half + c);
        for (int k = 0; k < 4; ++k) {
          const int e = 128 * half + 32 * k + c;
          const auto code = (q >> (2 * k)) & 3, high = (hmask >> (4 * half + k)) & 1;
          use(kBlockK * b + e, dl[e / 16] * to_float<W>((code | high << 2) - 4));
        }
      }
    });
  }
}

// Q4_K / Q5_K: 64-element pairs of sub-blocks, the low nibbles of 32 bytes then the
// high ones; Q5_K's fifth bit of element 32i + l is bit i of qh[l].
template <int W, bool kFifth, class Block, class Use>
void q45_k_weights(const Block* x, int64_t nb, Use& use) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = half_float(x[b].d), dmin = half_float(x[b].dmin);
    float dl[8], ml[8];
    for (int sub = 0; sub < 8; ++sub) {
      const ScaleMin sm = k_quant_scale_min(x[b].scales, sub);
      dl[sub] = d * static_cast<float>(sm.scale), ml[sub] = dmin * static_cast<float>(sm.min);
    }
    each_vector<W, 32>([&](int c) {
      [[maybe_unused]] typename V<W>::i32 qh;
      if constexpr (kFifth) qh = widen<W>(x[b].qh + c);
      for (int pair = 0; pair < 4; ++pair) {
        const auto q = widen<W>(x[b].qs + 32 * pair + c);
        for (int sub = 2 * pair; sub < 2 * pair + 2; ++sub) {
          auto code = sub % 2 == 0 ? q & 15 : q >> 4;
          if constexpr (kFifth) code |= ((qh >> sub) & 1) << 4;
          use(kBlockK * b + 32 * sub + c, dl[sub] * to_float<W>(code) - ml[sub]);
        }
      }
    });
  }
}

// Q6_K: element 128·half + 32k + l takes its low nibble from ql[l + 32(k & 1)] (low
// nibble for k < 2) and its top two bits from bits 2k..2k+1 of qh[l]; each 16
// elements share a scale.
template <int W, class Use>
void q6_k_weights(const BlockQ6_K* x, int64_t nb, Use& use) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = half_float(x[b].d);
    each_vector<W, 32>([&](int c) {
      for (int half = 0; half < 2; ++half) {
        const auto qh = widen<W>(x[b].qh + 32 * half + c);
        const typename V<W>::i32 ql[2] = {widen<W>(x[b].ql + 64 * half + c), widen<W>(x[b].ql + 64 * half + 32 + c)};
        for (int k = 0; k < 4; ++k) {
          const int e = 128 * half + 32 * k + c;
          const auto code = (k < 2 ? ql[k & 1] & 15 : ql[k & 1] >> 4) | ((qh >> (2 * k)) & 3) << 4;
          const float dl = d * static_cast<float>(x[b].scales[e / 16]);
          use(kBlockK * b + e, dl * to_float<W>(code - 32));
        }
      }
    });
  }
}

// Q8_K: a float scale (its sums of 16 are not needed here).
template <int W, class Use>
void q8_k_weights(const BlockQ8_K* x, int64_t nb, Use& use) {
  for (int64_t b = 0; b < nb; ++b)
    for (int e = 0; e < kBlockK; e += kLanes)
      each_vector<W, kLanes>([&](int c) {
        use(kBlockK * b + e + c, x[b].d * to_float<W>(widen<W, int8_t>(x[b].qs + e + c)));
      });
}

// IQ4_XS: IQ4_NL's code book scaled per 32-element sub-block.
template <int W, class Use>
void iq4_xs_weights(const BlockIQ4_XS* x, int64_t nb, Use& use) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = half_float(x[b].d);
    for (int sub = 0; sub < 8; ++sub) {
      const float dl = d * static_cast<float>(iq4_xs_scale(x[b], sub) - 32);
      pick_nibbles<W>(scaled_before<W>(dl, kIq4nlFloats), x[b].qs + 16 * sub, kBlockK * b + 32 * sub, use);
    }
  }
}

// F32, F16 and BF16 rows, a multiple of 32 long.
template <int W, class Use>
void f32_weights(const uint8_t* row, int64_t n, Use& use) {
  for (int64_t e = 0; e < n; e += kLanes)
    each_vector<W, kLanes>([&](int c) { use(e + c, load<typename V<W>::f32>(row + 4 * (e + c))); });
}

template <int W, class Use>
void f16_weights(const uint8_t* row, int64_t n, Use& use) {
  for (int64_t e = 0; e < n; e += kLanes)
    each_vector<W, kLanes>([&](int c) {
      use(e + c, halves_to_floats<W>(load<typename V<W>::u16>(row + 2 * (e + c))));
    });
}

template <int W, class Use>
void bf16_weights(const uint8_t* row, int64_t n, Use& use) {
  using U = typename V<W>::u32;
  for (int64_t e = 0; e < n; e += kLanes)
    each_vector<W, kLanes>([&](int c) {
      const U bits = __builtin_convertvector(load<typename V<W>::u16>(row + 2 * (e + c)), U) << 16;
      use(e + c, reinterpret_cast<typename V<W>::f32>(bits));
    });
}

template <class Block>
const Block* blocks(const void* row) {
  return static_cast<const Block*>(row);
}

// Feeds the row's weights to use; false for F64 rows and for plain rows whose length
// is not a multiple of 32 (which lane_dot ends in double).
template <int W, class Use>
bool each_weight(DType t, const void* row, int64_t n, Use& use) {
  const int64_t n32 = n / kBlock32, nk = n / kBlockK;
  const auto* bytes = static_cast<const uint8_t*>(row);
  const bool whole_lanes = n % kLanes == 0;
  switch (t) {
    case DType::F32: return whole_lanes && (f32_weights<W>(bytes, n, use), true);
    case DType::F16: return whole_lanes && (f16_weights<W>(bytes, n, use), true);
    case DType::BF16: return whole_lanes && (bf16_weights<W>(bytes, n, use), true);
    case DType::Q4_0: q4_0_weights<W>(blocks<BlockQ4_0>(row), n32, use); return true;
    case DType::Q4_1: q4_1_weights<W>(blocks<BlockQ4_1>(row), n32, use); return true;
    case DType::Q5_0: q5_0_weights<W>(blocks<BlockQ5_0>(row), n32, use); return true;
    case DType::Q5_1: q5_1_weights<W>(blocks<BlockQ5_1>(row), n32, use); return true;
    case DType::Q8_0: q8_weights<W>(blocks<BlockQ8_0>(row), n32, use); return true;
    case DType::Q8_1: q8_weights<W>(blocks<BlockQ8_1>(row), n32, use); return true;
    case DType::Q2_K: q2_k_weights<W>(blocks<BlockQ2_K>(row), nk, use); return true;
    case DType::Q3_K: q3_k_weights<W>(blocks<BlockQ3_K>(row), nk, use); return true;
    case DType::Q4_K: q45_k_weights<W, false>(blocks<BlockQ4_K>(row), nk, use); return true;
    case DType::Q5_K: q45_k_weights<W, true>(blocks<BlockQ5_K>(row), nk, use); return true;
    case DType::Q6_K: q6_k_weights<W>(blocks<BlockQ6_K>(row), nk, use); return true;
    case DType::Q8_K: q8_k_weights<W>(blocks<BlockQ8_K>(row), nk, use); return true;
    case DType::IQ4_NL: iq4_nl_weights<W>(blocks<BlockIQ4_NL>(row), n32, use); return true;
    case DType::IQ4_XS: iq4_xs_weights<W>(blocks<BlockIQ4_XS>(row), nk, use); return true;
    case DType::MXFP4: mxfp4_weights<W>(blocks<BlockMXFP4>(row), n32, use); return true;
    default: return false;
  }
}

// T tokens' lanes: element e's product goes to lane e % 32 of each token's sums. The
// decoders' offsets e are multiples of 32 plus constants, so the vector is known.
template <int T, int W>
struct TokenLanes {
  using F = typename V<W>::f32;
  const float* x[T];
  F acc[T][kLanes / W] = {};
  void operator()(int64_t e, F w) {
    const int v = static_cast<int>(static_cast<uint64_t>(e) % kLanes) / W;
    for (int j = 0; j < T; ++j) acc[j][v] += w * load<F>(x[j] + e);
  }
};

// y[j · y_stride] = row · x_j for T tokens, each block decoded once for all of them.
template <int T, int W>
bool dot_tokens(DType t, const void* row, const float* x, int64_t x_stride, int64_t n, float* y, int64_t y_stride) {
  TokenLanes<T, W> lanes;
  for (int j = 0; j < T; ++j) lanes.x[j] = x + j * x_stride;
  if (!each_weight<W>(t, row, n, lanes)) return false;
  for (int j = 0; j < T; ++j) y[j * y_stride] = static_cast<float>(reduce<W>(lanes.acc[j]));
  return true;
}

// The decoders where the level's vectors hold eight floats or more (AVX2, AVX-512):
// SmolLM2-135M Q4_1 on two threads, the AVX2 version on an AVX-512 VM, replied at
// 62-72 tokens/s against 34-36 with rows written out by dequantize_row and a
// sixteen-float lane_dot (session 32's code). With four (SSE2, NEON) rows are still
// written out: the decoders at four floats replied at 25-28 tokens/s against 39-42
// (an SSE2-only GCC build, PERFORMANCE.md session 37); the sums are the same either way.
template <int W>
constexpr bool kDecoders = W >= 8;

template <int W>
void row_dot_w(DType t, const void* row, const float* x, int64_t x_stride, int64_t n_tokens, int64_t n, float* y,
               int64_t y_stride) {
  // Four tokens a pass over the row: each x vector is loaded once per weight vector
  // and the row stays in L1, so this beats a written-out row at any token count.
  if constexpr (kDecoders<W>) {
    bool decoded = true;
    for (int64_t j = 0; decoded && j < n_tokens; j += 4) {
      const float* xj = x + j * x_stride;
      float* yj = y + j * y_stride;
      switch (std::min<int64_t>(n_tokens - j, 4)) {
        case 1: decoded = dot_tokens<1, W>(t, row, xj, x_stride, n, yj, y_stride); break;
        case 2: decoded = dot_tokens<2, W>(t, row, xj, x_stride, n, yj, y_stride); break;
        case 3: decoded = dot_tokens<3, W>(t, row, xj, x_stride, n, yj, y_stride); break;
        default: decoded = dot_tokens<4, W>(t, row, xj, x_stride, n, yj, y_stride); break;
      }
    }
    if (decoded) return;
  }
  // The rest: the row written out once (an F32 row is already).
  thread_local std::vector<float> values;
  const float* w = static_cast<const float*>(row);
  if (t != DType::F32) {
    values.resize(static_cast<size_t>(n));
    dequantize_row(t, row, values.data(), n);
    w = values.data();
  }
  for (int64_t j = 0; j < n_tokens; ++j) y[j * y_stride] = static_cast<float>(lane_dot_w<W>(w, x + j * x_stride, n));
}

// One version of each function for each level (isa_levels.h), with its width; elsewhere
// the width of the build's target. NAME_at_level(PARAMS) returns NAME_w<W> ARGS.
#if ZINC_ISA_LEVELS
#define ZINC_AT_EACH_LEVEL(ret, name, params, args) \
  ZINC_ISA_LEVEL("arch=x86-64-v4") ret name##_at_level params { return name##_w<16> args; } \
  ZINC_ISA_LEVEL("arch=x86-64-v3") ret name##_at_level params { return name##_w<8> args; } \
  ZINC_ISA_LEVEL("default") ret name##_at_level params { return name##_w<4> args; }
#else
#if defined(__AVX512F__)
constexpr int kWidth = 16;
#elif defined(__AVX2__)
constexpr int kWidth = 8;
#else
constexpr int kWidth = 4;
#endif
#define ZINC_AT_EACH_LEVEL(ret, name, params, args) \
  ret name##_at_level params { return name##_w<kWidth> args; }
#endif

ZINC_AT_EACH_LEVEL(double, lane_dot, (const float* a, const float* b, int64_t n), (a, b, n))
ZINC_AT_EACH_LEVEL(void, lane_dots,
                   (const float* a, const float* b, int64_t b_stride, int64_t count, int64_t n, double* out),
                   (a, b, b_stride, count, n, out))
ZINC_AT_EACH_LEVEL(void, add_weighted_rows,
                   (const double* w, const float* b, int64_t b_stride, int64_t count, int64_t n, double* acc),
                   (w, b, b_stride, count, n, acc))
ZINC_AT_EACH_LEVEL(void, row_dot,
                   (DType t, const void* row, const float* x, int64_t x_stride, int64_t n_tokens, int64_t n,
                    float* y, int64_t y_stride),
                   (t, row, x, x_stride, n_tokens, n, y, y_stride))
#undef ZINC_AT_EACH_LEVEL

}  // namespace

double lane_dot(const float* a, const float* b, int64_t n) { return lane_dot_at_level(a, b, n); }

void lane_dots(const float* a, const float* b, int64_t b_stride, int64_t count, int64_t n, double* out) {
  lane_dots_at_level(a, b, b_stride, count, n, out);
}

void add_weighted_rows(const double* w, const float* b, int64_t b_stride, int64_t count, int64_t n, double* acc) {
  add_weighted_rows_at_level(w, b, b_stride, count, n, acc);
}

void row_dot(DType t, const void* row, const float* x, int64_t x_stride, int64_t n_tokens, int64_t n, float* y,
             int64_t y_stride) {
  row_dot_at_level(t, row, x, x_stride, n_tokens, n, y, y_stride);
}

}  // namespace zinc::cpu
