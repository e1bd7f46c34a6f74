#include "model/blocks.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace zinc::blocks {

ForwardInputs begin_forward(Backend& be, const SequenceState& seq, std::span<const int32_t> tokens, int64_t n_out) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0 || n_out < 1 || n_out > n) throw std::invalid_argument("forward: bad token count or n_out");
  if (seq.n_past + n > seq.n_ctx)
    throw std::length_error("forward: " + std::to_string(seq.n_past + n) + " tokens exceed the context of " +
                            std::to_string(seq.n_ctx));
  be.scratch_reset();
  ForwardInputs in{be.scratch(DType::I32, {n}), be.scratch(DType::I32, {n})};
  be.write(in.ids, tokens.data(), n * sizeof(int32_t));
  std::vector<int32_t> positions(n);
  for (int64_t i = 0; i < n; ++i) positions[i] = static_cast<int32_t>(seq.n_past + i);
  be.write(in.pos, positions.data(), n * sizeof(int32_t));
  return in;
}

Tensor linear(Backend& be, const Tensor& w, const Tensor& x) {
  Tensor y = be.scratch(DType::F32, {w.ne[1], x.rows()});
  be.matmul(w, x, y);
  return y;
}

Tensor rms_norm(Backend& be, const Tensor& x, const Tensor& w, float eps) {
  Tensor y = be.scratch(DType::F32, {x.ne[0], x.ne[1], x.ne[2], x.ne[3]});
  be.rms_norm(x, &w, eps, y);
  return y;
}

Tensor add(Backend& be, const Tensor& a, const Tensor& b) {
  Tensor y = be.scratch(DType::F32, {a.ne[0], a.ne[1], a.ne[2], a.ne[3]});
  be.add(a, b, y);
  return y;
}

Tensor attention(Backend& be, const AttentionWeights& w, const AttentionOptions& opt, LayerState& state,
                 const Tensor& x, const Tensor& pos) {
  const int64_t n = x.rows(), D = opt.head_dim, Hq = opt.n_head, Hkv = opt.n_head_kv;
  Tensor q, gate;
  Tensor qp = linear(be, w.q, x);
  if (opt.output_gate) {
    // {2D, Hq·n}: each head's query then its gate.
    Tensor both = qp.reshape({2 * D, Hq * n});
    q = be.scratch(DType::F32, {D, Hq, n});
    gate = be.scratch(DType::F32, {D, Hq * n});
    be.slice_cols(both, 0, D, q);
    be.slice_cols(both, D, D, gate);
  } else {
    q = qp.reshape({D, Hq, n});
  }
  Tensor k = linear(be, w.k, x).reshape({D, Hkv, n});
  Tensor v = linear(be, w.v, x).reshape({D, Hkv, n});
  if (!w.q_norm.empty()) be.rms_norm(q, &w.q_norm, opt.norm_eps, q);
  if (!w.k_norm.empty()) be.rms_norm(k, &w.k_norm, opt.norm_eps, k);
  be.rope(q, pos, opt.rope);
  be.rope(k, pos, opt.rope);
  be.kv_store(k, v, state.k_cache, state.v_cache, pos);
  Tensor o = be.scratch(DType::F32, {D, Hq, n});
  const float scale = opt.scale > 0 ? opt.scale : 1.0f / std::sqrt(static_cast<float>(D));
  be.attention(q, state.k_cache, state.v_cache, pos, scale, o);
  if (opt.output_gate) be.mul_sigmoid(o, gate.reshape({D, Hq, n}), o);
  return linear(be, w.o, o.reshape({D * Hq, n}));
}

Tensor gated_delta_net(Backend& be, const GatedDeltaNetWeights& w, const GatedDeltaNetOptions& opt,
                       LayerState& state, const Tensor& x) {
  const int64_t n = x.rows(), Hk = opt.n_k_heads, H = opt.n_v_heads, dk = opt.dk, dv = opt.dv;
  const int64_t qk_width = Hk * dk, channels = 2 * qk_width + H * dv;
  Tensor qkv = linear(be, w.qkv, x);  // {channels, n}
  Tensor z = linear(be, w.gate, x);   // {H·dv, n}
  Tensor a = linear(be, w.alpha, x);  // {H, n}
  Tensor b = linear(be, w.beta, x);   // {H, n}
  Tensor g = be.scratch(DType::F32, {H, n});
  Tensor beta = be.scratch(DType::F32, {H, n});
  be.gdn_gates(a, b, w.dt_bias, w.a_neg, g, beta);

  Tensor conv = be.scratch(DType::F32, {channels, n});
  be.causal_conv_silu(qkv, w.conv, state.conv, conv);
  Tensor q = be.scratch(DType::F32, {qk_width, n});
  Tensor k = be.scratch(DType::F32, {qk_width, n});
  Tensor v = be.scratch(DType::F32, {H * dv, n});
  be.slice_cols(conv, 0, qk_width, q);
  be.slice_cols(conv, qk_width, qk_width, k);
  be.slice_cols(conv, 2 * qk_width, H * dv, v);
  q = q.reshape({dk, Hk, n});
  k = k.reshape({dk, Hk, n});
  v = v.reshape({dv, H, n});
  be.l2_norm(q, 1e-6f, q);
  be.l2_norm(k, 1e-6f, k);

  Tensor y = be.scratch(DType::F32, {dv, H, n});
  be.gated_delta_rule(q, k, v, g, beta, state.delta, y);
  be.rms_norm_gated(y, w.norm, z.reshape({dv, H, n}), opt.norm_eps, y);
  return linear(be, w.out, y.reshape({dv * H, n}));
}

Tensor swiglu_ffn(Backend& be, const FfnWeights& w, const Tensor& x) {
  Tensor g = linear(be, w.gate, x);
  Tensor u = linear(be, w.up, x);
  be.swiglu(g, u, g);
  return linear(be, w.down, g);
}

Tensor moe(Backend& be, const MoeWeights& w, const MoeOptions& opt, const Tensor& x) {
  const int64_t n = x.rows();
  Tensor logits = linear(be, w.router, x);  // {E, n}
  Tensor ids = be.scratch(DType::I32, {opt.n_used, n});
  Tensor weights = be.scratch(DType::F32, {opt.n_used, n});
  be.moe_route(logits, opt.n_used, opt.renormalize, ids, weights);
  Tensor y = be.scratch(DType::F32, {x.ne[0], n});
  be.moe_ffn(x, w.gate_exps, w.up_exps, w.down_exps, ids, weights, y);
  if (!w.shared.gate.empty()) {
    Tensor s = swiglu_ffn(be, w.shared, x);
    if (!w.shared_gate.empty()) be.mul_sigmoid(s, linear(be, w.shared_gate, x), s);
    be.add(y, s, y);
  }
  return y;
}

}  // namespace zinc::blocks
