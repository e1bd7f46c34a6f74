// attention_prepare, attention_gated and attention with one token for each of several
// sequences (a batched decode step: token t with k_caches[t], v_caches[t]) equal one
// call per sequence on its token, bit for bit, on the CPU backend; attention_prepare's
// biases equal adding them first.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "quant/half.h"

namespace zinc {
namespace {

// A CPU backend with random F32 tensors and their bytes read back.
struct RandomTensors {
  std::unique_ptr<Backend> be = make_cpu_backend(1);
  std::mt19937 rng;
  std::normal_distribution<float> nd{0.0f, 1.0f};
  explicit RandomTensors(unsigned seed) : rng(seed) {}
  Tensor f32(std::initializer_list<int64_t> dims) {
    Tensor t = be->alloc_persistent(DType::F32, dims);
    std::vector<float> v(t.n_elements());
    for (auto& e : v) e = nd(rng);
    be->write(t, v.data(), t.nbytes());
    return t;
  }
  std::vector<uint8_t> bytes(const Tensor& t) {
    std::vector<uint8_t> v(t.nbytes());
    be->read(t, v.data(), v.size());
    return v;
  }
};

TEST(AttentionSequences, OneTokenEachEqualsACallPerSequence) {
  constexpr int64_t n = 4, D = 16, Hq = 4, Hkv = 2, n_ctx = 40;
  RandomTensors r(5);
  auto& be = r.be;
  auto& nd = r.nd;
  auto& rng = r.rng;
  const auto f32 = [&](std::initializer_list<int64_t> dims) { return r.f32(dims); };
  const auto cache = [&] {
    Tensor t = be->alloc_persistent(DType::F16, {D, Hkv, n_ctx});
    std::vector<uint16_t> v(t.n_elements());
    for (auto& e : v) e = float_to_half_bits(nd(rng));
    be->write(t, v.data(), t.nbytes());
    return t;
  };
  const auto copy_of = [&](const Tensor& t) {
    Tensor c = be->alloc_persistent(t.type, {t.ne[0], t.ne[1], t.ne[2]});
    be->copy(t, c);
    return c;
  };
  const auto bytes = [&](const Tensor& t) { return r.bytes(t); };
  const std::vector<int32_t> positions = {0, 7, 39, 12};
  Tensor pos = be->alloc_persistent(DType::I32, {n});
  be->write(pos, positions.data(), positions.size() * sizeof(int32_t));
  std::vector<Tensor> kc, vc, kc_ref, vc_ref;
  for (int64_t i = 0; i < n; ++i) {
    kc.push_back(cache()), vc.push_back(cache());
    kc_ref.push_back(copy_of(kc.back())), vc_ref.push_back(copy_of(vc.back()));
  }
  const Tensor qp = f32({2 * D, Hq, n}), k = f32({D, Hkv, n}), v = f32({D, Hkv, n});
  const Tensor q_norm = f32({D}), k_norm = f32({D});
  const RopeParams rope{8, 1e4f, true, 1.0f, nullptr};
  const float scale = 0.25f;

  const Tensor q = be->alloc_persistent(DType::F32, {D, Hq, n}), gate = be->alloc_persistent(DType::F32, {D, Hq, n});
  const Tensor y = be->alloc_persistent(DType::F32, {D, Hq, n}), y_plain = be->alloc_persistent(DType::F32, {D, Hq, n});
  be->attention_prepare(qp, k, v, {}, &q_norm, &k_norm, 1e-6f, pos, rope, q, &gate, kc, vc);
  be->attention_gated(q, kc, vc, pos, scale, 0, gate, y);
  be->attention(q, kc, vc, pos, scale, 0, nullptr, y_plain);

  const Tensor q_ref = be->alloc_persistent(DType::F32, {D, Hq, n});
  const Tensor gate_ref = be->alloc_persistent(DType::F32, {D, Hq, n});
  const Tensor y_ref = be->alloc_persistent(DType::F32, {D, Hq, n});
  const Tensor y_plain_ref = be->alloc_persistent(DType::F32, {D, Hq, n});
  for (int64_t t = 0; t < n; ++t) {
    const size_t i = static_cast<size_t>(t);
    Tensor pos_t = pos;
    pos_t.ne[0] = 1;
    pos_t.data = pos.as<int32_t>() + t;
    const Tensor gate_t = gate_ref.slice(2, t, 1);
    be->attention_prepare(qp.slice(2, t, 1), k.slice(2, t, 1), v.slice(2, t, 1), {}, &q_norm, &k_norm, 1e-6f, pos_t,
                          rope, q_ref.slice(2, t, 1), &gate_t, std::span(&kc_ref[i], 1), std::span(&vc_ref[i], 1));
    be->attention_gated(q_ref.slice(2, t, 1), std::span(&kc_ref[i], 1), std::span(&vc_ref[i], 1), pos_t, scale, 0,
                        gate_t, y_ref.slice(2, t, 1));
    be->attention(q_ref.slice(2, t, 1), std::span(&kc_ref[i], 1), std::span(&vc_ref[i], 1), pos_t, scale, 0, nullptr,
                  y_plain_ref.slice(2, t, 1));
  }
  EXPECT_EQ(bytes(q), bytes(q_ref));
  EXPECT_EQ(bytes(gate), bytes(gate_ref));
  EXPECT_EQ(bytes(y), bytes(y_ref));
  EXPECT_EQ(bytes(y_plain), bytes(y_plain_ref));
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    EXPECT_EQ(bytes(kc[i]), bytes(kc_ref[i])) << "sequence " << i;
    EXPECT_EQ(bytes(vc[i]), bytes(vc_ref[i])) << "sequence " << i;
  }
  EXPECT_NE(bytes(kc[0]), bytes(kc[1]));  // each sequence attends over its own cache
}

// The projections' biases given to attention_prepare (gpt-oss's q, k and v biases; q's
// over the gate too) equal adding them first, bit for bit, and leave k and v as they were.
TEST(AttentionPrepare, BiasesEqualAddingThemFirst) {
  constexpr int64_t n = 3, D = 16, Hq = 4, Hkv = 2, n_ctx = 8;
  RandomTensors r(6);
  auto& be = r.be;
  const auto f32 = [&](std::initializer_list<int64_t> dims) { return r.f32(dims); };
  const auto bytes = [&](const Tensor& t) { return r.bytes(t); };
  const std::vector<int32_t> positions = {2, 3, 4};
  Tensor pos = be->alloc_persistent(DType::I32, {n});
  be->write(pos, positions.data(), positions.size() * sizeof(int32_t));
  const Tensor qp = f32({2 * D, Hq, n}), k = f32({D, Hkv, n}), v = f32({D, Hkv, n});
  const Tensor qb = f32({2 * D * Hq}), kb = f32({D * Hkv}), vb = f32({D * Hkv});
  const std::vector<uint8_t> k_before = bytes(k), v_before = bytes(v);
  const RopeParams rope{8, 1e4f, true, 1.0f, nullptr};
  const auto out = [&](std::initializer_list<int64_t> dims) { return be->alloc_persistent(DType::F32, dims); };
  const Tensor q = out({D, Hq, n}), gate = out({D, Hq, n}), q_ref = out({D, Hq, n}), gate_ref = out({D, Hq, n});
  Tensor kc = be->alloc_persistent(DType::F16, {D, Hkv, n_ctx}), vc = be->alloc_persistent(DType::F16, {D, Hkv, n_ctx});
  Tensor kc_ref = be->alloc_persistent(DType::F16, {D, Hkv, n_ctx});
  Tensor vc_ref = be->alloc_persistent(DType::F16, {D, Hkv, n_ctx});
  for (const Tensor& t : {kc, vc, kc_ref, vc_ref}) be->zero(t);
  be->attention_prepare(qp, k, v, {&qb, &kb, &vb}, nullptr, nullptr, 1e-6f, pos, rope, q, &gate, std::span(&kc, 1),
                        std::span(&vc, 1));
  EXPECT_EQ(bytes(k), k_before);
  EXPECT_EQ(bytes(v), v_before);

  const Tensor qp2 = out({2 * D, Hq, n}), k2 = out({D, Hkv, n}), v2 = out({D, Hkv, n});
  be->add(qp.reshape({2 * D * Hq, n}), qb, qp2.reshape({2 * D * Hq, n}));
  be->add(k.reshape({D * Hkv, n}), kb, k2.reshape({D * Hkv, n}));
  be->add(v.reshape({D * Hkv, n}), vb, v2.reshape({D * Hkv, n}));
  be->attention_prepare(qp2, k2, v2, {}, nullptr, nullptr, 1e-6f, pos, rope, q_ref, &gate_ref, std::span(&kc_ref, 1),
                        std::span(&vc_ref, 1));
  EXPECT_EQ(bytes(q), bytes(q_ref));
  EXPECT_EQ(bytes(gate), bytes(gate_ref));
  EXPECT_EQ(bytes(kc), bytes(kc_ref));
  EXPECT_EQ(bytes(vc), bytes(vc_ref));
}

}  // namespace
}  // namespace zinc
