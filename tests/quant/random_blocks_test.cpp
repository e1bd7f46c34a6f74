// fill_random_blocks: deterministic per (seed, stream), finite, with the requested
// std for every type, and consistent side fields.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <stdexcept>
#include <vector>

#include "quant/blocks.h"
#include "quant/quant.h"

namespace zinc {
namespace {

constexpr DType kRandomTypes[] = {DType::F32,  DType::F16,  DType::BF16,   DType::Q4_0,   DType::Q4_1,
                                  DType::Q5_0, DType::Q5_1, DType::Q8_0,   DType::Q8_1,   DType::Q2_K,
                                  DType::Q3_K, DType::Q4_K, DType::Q5_K,   DType::Q6_K,   DType::Q8_K,
                                  DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4};
constexpr int64_t kElems = 64 * 256;

std::vector<uint8_t> random_bytes(DType t, uint64_t seed, uint64_t stream, int64_t n, float scale) {
  std::vector<uint8_t> bytes(row_bytes(t, n), 0xcd);
  fill_random_blocks(t, seed, stream, bytes.data(), n, scale);
  return bytes;
}

std::vector<float> values_of(DType t, const std::vector<uint8_t>& bytes, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n), NAN);
  dequantize_row(t, bytes.data(), v.data(), n);
  return v;
}

TEST(QuantRandomBlocks, FiniteWithTheRequestedStd) {
  for (DType t : kRandomTypes) {
    for (float scale : {0.02f, 1.5f}) {
      const auto v = values_of(t, random_bytes(t, 42, 7, kElems, scale), kElems);
      double sum = 0, sum2 = 0;
      for (float x : v) {
        ASSERT_TRUE(std::isfinite(x)) << type_name(t);
        sum += x;
        sum2 += static_cast<double>(x) * x;
      }
      const double mean = sum / kElems;
      const double std = std::sqrt(sum2 / kElems - mean * mean);
      // The scale fields are set from each format's exact code statistics; MXFP4's
      // power-of-two scales can only land within a factor sqrt(2).
      const double tolerance = t == DType::MXFP4 ? 1.45 : 1.15;
      EXPECT_GT(std, scale / tolerance) << type_name(t) << " scale " << scale;
      EXPECT_LT(std, scale * tolerance) << type_name(t) << " scale " << scale;
      // Q4_0's codes -8..7 are off centre by half a step: its mean is -0.11 std.
      EXPECT_LT(std::fabs(mean), 0.12 * scale) << type_name(t) << " scale " << scale;
      RecordProperty(std::string(type_name(t)) + "@" + std::to_string(scale), std::to_string(std / scale));
    }
  }
}

TEST(QuantRandomBlocks, DeterministicPerSeedAndStream) {
  for (DType t : kRandomTypes) {
    const auto a = random_bytes(t, 1, 2, kElems, 0.02f);
    EXPECT_EQ(a, random_bytes(t, 1, 2, kElems, 0.02f)) << type_name(t);
    EXPECT_NE(a, random_bytes(t, 1, 3, kElems, 0.02f)) << type_name(t);
    EXPECT_NE(a, random_bytes(t, 2, 2, kElems, 0.02f)) << type_name(t);
    // A shorter call writes a prefix of a longer one (so a row range is independent of
    // how much else the caller fills with the same stream).
    const int64_t half = kElems / 2 + type_traits(t).block_elems;
    const auto b = random_bytes(t, 1, 2, half, 0.02f);
    EXPECT_TRUE(std::equal(b.begin(), b.end(), a.begin())) << type_name(t);
  }
}

TEST(QuantRandomBlocks, ScalesVaryBetweenBlocksAndSideFieldsAgree) {
  const auto q8 = random_bytes(DType::Q8_0, 9, 0, kElems, 0.02f);
  std::set<uint16_t> scales;
  for (size_t b = 0; b < q8.size() / sizeof(BlockQ8_0); ++b) {
    BlockQ8_0 block;
    std::memcpy(&block, q8.data() + b * sizeof block, sizeof block);
    scales.insert(block.d);
  }
  EXPECT_GE(scales.size(), 8u);
  // A real file's Q8_0 scales are near 2.5e-4 for weights of std ~0.02.
  EXPECT_NEAR(fp16_to_fp32(*scales.begin()), 2.5e-4, 1.5e-4);

  const auto q81 = random_bytes(DType::Q8_1, 9, 1, 1024, 0.5f);
  for (size_t b = 0; b < q81.size() / sizeof(BlockQ8_1); ++b) {
    BlockQ8_1 block;
    std::memcpy(&block, q81.data() + b * sizeof block, sizeof block);
    int sum = 0;
    for (int8_t q : block.qs) sum += q;
    const float expected = static_cast<float>(sum) * fp16_to_fp32(block.d);
    EXPECT_EQ(block.s, fp32_to_fp16(expected));
  }
  const auto q8k = random_bytes(DType::Q8_K, 9, 2, 1024, 0.5f);
  for (size_t b = 0; b < q8k.size() / sizeof(BlockQ8_K); ++b) {
    BlockQ8_K block;
    std::memcpy(&block, q8k.data() + b * sizeof block, sizeof block);
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += block.qs[16 * g + j];
      EXPECT_EQ(block.bsums[g], sum);
    }
  }
}

TEST(QuantRandomBlocks, RejectsBadArguments) {
  std::vector<uint8_t> buf(4096);
  EXPECT_THROW(fill_random_blocks(DType::Q4_K, 0, 0, buf.data(), 100, 1.0f), std::invalid_argument);
  EXPECT_THROW(fill_random_blocks(DType::Q8_0, 0, 0, buf.data(), 32, -1.0f), std::invalid_argument);
  EXPECT_THROW(fill_random_blocks(DType::Q8_0, 0, 0, buf.data(), 32, NAN), std::invalid_argument);
  EXPECT_THROW(fill_random_blocks(DType::I32, 0, 0, buf.data(), 32, 1.0f), std::invalid_argument);
}

}  // namespace
}  // namespace zinc
