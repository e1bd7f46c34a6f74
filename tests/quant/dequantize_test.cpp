// Hand-built blocks whose values are known by construction: each test writes codes
// and scales into the bytes following the format's description and expects the
// values the format defines (chosen so float arithmetic is exact). Also the formats
// the goldens cannot cover (Q8_1, Q8_K, F64) and argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "quant/blocks.h"
#include "quant/quant.h"

namespace zinc {
namespace {

std::vector<float> dequantize(DType t, const void* src, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n), NAN);
  dequantize_row(t, src, out.data(), n);
  return out;
}

// Element e of a 32-element nibble-packed group: low nibble of byte e for e < 16,
// high nibble of byte e - 16 otherwise.
void set_nibble32(uint8_t* qs, int e, int code) {
  if (e < 16) qs[e] = static_cast<uint8_t>((qs[e] & 0xf0) | code);
  else qs[e - 16] = static_cast<uint8_t>((qs[e - 16] & 0x0f) | (code << 4));
}

TEST(QuantDequantize, Q8_0) {
  BlockQ8_0 b[2];
  b[0].d = 0x3400;  // 0.25
  b[1].d = 0xc000;  // -2
  for (int j = 0; j < 32; ++j) {
    b[0].qs[j] = static_cast<int8_t>(8 * j - 128);
    b[1].qs[j] = static_cast<int8_t>(127 - 3 * j);
  }
  const auto y = dequantize(DType::Q8_0, b, 64);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(y[j], 0.25f * static_cast<float>(8 * j - 128)) << j;
    EXPECT_EQ(y[32 + j], -2.0f * static_cast<float>(127 - 3 * j)) << j;
  }
}

TEST(QuantDequantize, Q4_0) {
  BlockQ4_0 b{};
  b.d = 0xb800;  // -0.5
  for (int e = 0; e < 32; ++e) set_nibble32(b.qs, e, (5 * e + 1) % 16);
  const auto y = dequantize(DType::Q4_0, &b, 32);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], -0.5f * static_cast<float>((5 * e + 1) % 16 - 8)) << e;
}

TEST(QuantDequantize, Q4_K) {
  const int sc[8] = {1, 2, 3, 63, 33, 17, 48, 5};
  const int m[8] = {0, 7, 63, 1, 40, 16, 2, 31};
  BlockQ4_K b{};
  b.d = 0x3800;     // 0.5
  b.dmin = 0x3000;  // 0.125
  // Bytes 0-3: scale 0-3 in the low 6 bits, the top 2 bits of scale 4-7 above them;
  // bytes 4-7: the same for the mins; bytes 8-11: low nibbles of scale 4-7 | min 4-7.
  for (int i = 0; i < 4; ++i) {
    b.scales[i] = static_cast<uint8_t>(sc[i] | ((sc[i + 4] >> 4) << 6));
    b.scales[i + 4] = static_cast<uint8_t>(m[i] | ((m[i + 4] >> 4) << 6));
    b.scales[i + 8] = static_cast<uint8_t>((sc[i + 4] & 15) | ((m[i + 4] & 15) << 4));
  }
  auto code = [](int e) { return (3 * e + 5) % 16; };
  for (int e = 0; e < 256; ++e) {
    const int sub = e / 32, l = e % 32;  // sub-blocks 2p, 2p+1 share bytes 32p..32p+31
    b.qs[32 * (sub / 2) + l] |= static_cast<uint8_t>(code(e) << (4 * (sub % 2)));
  }
  const auto y = dequantize(DType::Q4_K, &b, 256);
  for (int e = 0; e < 256; ++e) {
    const int sub = e / 32;
    EXPECT_EQ(y[e], 0.5f * static_cast<float>(sc[sub] * code(e)) - 0.125f * static_cast<float>(m[sub])) << e;
  }
}

TEST(QuantDequantize, Q6_K) {
  const int8_t sc[16] = {-128, 127, 1, -1, 5, 64, -77, 3, 100, -2, 9, 31, -31, 12, 0, 44};
  BlockQ6_K b{};
  b.d = 0x3400;  // 0.25
  std::memcpy(b.scales, sc, 16);
  auto code = [](int e) { return (7 * e + 3) % 64; };
  // Per 128 elements: ql bytes l and l+32 hold elements l, l+32 (low nibbles) and
  // l+64, l+96 (high nibbles); qh byte l holds their top two bits, 2 bits each in turn.
  for (int half = 0; half < 2; ++half) {
    uint8_t* ql = b.ql + 64 * half;
    uint8_t* qh = b.qh + 32 * half;
    for (int l = 0; l < 32; ++l) {
      const int q[4] = {code(128 * half + l), code(128 * half + l + 32), code(128 * half + l + 64),
                        code(128 * half + l + 96)};
      ql[l] = static_cast<uint8_t>((q[0] & 15) | ((q[2] & 15) << 4));
      ql[l + 32] = static_cast<uint8_t>((q[1] & 15) | ((q[3] & 15) << 4));
      qh[l] = static_cast<uint8_t>((q[0] >> 4) | ((q[1] >> 4) << 2) | ((q[2] >> 4) << 4) | ((q[3] >> 4) << 6));
    }
  }
  const auto y = dequantize(DType::Q6_K, &b, 256);
  for (int e = 0; e < 256; ++e)
    EXPECT_EQ(y[e], 0.25f * static_cast<float>(sc[e / 16] * (code(e) - 32))) << e;
}

