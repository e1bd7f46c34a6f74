// Q4_K / Q5_K / Q6_K quantizers. Each sub-block's scale (and min) comes from a small
// search: a few candidate scales around the range-based one, each followed by a
// least-squares refit on the codes it produces, keeping the one with the least
// squared error. The sub-block scales are then quantized to the format's 6 or 8 bits
// under the fp16 super-block scale, and the codes recomputed with the scales exactly
// as dequantization will apply them.
#include <algorithm>
#include <cmath>

#include "quant/quant.h"
#include "quant/quantize_k.h"

namespace zinc {
namespace {

constexpr int kSearchSteps = 10;       // candidates at (nmax + k / 10) / range, |k| <= 10
constexpr float kSearchStride = 0.1f;

int round_clamped(float v, int lo, int hi) { return std::clamp(static_cast<int>(std::lround(v)), lo, hi); }

// x ~ scale * q - min with q in 0..nmax; both scale and min >= 0, because the K-quant
// formats can only subtract their per-sub-block offset.
struct AffineFit {
  float scale;
  float min;
};

double affine_error(const float* x, int n, int nmax, AffineFit f) {
  double err = 0;
  for (int i = 0; i < n; ++i) {
    const int q = f.scale > 0 ? round_clamped((x[i] + f.min) / f.scale, 0, nmax) : 0;
    const double e = static_cast<double>(f.scale) * q - f.min - x[i];
    err += e * e;
  }
  return err;
}

AffineFit fit_affine(const float* x, int n, int nmax) {
  const float lo = std::min(*std::min_element(x, x + n), 0.0f);
  const float hi = *std::max_element(x, x + n);
  if (hi <= lo) return {0.0f, -lo};  // constant sub-block

  AffineFit best{(hi - lo) / static_cast<float>(nmax), -lo};
  double best_err = affine_error(x, n, nmax, best);
  for (int k = -kSearchSteps; k <= kSearchSteps; ++k) {
    const float iscale = (static_cast<float>(nmax) + kSearchStride * static_cast<float>(k)) / (hi - lo);
    double sq = 0, sqq = 0, sx = 0, sqx = 0;
    for (int i = 0; i < n; ++i) {
      const double q = round_clamped((x[i] - lo) * iscale, 0, nmax);
      sq += q;
      sqq += q * q;
      sx += x[i];
      sqx += q * x[i];
    }
    const double det = n * sqq - sq * sq;
    if (det <= 0) continue;  // a single code: no line to fit
    double a = (n * sqx - sq * sx) / det;
    double c = (sqq * sx - sq * sqx) / det;
    if (c > 0) {  // a positive offset is not representable: refit through the origin
      c = 0;
      a = sqx / sqq;
    }
    if (a <= 0) continue;
    const AffineFit candidate{static_cast<float>(a), static_cast<float>(-c)};
    const double err = affine_error(x, n, nmax, candidate);
    if (err < best_err) {
      best_err = err;
      best = candidate;
    }
  }
  return best;
}

// x ~ s * q with q in -32..31 (Q6_K); s may be negative so the larger side gets -32.
double symmetric_error(const float* x, int n, float s) {
  double err = 0;
  for (int i = 0; i < n; ++i) {
    const int q = s != 0 ? round_clamped(x[i] / s, -32, 31) : 0;
    const double e = static_cast<double>(s) * q - x[i];
    err += e * e;
  }
  return err;
}

float fit_symmetric(const float* x, int n) {
  float vmax = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > std::fabs(vmax)) vmax = x[i];
  if (vmax == 0) return 0;

