// The chunked gated delta rule must equal the one-token recurrence, for lengths
// that are and are not multiples of the chunk, with a carried-in state.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/delta_rule.h"

namespace zinc::cpu {
namespace {

struct Inputs {
  DeltaRuleShape s;
  std::vector<float> q, k, v, g, beta, state;
};

Inputs make_inputs(int64_t n, uint32_t seed) {
  Inputs in;
  in.s = {n, 4, 2, 16, 8};
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> ud(0.0f, 1.0f);
  auto fill = [&](std::vector<float>& x, size_t count) {
    x.resize(count);
    for (auto& e : x) e = nd(rng);
  };
  fill(in.q, n * 2 * 16);
  fill(in.k, n * 2 * 16);
  // Keys L2-normalised as the model feeds them; keeps the recurrence stable.
  for (int64_t r = 0; r < n * 2; ++r) {
    double s = 0, sq = 0;
    for (int i = 0; i < 16; ++i) s += in.k[r * 16 + i] * in.k[r * 16 + i], sq += in.q[r * 16 + i] * in.q[r * 16 + i];
    for (int i = 0; i < 16; ++i) in.k[r * 16 + i] /= std::sqrt(s), in.q[r * 16 + i] /= std::sqrt(sq);
  }
  fill(in.v, n * 4 * 8);
  in.g.resize(n * 4);
  in.beta.resize(n * 4);
  for (auto& e : in.g) e = -0.3f * ud(rng);
  for (auto& e : in.beta) e = ud(rng);
  fill(in.state, 4 * 16 * 8);
  return in;
}

void expect_close(const std::vector<float>& a, const std::vector<float>& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(double(a[i]) - b[i]));
  EXPECT_LT(worst, tol);
}

class DeltaRuleLengths : public ::testing::TestWithParam<int64_t> {};

TEST_P(DeltaRuleLengths, ChunkedEqualsRecurrent) {
  const int64_t n = GetParam();
  Inputs in = make_inputs(n, 1234 + static_cast<uint32_t>(n));
  std::vector<float> s1 = in.state, s2 = in.state, y1(n * 4 * 8, NAN), y2(n * 4 * 8, NAN);
  delta_rule_recurrent(in.s, in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(), s1.data(),
                       y1.data(), 0, 4);
  delta_rule_chunked(in.s, 64, in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(), s2.data(),
                     y2.data(), 0, 4);
  expect_close(y1, y2, 1e-5);
  expect_close(s1, s2, 1e-5);
  // The outputs are not trivially zero.
  double mag = 0;
  for (float e : y1) mag += std::abs(e);
  EXPECT_GT(mag / y1.size(), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Lengths, DeltaRuleLengths, ::testing::Values(1, 7, 63, 64, 65, 130));

TEST(DeltaRule, SplitRecurrenceCarriesState) {
  // Running n tokens at once equals running them in two pieces with the state carried.
  Inputs in = make_inputs(50, 99);
  std::vector<float> s_all = in.state, y_all(50 * 32);
  delta_rule_chunked(in.s, 16, in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(), s_all.data(),
                     y_all.data(), 0, 4);
  std::vector<float> s = in.state, y(50 * 32);
  DeltaRuleShape first = in.s, second = in.s;
  first.n_tokens = 20;
  second.n_tokens = 30;
  delta_rule_chunked(first, 16, in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(), s.data(),
                     y.data(), 0, 4);
  delta_rule_recurrent(second, in.q.data() + 20 * 32, in.k.data() + 20 * 32, in.v.data() + 20 * 32,
                       in.g.data() + 20 * 4, in.beta.data() + 20 * 4, s.data(), y.data() + 20 * 32, 0, 4);
  expect_close(y_all, y, 1e-5);
  expect_close(s_all, s, 1e-5);
}

}  // namespace
}  // namespace zinc::cpu
