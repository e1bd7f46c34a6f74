// fp16 / bf16 conversions: known encodings, exhaustive decoding against the IEEE
// formula, and rounding against a brute-force nearest-value oracle.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "quant/half.h"
#include "quant/quant.h"

namespace zinc {
namespace {

// The value of fp16 bits by the IEEE 754 definition, in double.
double half_by_definition(uint16_t h) {
  const int sign = h >> 15, exponent = (h >> 10) & 31, mantissa = h & 1023;
  double v;
  if (exponent == 0) v = std::ldexp(mantissa, -24);
  else if (exponent == 31) v = mantissa ? NAN : INFINITY;
  else v = std::ldexp(1024 + mantissa, exponent - 25);
  return sign ? -v : v;
}

TEST(QuantFp16, KnownEncodings) {
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(fp32_to_fp16(0.1f), 0x2e66);
  EXPECT_EQ(fp32_to_fp16(1.0f / 3), 0x3555);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65519.99f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);  // half an ulp above max: ties to even = inf
  EXPECT_EQ(fp32_to_fp16(-1e10f), 0xfc00);
  EXPECT_EQ(fp32_to_fp16(INFINITY), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // tie between 0 and 1: even
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0001f, -25)), 0x0001);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(3.0f, -25)), 0x0002);  // tie between 1 and 2: even
  EXPECT_EQ(fp32_to_fp16(-std::ldexp(1.0f, -30)), 0x8000);
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie, even mantissa stays
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie, odd mantissa rounds up
  const uint16_t nan = fp32_to_fp16(NAN);
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_EQ(fp16_to_fp32(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_fp32(0xfc00), -INFINITY);
  EXPECT_EQ(std::bit_cast<uint32_t>(fp16_to_fp32(0x8000)), 0x80000000u);
}

TEST(QuantFp16, EveryHalfDecodesByDefinitionAndRoundTrips) {
  for (uint32_t i = 0; i < 0x10000; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float f = fp16_to_fp32(h);
    ASSERT_EQ(std::bit_cast<uint32_t>(half_bits_to_float(h)), std::bit_cast<uint32_t>(f));  // the inline twin
    const double expected = half_by_definition(h);
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(f)) << i;
      ASSERT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(f)))) << i;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), expected) << i;
    ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << i;
    ASSERT_EQ(fp32_to_fp16(f), h) << i;
  }
}

TEST(QuantFp16, RoundsToNearestEvenLikeABruteForceSearch) {
  // All finite non-negative halves in increasing order (bit order is value order).
  std::vector<double> values;
  for (uint16_t h = 0; h <= 0x7bff; ++h) values.push_back(half_by_definition(h));
  auto nearest = [&](double a) -> uint16_t {
    if (a >= 65520.0) return 0x7c00;
    const size_t hi = static_cast<size_t>(std::lower_bound(values.begin(), values.end(), a) - values.begin());
    if (hi < values.size() && values[hi] == a) return static_cast<uint16_t>(hi);
    const size_t lo = hi - 1;
    if (hi == values.size()) return static_cast<uint16_t>(lo);
    const double dlo = a - values[lo], dhi = values[hi] - a;
    if (dlo != dhi) return static_cast<uint16_t>(dlo < dhi ? lo : hi);
    return static_cast<uint16_t>(lo % 2 == 0 ? lo : hi);
  };
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> log_magnitude(-27.0f, 16.5f);
  for (int i = 0; i < 200000; ++i) {
    float f = std::exp2(log_magnitude(rng));
    if (i % 4 == 0) f = std::nextafter(static_cast<float>(values[rng() % values.size()] * 1.0), INFINITY);
    if (i % 7 == 0) {  // exact midpoints between neighbouring halves
      const size_t k = rng() % (values.size() - 1);
      f = static_cast<float>((values[k] + values[k + 1]) / 2);
    }
    const float signed_f = (i % 2) ? -f : f;
    const uint16_t expected = static_cast<uint16_t>(nearest(f) | ((i % 2) ? 0x8000 : 0));
    ASSERT_EQ(fp32_to_fp16(signed_f), expected) << signed_f;
  }
}

TEST(QuantBf16, KnownEncodingsAndRounding) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(fp32_to_bf16(-2.5f), 0xc020);
  EXPECT_EQ(fp32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie, even stays
  EXPECT_EQ(fp32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(fp32_to_bf16(1.0f + 5 * std::ldexp(1.0f, -10)), 0x3f81);
  EXPECT_EQ(fp32_to_bf16(3.4028235e38f), 0x7f80);  // rounds past the largest bf16
  EXPECT_EQ(fp32_to_bf16(-INFINITY), 0xff80);
  EXPECT_EQ(fp32_to_bf16(std::ldexp(1.0f, -130)), 0x0008);  // subnormals kept, not flushed
  const uint16_t nan = fp32_to_bf16(std::bit_cast<float>(0x7f800001u));  // signalling NaN, payload in low bits
  EXPECT_TRUE(std::isnan(bf16_to_fp32(nan)));
  EXPECT_EQ(bf16_to_fp32(0x4049), 3.140625f);
}

TEST(QuantBf16, RoundTripAndNearestOracle) {
  for (uint32_t i = 0; i < 0x10000; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float f = bf16_to_fp32(h);
    ASSERT_EQ(std::bit_cast<uint32_t>(bf16_bits_to_float(h)), std::bit_cast<uint32_t>(f));
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_bf16(f), h) << i;
  }
  std::mt19937 rng(11);
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = static_cast<uint32_t>(rng());
    if ((bits & 0x7f800000) == 0x7f800000) continue;  // NaN / inf
    const float f = std::bit_cast<float>(bits);
    const uint32_t down = bits & 0xffff0000u;
    const double lo = std::bit_cast<float>(down);
    const double hi = (down & 0x7fffffff) == 0x7f7f0000 ? std::copysign(std::ldexp(1.0, 128), f)
                                                        : static_cast<double>(std::bit_cast<float>(down + 0x10000));
    const double dlo = std::fabs(f - lo), dhi = std::fabs(hi - f);
    uint16_t expected = static_cast<uint16_t>(down >> 16);
    if (dhi < dlo || (dhi == dlo && (expected & 1))) ++expected;
    ASSERT_EQ(fp32_to_bf16(f), expected) << std::hex << bits;
  }
}

}  // namespace
}  // namespace zinc
