// row_dot (a quantized row dotted with one or more tokens' x as it is dequantized)
// equals lane_dot of the dequantized row bit for bit, for every format and token count
// and at the vector width this machine picks; lane_dot is a dot product (against a
// long-double sum) and its sum is the 32-lane one written out in scalars, so every
// width gives the same bits; the thread pool runs every part of every loop once,
// whether its workers poll or sleep between loops.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "backend/cpu/row_dot.h"
#include "backend/cpu/thread_pool.h"
#include "quant/quant.h"

namespace zinc::cpu {
namespace {

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& e : v) e = nd(rng);
  return v;
}

TEST(RowDot, EqualsLaneDotOfTheDequantizedRowForEveryFormatAndTokenCount) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                  DType::Q8_0, DType::Q8_1, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K,
                  DType::Q8_K, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4}) {
    const int64_t block = type_traits(t).block_elems;
    // One block, several (of 256 too), gpt-oss's 2880, and rows whose length is not a
    // multiple of 32 (the lanes' tail) where the format allows it.
    for (int64_t n : {int64_t{256}, int64_t{768}, int64_t{576}, int64_t{2880}, int64_t{32}, int64_t{37}}) {
      if (n % block != 0) continue;
      std::vector<uint8_t> row(row_bytes(t, n));
      fill_random_blocks(t, 7, static_cast<uint64_t>(n), row.data(), n, 0.5f);
      std::vector<float> values(n);
      dequantize_row(t, row.data(), values.data(), n);
      // Every remainder of four tokens, alone and after whole fours.
      for (int64_t tokens : {1, 2, 3, 4, 5, 7, 9, 33}) {
        SCOPED_TRACE(std::string(type_name(t)) + " n=" + std::to_string(n) + " tokens=" + std::to_string(tokens));
        const int64_t stride = n + 3;  // tokens apart by more than a row
        const std::vector<float> x = random_floats(tokens * stride, static_cast<uint32_t>(n + tokens));
        std::vector<float> y(2 * tokens, -1.0f);
        row_dot(t, row.data(), x.data(), stride, tokens, n, y.data(), 2);
        for (int64_t j = 0; j < tokens; ++j) {
          const float plain = static_cast<float>(lane_dot(values.data(), x.data() + j * stride, n));
          ASSERT_TRUE(std::isfinite(plain));
          EXPECT_EQ(std::memcmp(&y[2 * j], &plain, sizeof plain), 0)
              << "token " << j << ": " << y[2 * j] << " vs " << plain;
          EXPECT_EQ(y[2 * j + 1], -1.0f);
        }
      }
    }
  }
}

// Every fp16 and bf16 bit pattern (subnormals, infinities, NaNs) alone in a 32-element
// row: row_dot's conversion of sixteen at a time equals dequantize_row's one at a time.
TEST(RowDot, EveryHalfAndBf16PatternConvertsAsDequantizeRowDoes) {
  for (DType t : {DType::F16, DType::BF16}) {
    std::vector<float> x(32), values(32);
    for (int i = 0; i < 32; ++i) x[i] = 1.0f + static_cast<float>(i) / 64;
    for (uint32_t bits = 0; bits < 65536; ++bits) {
      std::vector<uint16_t> row(32, 0);
      row[bits % 32] = static_cast<uint16_t>(bits);
      dequantize_row(t, row.data(), values.data(), 32);
      const float plain = static_cast<float>(lane_dot(values.data(), x.data(), 32));
      float fused;
      row_dot(t, row.data(), x.data(), 32, 1, 32, &fused, 1);
      ASSERT_EQ(std::memcmp(&fused, &plain, sizeof plain), 0) << type_name(t) << " bits " << bits;
    }
  }
}

TEST(RowDot, LaneDotIsADotProduct) {
  for (int64_t n : {int64_t{1}, int64_t{31}, int64_t{32}, int64_t{33}, int64_t{1000}, int64_t{4096}}) {
    const std::vector<float> a = random_floats(n, 1), b = random_floats(n, 2);
    long double exact = 0, magnitude = 0;
    for (int64_t i = 0; i < n; ++i) {
      exact += static_cast<long double>(a[i]) * b[i];
      magnitude += std::fabs(static_cast<long double>(a[i]) * b[i]);
    }
    EXPECT_NEAR(lane_dot(a.data(), b.data(), n), static_cast<double>(exact), 1e-6 * static_cast<double>(magnitude))
        << "n=" << n;
  }
}

