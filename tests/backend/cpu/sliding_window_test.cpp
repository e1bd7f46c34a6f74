// Gemma 3's ops on the CPU backend: attention with a sliding window equals plain
// attention over a cache that holds only the window's rows, and geglu / scale equal
// their formulas evaluated in double.
#include <gtest/gtest.h>

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

TEST(SlidingWindow, AttentionSeesOnlyTheLastWindowPositions) {
  constexpr int64_t D = 16, Hq = 4, Hkv = 2, n_ctx = 64;
  auto be = make_cpu_backend(1);
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<uint16_t> kv(2 * D * Hkv * n_ctx);
  for (auto& e : kv) e = float_to_half_bits(nd(rng));
  const int64_t row = D * Hkv;
  Tensor kc = be->alloc_persistent(DType::F16, {D, Hkv, n_ctx}), vc = be->alloc_persistent(DType::F16, {D, Hkv, n_ctx});
  be->write(kc, kv.data(), kc.nbytes());
  be->write(vc, kv.data() + row * n_ctx, vc.nbytes());

  // Queries at positions inside the first window, at its edge and past it.
  const std::vector<int32_t> positions = {0, 4, 6, 7, 30, 63};
  const int64_t n = static_cast<int64_t>(positions.size());
  for (int window : {1, 7, 16}) {
    Tensor q = be->alloc_persistent(DType::F32, {D, Hq, n}), pos = be->alloc_persistent(DType::I32, {n});
    std::vector<float> qv(q.n_elements());
    for (auto& e : qv) e = nd(rng);
    be->write(q, qv.data(), q.nbytes());
    be->write(pos, positions.data(), pos.nbytes());
    Tensor y = be->alloc_persistent(DType::F32, {D, Hq, n});
    be->attention(q, std::span(&kc, 1), std::span(&vc, 1), pos, 0.3f, window, nullptr, y);
    const std::vector<float> got = read_floats(*be, y);

    for (int64_t t = 0; t < n; ++t) {
      // The window's rows copied to the front of a fresh cache, attended without a window.
      const int64_t first = std::max<int64_t>(0, positions[t] + 1 - window), rows = positions[t] + 1 - first;
      Tensor kw = be->alloc_persistent(DType::F16, {D, Hkv, rows}),
             vw = be->alloc_persistent(DType::F16, {D, Hkv, rows});
      be->write(kw, kv.data() + first * row, kw.nbytes());
      be->write(vw, kv.data() + row * n_ctx + first * row, vw.nbytes());
      Tensor qt = be->alloc_persistent(DType::F32, {D, Hq, 1}), pt = be->alloc_persistent(DType::I32, {1});
      be->write(qt, qv.data() + t * D * Hq, qt.nbytes());
      const int32_t last = static_cast<int32_t>(rows - 1);
      be->write(pt, &last, sizeof(last));
      Tensor yt = be->alloc_persistent(DType::F32, {D, Hq, 1});
      be->attention(qt, std::span(&kw, 1), std::span(&vw, 1), pt, 0.3f, 0, nullptr, yt);
      const std::vector<float> want = read_floats(*be, yt);
      for (int64_t i = 0; i < D * Hq; ++i)
        ASSERT_EQ(got[t * D * Hq + i], want[i]) << "window " << window << " position " << positions[t];
    }
  }
}

TEST(SlidingWindow, WindowChangesWhatALateQuerySees) {
  constexpr int64_t D = 8, n_ctx = 32;
  auto be = make_cpu_backend(1);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<uint16_t> kv(2 * D * n_ctx);
  for (auto& e : kv) e = float_to_half_bits(nd(rng));
  Tensor kc = be->alloc_persistent(DType::F16, {D, 1, n_ctx}), vc = be->alloc_persistent(DType::F16, {D, 1, n_ctx});
  be->write(kc, kv.data(), kc.nbytes());
  be->write(vc, kv.data() + D * n_ctx, vc.nbytes());
  Tensor q = be->alloc_persistent(DType::F32, {D, 1, 1}), pos = be->alloc_persistent(DType::I32, {1});
  std::vector<float> qv(D, 1.0f);
  be->write(q, qv.data(), q.nbytes());
  const int32_t p = 31;
  be->write(pos, &p, sizeof(p));
  Tensor full = be->alloc_persistent(DType::F32, {D, 1, 1}), local = be->alloc_persistent(DType::F32, {D, 1, 1}),
         wide = be->alloc_persistent(DType::F32, {D, 1, 1});
  be->attention(q, std::span(&kc, 1), std::span(&vc, 1), pos, 1.0f, 0, nullptr, full);
  be->attention(q, std::span(&kc, 1), std::span(&vc, 1), pos, 1.0f, 4, nullptr, local);
  be->attention(q, std::span(&kc, 1), std::span(&vc, 1), pos, 1.0f, 32, nullptr, wide);  // as wide as the position
  EXPECT_NE(read_floats(*be, full), read_floats(*be, local));
  EXPECT_EQ(read_floats(*be, full), read_floats(*be, wide));
}

TEST(SlidingWindow, GegluAndScaleFollowTheirFormulas) {
  auto be = make_cpu_backend(1);
  const std::vector<float> g = {-6.0f, -2.5f, -1.0f, -0.1f, 0.0f, 0.3f, 1.0f, 2.0f, 7.5f},
                           u = {1.0f, -2.0f, 0.5f, 3.0f, 9.0f, -1.5f, 2.0f, 0.25f, -1.0f};
  const int64_t n = static_cast<int64_t>(g.size());
  Tensor gt = be->alloc_persistent(DType::F32, {n}), ut = be->alloc_persistent(DType::F32, {n}),
         y = be->alloc_persistent(DType::F32, {n});
  be->write(gt, g.data(), gt.nbytes());
  be->write(ut, u.data(), ut.nbytes());
  be->geglu(gt, ut, y);
  std::vector<float> got = read_floats(*be, y);
  for (int64_t i = 0; i < n; ++i) {
    const double x = g[i];
    const double gelu = 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    EXPECT_NEAR(got[i], gelu * u[i], 1e-6 * (1.0 + std::fabs(gelu * u[i]))) << "x = " << x;
  }
  be->scale(gt, 25.298221f, y);
  got = read_floats(*be, y);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(got[i], g[i] * 25.298221f);
}

}  // namespace
}  // namespace zinc