TEST(QuantDequantize, Mxfp4UsesOcpValuesTimesTwoToTheEMinus127) {
  // The OCP e2m1 code points; code 8 (-0) dequantizes to zero.
  const float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, 0, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  const int exponents[4] = {127, 130, 1, 200};
  BlockMXFP4 b[4]{};
  for (int k = 0; k < 4; ++k) {
    b[k].e = static_cast<uint8_t>(exponents[k]);
    for (int e = 0; e < 32; ++e) set_nibble32(b[k].qs, e, (e + 3 * k) % 16);
  }
  const auto y = dequantize(DType::MXFP4, b, 128);
  for (int k = 0; k < 4; ++k)
    for (int e = 0; e < 32; ++e)
      EXPECT_EQ(y[32 * k + e], std::ldexp(e2m1[(e + 3 * k) % 16], exponents[k] - 127)) << k << " " << e;
  EXPECT_EQ(e8m0_half_to_fp32(0), std::ldexp(1.0f, -128));  // subnormal scales, as GGML
  EXPECT_EQ(e8m0_half_to_fp32(255), std::ldexp(1.0f, 127));
}

TEST(QuantDequantize, Iq4NlAndIq4Xs) {
  const int kv[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  BlockIQ4_NL nl{};
  nl.d = 0x4000;  // 2
  for (int e = 0; e < 32; ++e) set_nibble32(nl.qs, e, (5 * e + 2) % 16);
  const auto y = dequantize(DType::IQ4_NL, &nl, 32);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], 2.0f * static_cast<float>(kv[(5 * e + 2) % 16])) << e;

  BlockIQ4_XS xs{};
  xs.d = 0x3800;  // 0.5
  const int ls[8] = {0, 63, 32, 31, 33, 17, 48, 5};
  for (int i = 0; i < 8; ++i) {
    xs.scales_l[i / 2] |= static_cast<uint8_t>((ls[i] & 15) << (4 * (i % 2)));
    xs.scales_h |= static_cast<uint16_t>((ls[i] >> 4) << (2 * i));
    for (int e = 0; e < 32; ++e) set_nibble32(xs.qs + 16 * i, e, (e + i) % 16);
  }
  const auto z = dequantize(DType::IQ4_XS, &xs, 256);
  for (int e = 0; e < 256; ++e)
    EXPECT_EQ(z[e], 0.5f * static_cast<float>((ls[e / 32] - 32) * kv[(e % 32 + e / 32) % 16])) << e;
}

TEST(QuantDequantize, Q8_1AndQ8_K) {
  BlockQ8_1 a{};
  a.d = 0x3c00;  // 1
  a.s = 0x4000;  // not part of the values
  for (int j = 0; j < 32; ++j) a.qs[j] = static_cast<int8_t>(j * 7 - 100);
  const auto ya = dequantize(DType::Q8_1, &a, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(ya[j], static_cast<float>(j * 7 - 100));

  BlockQ8_K k{};
  k.d = 0.375f;
  for (int j = 0; j < 256; ++j) k.qs[j] = static_cast<int8_t>(j - 128);
  const auto yk = dequantize(DType::Q8_K, &k, 256);
  for (int j = 0; j < 256; ++j) EXPECT_EQ(yk[j], 0.375f * static_cast<float>(j - 128));
}

TEST(QuantDequantize, PlainTypes) {
  const double f64[3] = {1.0 / 3, -1e300, 2.5};
  const auto y = dequantize(DType::F64, f64, 3);
  EXPECT_EQ(y[0], static_cast<float>(1.0 / 3));
  EXPECT_EQ(y[1], -INFINITY);
  EXPECT_EQ(y[2], 2.5f);
  const float f32[2] = {-0.125f, 7e-40f};
  const auto z = dequantize(DType::F32, f32, 2);
  EXPECT_EQ(z[0], -0.125f);
  EXPECT_EQ(z[1], 7e-40f);
  const uint16_t bf16[2] = {0x3f80, 0xc0a0};
  const auto w = dequantize(DType::BF16, bf16, 2);
  EXPECT_EQ(w[0], 1.0f);
  EXPECT_EQ(w[1], -5.0f);
}

TEST(QuantDequantize, RejectsPartialBlocksAndIntegerTypes) {
  std::vector<uint8_t> bytes(1024, 1);
  std::vector<float> out(512);
  EXPECT_THROW(dequantize_row(DType::Q4_K, bytes.data(), out.data(), 128), std::invalid_argument);
  EXPECT_THROW(dequantize_row(DType::Q8_0, bytes.data(), out.data(), 31), std::invalid_argument);
  EXPECT_THROW(dequantize_row(DType::I32, bytes.data(), out.data(), 4), std::invalid_argument);
}

}  // namespace
}  // namespace zinc