// Each x86-64 level runs lane_dot and row_dot at its own vector width (isa_levels.h):
// the scalar sum here, 32 float lanes (element i into lane i % 32, a multiply then an
// add) summed in double in lane order and the tail in double, holds them all to one
// result bit for bit.
TEST(RowDot, LaneDotEqualsThirtyTwoScalarLanes) {
  for (int64_t n : {int64_t{1}, int64_t{31}, int64_t{32}, int64_t{33}, int64_t{100}, int64_t{1000}, int64_t{4113}}) {
    const std::vector<float> a = random_floats(n, 3), b = random_floats(n, 4);
    float lanes[32] = {};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
      for (int l = 0; l < 32; ++l) lanes[l] += a[i + l] * b[i + l];
    double expected = 0;
    for (const float lane : lanes) expected += lane;
    for (; i < n; ++i) expected += static_cast<double>(a[i]) * b[i];
    const double got = lane_dot(a.data(), b.data(), n);
    EXPECT_EQ(std::memcmp(&got, &expected, sizeof got), 0) << "n=" << n << ": " << got << " vs " << expected;
  }
}

// Attention's scores: lane_dots over strided rows gives lane_dot's bits for each row,
// at every row count (whole groups of rows reduced together and the rest one by one).
TEST(RowDot, LaneDotsEqualsLaneDotOfEveryRow) {
  for (int64_t n : {int64_t{64}, int64_t{128}, int64_t{256}, int64_t{37}, int64_t{5}}) {
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{8}, int64_t{9}, int64_t{23}, int64_t{40}}) {
      const int64_t stride = 3 * n + 1;
      const std::vector<float> a = random_floats(n, 5), b = random_floats(std::max<int64_t>(1, count * stride), 6);
      std::vector<double> got(count + 1, -1.0);
      lane_dots(a.data(), b.data(), stride, count, n, got.data());
      for (int64_t r = 0; r < count; ++r) {
        const double expected = lane_dot(a.data(), b.data() + r * stride, n);
        EXPECT_EQ(std::memcmp(&got[r], &expected, sizeof expected), 0) << "n=" << n << " row " << r << " of " << count;
      }
      EXPECT_EQ(got[count], -1.0) << "wrote past the last row";
    }
  }
}

// Attention's weighted sum of values: each element's products added in row order in
// double, as the plain loop adds them, and nothing past n written.
TEST(RowDot, AddWeightedRowsAddsInRowOrder) {
  for (int64_t n : {int64_t{64}, int64_t{128}, int64_t{256}, int64_t{37}, int64_t{3}}) {
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{100}}) {
      const int64_t stride = 2 * n + 3;
      const std::vector<float> b = random_floats(std::max<int64_t>(1, count * stride), 7);
      std::vector<double> w(count), expected(n + 1, 0.25), got(n + 1, 0.25);
      std::mt19937 rng(8);
      std::uniform_real_distribution<double> unit(0.0, 1.0);
      for (auto& e : w) e = unit(rng);
      for (int64_t r = 0; r < count; ++r)
        for (int64_t j = 0; j < n; ++j) expected[j] += w[r] * b[r * stride + j];
      add_weighted_rows(w.data(), b.data(), stride, count, n, got.data());
      EXPECT_EQ(std::memcmp(got.data(), expected.data(), sizeof(double) * (n + 1)), 0)
          << "n=" << n << " count=" << count;
    }
  }
}

TEST(ThreadPool, RunsEveryPartOnceWhetherWorkersPollOrSleep) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    std::mt19937 rng(threads);
    for (int call = 0; call < 2000; ++call) {
      const int64_t n = 1 + rng() % 100;
      std::vector<std::atomic<int>> hits(n);
      pool.parallel_for(n, 1 + rng() % 8, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " threads, call " << call;
      // Now and then, long enough for the workers to stop polling and sleep.
      if (call % 200 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
}

}  // namespace
}  // namespace zinc::cpu
