// Backend::gated_delta_net_core is defined as gdn_prepare, gated_delta_rule and
// rms_norm_gated in a row: on the CPU backend the fused op equals that composition
// bit for bit, over several steps that carry the conv and delta states.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "backend/backend.h"

namespace zinc {
namespace {

// Random tensors on a one-thread CPU backend, their copies and their values.
struct Tensors {
  explicit Tensors(uint32_t seed) : be(make_cpu_backend(1)), rng(seed) {}
  Tensor tensor(std::initializer_list<int64_t> dims, float scale, float mean) {
    Tensor t = be->alloc_persistent(DType::F32, dims);
    std::vector<float> v(t.n_elements());
    for (auto& e : v) e = mean + scale * nd(rng);
    be->write(t, v.data(), t.nbytes());
    return t;
  }
  Tensor copy_of(const Tensor& t) {
    Tensor r = be->alloc_persistent(DType::F32, {t.ne[0], t.ne[1], t.ne[2]});
    be->copy(t, r);
    return r;
  }
  std::vector<float> read(const Tensor& t) {
    std::vector<float> v(t.n_elements());
    be->read(t, v.data(), t.nbytes());
    return v;
  }
  std::unique_ptr<Backend> be;
  std::mt19937 rng;
  std::normal_distribution<float> nd{0.0f, 1.0f};
};

class GdnCore : public ::testing::TestWithParam<int64_t> {};

TEST_P(GdnCore, EqualsTheComposition) {
  const int64_t n = GetParam(), H = 4, Hk = 2, dk = 16, dv = 8, K = 4, C = 2 * Hk * dk + H * dv;
  Tensors ts(7 + static_cast<uint32_t>(n));
  Backend* be = ts.be.get();
  const Tensor conv_w = ts.tensor({K, C}, 0.5f, 0), dt_bias = ts.tensor({H}, 0.5f, -2),
               a_neg = ts.tensor({H}, 0.3f, -1);
  const Tensor norm_w = ts.tensor({dv}, 0.1f, 1);
  const Tensor conv_fused = ts.tensor({C, K - 1}, 1, 0), state_fused = ts.tensor({dv, dk, H}, 0.1f, 0);
  const Tensor conv_ref = ts.copy_of(conv_fused), state_ref = ts.copy_of(state_fused);
  for (int step = 0; step < 3; ++step) {
    const Tensor qkv = ts.tensor({C, n}, 1, 0), a = ts.tensor({H, n}, 1, 0), b = ts.tensor({H, n}, 1, 0);
    const Tensor z = ts.tensor({dv, H, n}, 1, 0);
    const Tensor y_fused = be->alloc_persistent(DType::F32, {dv, H, n});
    be->gated_delta_net_core(qkv, conv_w, std::span(&conv_fused, 1), a, b, dt_bias, a_neg, 1e-6f,
                             std::span(&state_fused, 1), z, norm_w, 1e-6f, y_fused);

    const Tensor q = be->alloc_persistent(DType::F32, {dk, Hk, n}), k = be->alloc_persistent(DType::F32, {dk, Hk, n});
    const Tensor v = be->alloc_persistent(DType::F32, {dv, H, n}), g = be->alloc_persistent(DType::F32, {H, n});
    const Tensor beta = be->alloc_persistent(DType::F32, {H, n}), y_ref = be->alloc_persistent(DType::F32, {dv, H, n});
    be->gdn_prepare(qkv, conv_w, conv_ref, a, b, dt_bias, a_neg, 1e-6f, q, k, v, g, beta);
    be->gated_delta_rule(q, k, v, g, beta, state_ref, y_ref);
    be->rms_norm_gated(y_ref, norm_w, z, 1e-6f, y_ref);

    const auto yf = ts.read(y_fused), yr = ts.read(y_ref);
    EXPECT_EQ(std::memcmp(yf.data(), yr.data(), yf.size() * sizeof(float)), 0) << "step " << step;
    double mag = 0;
    for (float e : yf) mag += std::abs(e);
    EXPECT_GT(mag / yf.size(), 1e-2);  // not trivially zero
  }
  const auto sf = ts.read(state_fused), sr = ts.read(state_ref), cf = ts.read(conv_fused), cr = ts.read(conv_ref);
  EXPECT_EQ(std::memcmp(sf.data(), sr.data(), sf.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(cf.data(), cr.data(), cf.size() * sizeof(float)), 0);
}

// Decode lengths (the CUDA decode kernel's range), and a prefill length (chunked rule).
INSTANTIATE_TEST_SUITE_P(Tokens, GdnCore, ::testing::Values(1, 3, 8, 20));

// One token for each of several sequences (a batched decode step) equals one call per
// sequence on its token, bit for bit: token t goes with conv_states[t] and states[t].
TEST(GdnCoreSequences, OneTokenEachEqualsACallPerSequence) {
  constexpr int64_t n = 5, H = 4, Hk = 2, dk = 16, dv = 8, K = 4, C = 2 * Hk * dk + H * dv;
  Tensors ts(3);
  Backend* be = ts.be.get();
  const Tensor conv_w = ts.tensor({K, C}, 0.5f, 0), dt_bias = ts.tensor({H}, 0.5f, -2),
               a_neg = ts.tensor({H}, 0.3f, -1);
  const Tensor norm_w = ts.tensor({dv}, 0.1f, 1);
  std::vector<Tensor> conv, state, conv_ref, state_ref;
  for (int64_t i = 0; i < n; ++i) {
    conv.push_back(ts.tensor({C, K - 1}, 1, 0)), state.push_back(ts.tensor({dv, dk, H}, 0.1f, 0));
    conv_ref.push_back(ts.copy_of(conv.back())), state_ref.push_back(ts.copy_of(state.back()));
  }
  for (int step = 0; step < 2; ++step) {
    const Tensor qkv = ts.tensor({C, n}, 1, 0), a = ts.tensor({H, n}, 1, 0), b = ts.tensor({H, n}, 1, 0);
    const Tensor z = ts.tensor({dv, H, n}, 1, 0);
    const Tensor y = be->alloc_persistent(DType::F32, {dv, H, n}), y_ref = be->alloc_persistent(DType::F32, {dv, H, n});
    be->gated_delta_net_core(qkv, conv_w, conv, a, b, dt_bias, a_neg, 1e-6f, state, z, norm_w, 1e-6f, y);
    for (int64_t t = 0; t < n; ++t) {
      const size_t i = static_cast<size_t>(t);
      be->gated_delta_net_core(qkv.slice(1, t, 1), conv_w, std::span(&conv_ref[i], 1), a.slice(1, t, 1),
                               b.slice(1, t, 1), dt_bias, a_neg, 1e-6f, std::span(&state_ref[i], 1), z.slice(2, t, 1),
                               norm_w, 1e-6f, y_ref.slice(2, t, 1));
    }
    EXPECT_EQ(ts.read(y), ts.read(y_ref)) << "step " << step;
  }
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    EXPECT_EQ(ts.read(state[i]), ts.read(state_ref[i])) << "sequence " << i;
    EXPECT_EQ(ts.read(conv[i]), ts.read(conv_ref[i])) << "sequence " << i;
  }
  EXPECT_NE(ts.read(state[0]), ts.read(state[1]));  // the sequences' states are their own
}

}  // namespace
}  // namespace zinc
