// GPT-OSS's ops on the CPU backend, against their definitions evaluated here:
// attention with sinks scales each head's plain attention by the share of the softmax
// its keys keep (Z / (Z + e^sink), Z the keys' sum of e^score), a bias adds to every
// row, and a routed expert with biases and the clamped SwiGLU equals the formula of
// backend.h's ExpertWeights in double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/backend_test_util.h"
#include "quant/half.h"

namespace zinc {
namespace {

using test::read_floats;
using test::upload;

TEST(GptOssOps, SinksScaleEachHeadByTheShareItsKeysKeep) {
  constexpr int64_t D = 16, Hq = 4, Hkv = 2, n_ctx = 40, n = 3;
  constexpr float scale = 0.3f;
  auto be = make_cpu_backend(1);
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<uint16_t> k(D * Hkv * n_ctx), v(D * Hkv * n_ctx);
  for (auto& e : k) e = float_to_half_bits(nd(rng));
  for (auto& e : v) e = float_to_half_bits(nd(rng));
  std::vector<float> q(D * Hq * n);
  for (auto& e : q) e = nd(rng);
  const std::vector<int32_t> positions = {0, 17, 39};
  const std::vector<float> sinks = {-30.0f, 0.5f, 3.0f, 12.0f};  // from none to most of the weight
  Tensor kc = upload(*be, DType::F16, {D, Hkv, n_ctx}, k.data()),
         vc = upload(*be, DType::F16, {D, Hkv, n_ctx}, v.data());
  Tensor qt = upload(*be, DType::F32, {D, Hq, n}, q.data()), pos = upload(*be, DType::I32, {n}, positions.data());
  Tensor sk = upload(*be, DType::F32, {Hq}, sinks.data());
  for (int window : {0, 8}) {
    Tensor plain = be->alloc_persistent(DType::F32, {D, Hq, n}), sunk = be->alloc_persistent(DType::F32, {D, Hq, n});
    be->attention(qt, std::span(&kc, 1), std::span(&vc, 1), pos, scale, window, nullptr, plain);
    be->attention(qt, std::span(&kc, 1), std::span(&vc, 1), pos, scale, window, &sk, sunk);
    const auto yp = read_floats(*be, plain), ys = read_floats(*be, sunk);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t h = 0; h < Hq; ++h) {
        const int64_t kvh = h / (Hq / Hkv), last = positions[t];
        const int64_t first = window > 0 ? std::max<int64_t>(0, last - window + 1) : 0;
        double z = 0;  // relative to e^0: the scores here are a few units
        for (int64_t s = first; s <= last; ++s) {
          double dot = 0;
          for (int64_t j = 0; j < D; ++j)
            dot += q[(t * Hq + h) * D + j] * half_bits_to_float(k[(s * Hkv + kvh) * D + j]);
          z += std::exp(dot * scale);
        }
        const double keep = z / (z + std::exp(static_cast<double>(sinks[h])));
        for (int64_t j = 0; j < D; ++j) {
          const int64_t i = (t * Hq + h) * D + j;
          EXPECT_NEAR(ys[i], yp[i] * keep, 1e-5 + 1e-5 * std::fabs(yp[i])) << "window " << window << " t " << t
                                                                             << " h " << h;
        }
      }
  }
}

TEST(GptOssOps, BiasIsAddedToEveryRow) {
  auto be = make_cpu_backend(1);
  const std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {10, 20, 30};
  Tensor at = upload(*be, DType::F32, {3, 2}, a.data()), bt = upload(*be, DType::F32, {3}, b.data());
  Tensor y = be->alloc_persistent(DType::F32, {3, 2});
  be->add(at, bt, y);
  EXPECT_EQ(read_floats(*be, y), (std::vector<float>{11, 22, 33, 14, 25, 36}));
}

TEST(GptOssOps, ExpertWithBiasesAndClampedSwiglu) {
  constexpr int64_t d = 32, ff = 32, E = 3, n = 2, k = 2;
  auto be = make_cpu_backend(1);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto draw = [&](int64_t count, float s) {
    std::vector<float> v(count);
    for (auto& e : v) e = s * nd(rng);
    return v;
  };
  // Gate and up values spread well past the clamp of 7.
  const auto gate = draw(d * ff * E, 1.5f), up = draw(d * ff * E, 1.5f), down = draw(ff * d * E, 0.2f);
  const auto gb = draw(ff * E, 1.0f), ub = draw(ff * E, 1.0f), db = draw(d * E, 1.0f), x = draw(d * n, 1.0f);
  const std::vector<int32_t> ids = {2, 0, 1, 2};
  const std::vector<float> weights = {0.7f, 0.3f, 0.4f, 0.6f};
  ExpertWeights ex;
  ex.gate = upload(*be, DType::F32, {d, ff, E}, gate.data());
  ex.up = upload(*be, DType::F32, {d, ff, E}, up.data());
  ex.down = upload(*be, DType::F32, {ff, d, E}, down.data());
  ex.gate_bias = upload(*be, DType::F32, {ff, E}, gb.data());
  ex.up_bias = upload(*be, DType::F32, {ff, E}, ub.data());
  ex.down_bias = upload(*be, DType::F32, {d, E}, db.data());
  ex.alpha = 1.702f, ex.clamp = 7.0f;
  Tensor xt = upload(*be, DType::F32, {d, n}, x.data()), idt = upload(*be, DType::I32, {k, n}, ids.data());
  Tensor wt = upload(*be, DType::F32, {k, n}, weights.data()), y = be->alloc_persistent(DType::F32, {d, n});
  be->moe_ffn(xt, ex, idt, wt, y);
  const auto got = read_floats(*be, y);
  int clamped = 0;
  for (int64_t t = 0; t < n; ++t) {
    std::vector<double> want(d, 0.0);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = ids[t * k + j];
      std::vector<double> h(ff);
      for (int64_t r = 0; r < ff; ++r) {
        double g = gb[e * ff + r], u = ub[e * ff + r];
        for (int64_t c = 0; c < d; ++c) {
          g += gate[(e * ff + r) * d + c] * x[t * d + c];
          u += up[(e * ff + r) * d + c] * x[t * d + c];
        }
        clamped += g > 7 || std::fabs(u) > 7;
        g = std::min(g, 7.0), u = std::clamp(u, -7.0, 7.0);
        h[r] = g / (1 + std::exp(-1.702 * g)) * (u + 1);
      }
      for (int64_t c = 0; c < d; ++c) {
        double o = db[e * d + c];
        for (int64_t r = 0; r < ff; ++r) o += down[(e * d + c) * ff + r] * h[r];
        want[c] += weights[t * k + j] * o;
      }
    }
    for (int64_t c = 0; c < d; ++c)
      EXPECT_NEAR(got[t * d + c], want[c], 1e-4 * (1 + std::fabs(want[c]))) << t << " " << c;
  }
  EXPECT_GT(clamped, 10);  // the clamp was exercised
}

}  // namespace
}  // namespace zinc