  float best = vmax / -32.0f;
  double best_err = symmetric_error(x, n, best);
  for (int k = -kSearchSteps; k <= kSearchSteps; ++k) {
    const float iscale = -(32.0f + kSearchStride * static_cast<float>(k)) / vmax;
    double sqq = 0, sqx = 0;
    for (int i = 0; i < n; ++i) {
      const double q = round_clamped(x[i] * iscale, -32, 31);
      sqq += q * q;
      sqx += q * x[i];
    }
    if (sqq == 0) continue;
    const auto s = static_cast<float>(sqx / sqq);
    const double err = symmetric_error(x, n, s);
    if (err < best_err) {
      best_err = err;
      best = s;
    }
  }
  return best;
}

// Shared by Q4_K (nmax 15) and Q5_K (nmax 31): 8 sub-blocks of 32 with 6-bit scales
// and mins under fp16 d / dmin.
struct KQuantAffine {
  uint16_t d, dmin;
  uint8_t scale[8], min[8];
  uint8_t codes[kBlockK];
};

KQuantAffine quantize_affine_super_block(const float* x, int nmax) {
  AffineFit fits[8];
  float max_scale = 0, max_min = 0;
  for (int i = 0; i < 8; ++i) {
    fits[i] = fit_affine(x + 32 * i, 32, nmax);
    max_scale = std::max(max_scale, fits[i].scale);
    max_min = std::max(max_min, fits[i].min);
  }
  KQuantAffine r{};
  r.d = fp32_to_fp16(max_scale / 63.0f);
  r.dmin = fp32_to_fp16(max_min / 63.0f);
  const float d = fp16_to_fp32(r.d), dmin = fp16_to_fp32(r.dmin);
  for (int i = 0; i < 8; ++i) {
    r.scale[i] = static_cast<uint8_t>(d > 0 ? round_clamped(fits[i].scale / d, 0, 63) : 0);
    r.min[i] = static_cast<uint8_t>(dmin > 0 ? round_clamped(fits[i].min / dmin, 0, 63) : 0);
    const float ds = d * static_cast<float>(r.scale[i]);
    const float dm = dmin * static_cast<float>(r.min[i]);
    for (int l = 0; l < 32; ++l)
      r.codes[32 * i + l] = static_cast<uint8_t>(ds > 0 ? round_clamped((x[32 * i + l] + dm) / ds, 0, nmax) : 0);
  }
  return r;
}

// Inverse of k_quant_scale_min (blocks.h).
void pack_scale_min(const uint8_t* scale, const uint8_t* min, uint8_t* packed) {
  for (int i = 0; i < 4; ++i) {
    packed[i] = static_cast<uint8_t>((scale[i] & 63) | ((scale[i + 4] >> 4) << 6));
    packed[i + 4] = static_cast<uint8_t>((min[i] & 63) | ((min[i + 4] >> 4) << 6));
    packed[i + 8] = static_cast<uint8_t>((scale[i + 4] & 15) | ((min[i + 4] & 15) << 4));
  }
}

}  // namespace

void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, x += kBlockK) {
    const KQuantAffine k = quantize_affine_super_block(x, 15);
    y[b].d = k.d;
    y[b].dmin = k.dmin;
    pack_scale_min(k.scale, k.min, y[b].scales);
    for (int pair = 0; pair < 4; ++pair)
      for (int l = 0; l < 32; ++l)
        y[b].qs[32 * pair + l] = static_cast<uint8_t>(k.codes[64 * pair + l] | (k.codes[64 * pair + 32 + l] << 4));
  }
}

void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, x += kBlockK) {
    const KQuantAffine k = quantize_affine_super_block(x, 31);
    y[b].d = k.d;
    y[b].dmin = k.dmin;
    pack_scale_min(k.scale, k.min, y[b].scales);
    std::fill(std::begin(y[b].qh), std::end(y[b].qh), 0);
    for (int pair = 0; pair < 4; ++pair) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t first = k.codes[64 * pair + l], second = k.codes[64 * pair + 32 + l];
        y[b].qs[32 * pair + l] = static_cast<uint8_t>((first & 15) | ((second & 15) << 4));
        y[b].qh[l] |= static_cast<uint8_t>(((first >> 4) << (2 * pair)) | ((second >> 4) << (2 * pair + 1)));
      }
    }
  }
}

void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, x += kBlockK) {
    float scales[16];
    float max_abs = 0;
    for (int i = 0; i < 16; ++i) {
      scales[i] = fit_symmetric(x + 16 * i, 16);
      max_abs = std::max(max_abs, std::fabs(scales[i]));
    }
    y[b].d = fp32_to_fp16(max_abs / 127.0f);
    const float d = fp16_to_fp32(y[b].d);
    std::fill(std::begin(y[b].ql), std::end(y[b].ql), 0);
    std::fill(std::begin(y[b].qh), std::end(y[b].qh), 0);
    for (int i = 0; i < 16; ++i) {
      y[b].scales[i] = static_cast<int8_t>(d > 0 ? round_clamped(scales[i] / d, -128, 127) : 0);
      const float ds = d * static_cast<float>(y[b].scales[i]);
      for (int l = 0; l < 16; ++l) {
        const int e = 16 * i + l;  // element index; see BlockQ6_K for the layout
        const int q = (ds != 0 ? round_clamped(x[e] / ds, -32, 31) : 0) + 32;
        const int half = e / 128, k = (e % 128) / 32, j = e % 32;
        y[b].ql[64 * half + 32 * (k & 1) + j] |= static_cast<uint8_t>((q & 15) << (4 * (k >> 1)));
        y[b].qh[32 * half + j] |= static_cast<uint8_t>((q >> 4) << (2 * k));
      }
    }
  }
}

}  // namespace zinc
