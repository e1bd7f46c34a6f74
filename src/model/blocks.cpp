#include "model/blocks.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace zinc::blocks {

namespace {
// Sequence s's tokens of a per-token tensor whose dim `dim` counts tokens
// (I32 positions {n}: dim 0).
Tensor slice_tokens(const Tensor& t, const BatchSequence& s, int dim) {
  if (s.offset == 0 && s.count == t.ne[dim]) return t;
  return t.slice(dim, s.offset, s.count);
}
// A decode step of several sequences: sequence i holds token i of the batch.
bool one_token_each(const Batch& batch) {
  bool each = batch.seqs.size() > 1;
  for (size_t i = 0; i < batch.seqs.size(); ++i)
    each = each && batch.seqs[i].count == 1 && batch.seqs[i].offset == static_cast<int64_t>(i);
  return each;
}
// Each sequence's `member` of its layer `layer` state (caches, states), in batch order.
std::vector<Tensor> per_sequence(const Batch& batch, int layer, Tensor LayerState::*member) {
  std::vector<Tensor> out;
  for (const BatchSequence& s : batch.seqs) out.push_back(s.seq->layers[layer].*member);
  return out;
}
}  // namespace

Batch begin_forward(Backend& be, std::span<const SequenceChunk> chunks) {
  if (chunks.empty()) throw std::invalid_argument("forward: empty batch");
  Batch batch;
  for (const SequenceChunk& c : chunks) {
    const int64_t n = static_cast<int64_t>(c.tokens.size());
    if (!c.seq || n == 0 || c.n_out < 0 || c.n_out > n)
      throw std::invalid_argument("forward: bad token count or n_out");
    if (c.device_ids && (c.device_ids->type != DType::I32 || c.device_ids->n_elements() != n))
      throw std::invalid_argument("forward: device_ids must be I32 with one id per token");
    if (c.seq->n_past + n > c.seq->n_ctx)
      throw std::length_error("forward: " + std::to_string(c.seq->n_past + n) + " tokens exceed the context of " +
                              std::to_string(c.seq->n_ctx));
    for (const BatchSequence& s : batch.seqs)
      if (s.seq == c.seq) throw std::invalid_argument("forward: a sequence appears twice in one batch");
    batch.seqs.push_back({c.seq, batch.n_tokens, n, c.n_out});
    batch.n_tokens += n;
    batch.n_out += c.n_out;
  }
  // Token ids then positions, in one host copy (a decode step's only one).
  const int64_t n = batch.n_tokens;
  std::vector<int32_t> io;
  io.reserve(2 * n);
  for (const SequenceChunk& c : chunks) io.insert(io.end(), c.tokens.begin(), c.tokens.end());
  for (const SequenceChunk& c : chunks)
    for (size_t i = 0; i < c.tokens.size(); ++i) io.push_back(static_cast<int32_t>(c.seq->n_past + i));
  be.scratch_reset();
  const Tensor both = be.scratch(DType::I32, {2 * n});
  be.write(both, io.data(), io.size() * sizeof(int32_t));
  batch.ids = Tensor::make(DType::I32, {n}, both.data);
  batch.pos = Tensor::make(DType::I32, {n}, static_cast<int32_t*>(both.data) + n);
  // Sequences fed on the device from one buffer in batch order (zinc bench's and the
  // engine's greedy steps) read their ids where they are; other device-fed ids are copied in.
  const Tensor* first = chunks[0].device_ids;
  bool in_place = first != nullptr;
  for (const BatchSequence& s : batch.seqs) {
    const Tensor* fed = chunks[&s - batch.seqs.data()].device_ids;
    in_place = in_place && fed && fed->data == static_cast<int32_t*>(first->data) + s.offset;
  }
  if (in_place) {
    batch.ids = Tensor::make(DType::I32, {n}, first->data);
    return batch;
  }
  for (const BatchSequence& s : batch.seqs) {
    const SequenceChunk& c = chunks[&s - batch.seqs.data()];
    if (c.device_ids) be.copy(*c.device_ids, slice_tokens(batch.ids, s, 0));
  }
  return batch;
}

Tensor finish_forward(Backend& be, const Batch& batch, const Tensor& x) {
  for (const BatchSequence& s : batch.seqs) s.seq->n_past += s.count;
  if (batch.n_out == 0) return {};
  // One sequence (the common case) needs no gather.
  if (batch.seqs.size() == 1) return x.slice(1, batch.n_tokens - batch.n_out, batch.n_out);
  Tensor out = be.scratch(DType::F32, {x.ne[0], batch.n_out});
  int64_t row = 0;
  for (const BatchSequence& s : batch.seqs) {
    if (s.n_out == 0) continue;
    be.copy(x.slice(1, s.offset + s.count - s.n_out, s.n_out), out.slice(1, row, s.n_out));
    row += s.n_out;
  }
  return out;
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

namespace {
// Fresh scratch for the outputs of projections w of n tokens.
std::vector<Tensor> projection_outputs(Backend& be, const std::vector<Tensor>& w, int64_t n) {
  std::vector<Tensor> y;
  for (const Tensor& wi : w) y.push_back(be.scratch(DType::F32, {wi.ne[1], n}));
  return y;
}
}  // namespace

std::vector<Tensor> linear_many(Backend& be, const std::vector<Tensor>& w, const Tensor& x) {
  std::vector<Tensor> y = projection_outputs(be, w, x.rows());
  be.matmul_many(w, x, y);
  return y;
}

Tensor add_rms_norm(Backend& be, const Tensor& x, const Tensor& b, const Tensor& w, float eps, const Tensor* b_norm,
                    const Tensor* b_bias) {
  Tensor y = be.scratch(DType::F32, {x.ne[0], x.ne[1], x.ne[2], x.ne[3]});
  be.add_rms_norm(x, b, b_bias, b_norm, w, eps, x, y);
  return y;
}

int64_t kv_cache_rows(int window, int64_t n_ctx, int64_t window_piece) {
  if (window_piece < 1) throw std::invalid_argument("kv_cache_rows: window_piece must be positive");
  return window > 0 ? std::min<int64_t>(n_ctx, window + window_piece - 1) : n_ctx;
}

SequenceState kv_cache_sequence(Backend& be, std::span<const int> windows, int64_t head_dim, int64_t n_head_kv,
                                int64_t n_ctx, int64_t window_piece) {
  SequenceState s;
  s.n_ctx = n_ctx;
  for (const int window : windows) {
    const int64_t rows = kv_cache_rows(window, n_ctx, window_piece);
    LayerState ls;
    ls.k_cache = be.alloc_persistent(DType::F16, {head_dim, n_head_kv, rows});
    ls.v_cache = be.alloc_persistent(DType::F16, {head_dim, n_head_kv, rows});
    s.layers.push_back(ls);
  }
  return s;
}

Tensor attention(Backend& be, const AttentionWeights& w, const AttentionOptions& opt, const Batch& batch, int layer,
                 const Tensor& x) {
  const int64_t n = x.rows(), D = opt.head_dim, Hq = opt.n_head, Hkv = opt.n_head_kv;
  const std::vector<Tensor> proj = linear_many(be, {w.q, w.k, w.v}, x);
  // The projections' biases (gpt-oss) are added by attention_prepare.
  const Backend::QkvBias bias{given(w.q_bias), given(w.k_bias), given(w.v_bias)};
  // With an output gate the projection holds each head's query then its gate.
  const Tensor qp = proj[0].reshape({opt.output_gate ? 2 * D : D, Hq, n});
  const Tensor q = opt.output_gate ? be.scratch(DType::F32, {D, Hq, n}) : qp;
  const Tensor gate = opt.output_gate ? be.scratch(DType::F32, {D, Hq, n}) : Tensor{};
  const Tensor k = proj[1].reshape({D, Hkv, n}), v = proj[2].reshape({D, Hkv, n});
  const Tensor *q_norm = given(w.q_norm), *k_norm = given(w.k_norm), *sinks = given(w.sinks);
  Tensor o = be.scratch(DType::F32, {D, Hq, n});
  const float scale = opt.scale > 0 ? opt.scale : 1.0f / std::sqrt(static_cast<float>(D));
  // The caches of each sequence's tokens: one call for a decode step of several
  // sequences (one token each), else a call per sequence.
  const auto run = [&](const Tensor& qp_s, const Tensor& k_s, const Tensor& v_s, const Tensor& ps, const Tensor& qs,
                       const Tensor& gs, const Tensor& os, std::span<const Tensor> kc, std::span<const Tensor> vc) {
    be.attention_prepare(qp_s, k_s, v_s, bias, q_norm, k_norm, opt.norm_eps, ps, opt.rope, qs,
                         opt.output_gate ? &gs : nullptr, kc, vc);
    if (opt.output_gate) be.attention_gated(qs, kc, vc, ps, scale, opt.window, gs, os);
    else be.attention(qs, kc, vc, ps, scale, opt.window, sinks, os);
  };
  if (one_token_each(batch)) {
    run(qp, k, v, batch.pos, q, gate, o, per_sequence(batch, layer, &LayerState::k_cache),
        per_sequence(batch, layer, &LayerState::v_cache));
  } else {
    for (const BatchSequence& s : batch.seqs) {
      const LayerState& state = s.seq->layers[layer];
      // Over a sliding window's ring (a cache shorter than the context), pieces short
      // enough that each query's window is still in the cache after the piece's rows
      // are written.
      const int64_t rows = state.k_cache.ne[2];
      const bool ring = rows < s.seq->n_ctx;
      if (ring && (opt.window <= 0 || opt.window > rows))
        throw std::invalid_argument("attention: a KV cache shorter than the context needs a window that fits it");
      const int64_t piece = ring ? rows - opt.window + 1 : s.count;
      for (int64_t at = 0; at < s.count; at += piece) {
        const BatchSequence p{s.seq, s.offset + at, std::min(piece, s.count - at), 0};
        run(slice_tokens(qp, p, 2), slice_tokens(k, p, 2), slice_tokens(v, p, 2), slice_tokens(batch.pos, p, 0),
            slice_tokens(q, p, 2), opt.output_gate ? slice_tokens(gate, p, 2) : Tensor{}, slice_tokens(o, p, 2),
            std::span(&state.k_cache, 1), std::span(&state.v_cache, 1));
      }
    }
  }
  return linear(be, w.o, o.reshape({D * Hq, n}));
}

Tensor gated_delta_net(Backend& be, const GatedDeltaNetWeights& w, const GatedDeltaNetOptions& opt,
                       const Batch& batch, int layer, const Tensor& x) {
  const int64_t n = x.rows(), H = opt.n_v_heads, dv = opt.dv;
  const std::vector<Tensor> proj = linear_many(be, {w.qkv, w.gate, w.alpha, w.beta}, x);
  // qkv {2·Hk·dk + H·dv, n}, z {H·dv, n}, a and b {H, n}.
  const Tensor &qkv = proj[0], &a = proj[2], &b = proj[3];
  const Tensor z = proj[1].reshape({dv, H, n});
  Tensor y = be.scratch(DType::F32, {dv, H, n});
  if (one_token_each(batch)) {  // a decode step of several sequences: one call
    be.gated_delta_net_core(qkv, w.conv, per_sequence(batch, layer, &LayerState::conv), a, b, w.dt_bias, w.a_neg,
                            1e-6f, per_sequence(batch, layer, &LayerState::delta), z, w.norm, opt.norm_eps, y);
  } else {
    for (const BatchSequence& s : batch.seqs) {
      const auto& st = s.seq->layers[layer];
      be.gated_delta_net_core(slice_tokens(qkv, s, 1), w.conv, std::span(&st.conv, 1), slice_tokens(a, s, 1),
                              slice_tokens(b, s, 1), w.dt_bias, w.a_neg, 1e-6f, std::span(&st.delta, 1),
                              slice_tokens(z, s, 2), w.norm, opt.norm_eps, slice_tokens(y, s, 2));
    }
  }
  return linear(be, w.out, y.reshape({dv * H, n}));
}

Tensor glu_ffn(Backend& be, const FfnWeights& w, const Tensor& x, Glu act) {
  const std::vector<Tensor> gu = linear_many(be, {w.gate, w.up}, x);
  if (act == Glu::Silu) be.swiglu(gu[0], gu[1], gu[0]);
  else be.geglu(gu[0], gu[1], gu[0]);
  return linear(be, w.down, gu[0]);
}

namespace {
// The router and the shared expert's gate, up and gate logit: the weights of one call.
std::vector<Tensor> router_weights(const MoeWeights& w) {
  std::vector<Tensor> ws{w.router};
  if (!w.shared.gate.empty()) ws.insert(ws.end(), {w.shared.gate, w.shared.up});
  if (!w.shared.gate.empty() && !w.shared_gate.empty()) ws.push_back(w.shared_gate);
  return ws;
}
// The rest of the block, on x and router_weights(w)'s outputs.
Tensor moe_from_router(Backend& be, const MoeWeights& w, const MoeOptions& opt, const Tensor& x,
                       const std::vector<Tensor>& proj) {
  const Tensor& logits = proj[0];  // {E, n}
  if (!w.router_bias.empty()) be.add(logits, w.router_bias, logits);
  Tensor y = be.scratch(DType::F32, {x.ne[0], x.rows()});
  const bool shared = !w.shared.gate.empty();
  Backend::SharedExpert shared_expert;
  if (shared) shared_expert = {proj[1], proj[2], w.shared.down, proj.size() > 3 ? &proj[3] : nullptr};
  be.moe_block(x, logits, opt.n_used, opt.renormalize, w.experts, shared ? &shared_expert : nullptr, y);
  return y;
}
// moe(w, opt, rms_norm(sum = a + b, norm, eps)), the norm formed with the router's projections.
Tensor moe_after_add(Backend& be, const MoeWeights& w, const MoeOptions& opt, const Tensor& a, const Tensor& b,
                     const Tensor& norm, float eps, const Tensor& sum) {
  const std::vector<Tensor> ws = router_weights(w);
  const std::vector<Tensor> proj = projection_outputs(be, ws, a.rows());
  const Tensor h = be.scratch(DType::F32, {a.ne[0], a.rows()});
  be.add_rms_norm_matmul_many(a, b, norm, eps, sum, h, ws, proj);
  return moe_from_router(be, w, opt, h, proj);
}
}  // namespace

Tensor moe(Backend& be, const MoeWeights& w, const MoeOptions& opt, const Tensor& x) {
  return moe_from_router(be, w, opt, x, linear_many(be, router_weights(w), x));
}

Tensor swiglu_or_moe_after_add(Backend& be, const MoeWeights* moe, const MoeOptions& opt, const FfnWeights& dense,
                               const Tensor& a, const Tensor& b, const Tensor& norm, float eps, const Tensor& sum) {
  if (moe) return moe_after_add(be, *moe, opt, a, b, norm, eps, sum);
  const Tensor h = be.scratch(DType::F32, {a.ne[0], a.rows()});
  be.add_rms_norm(a, b, nullptr, nullptr, norm, eps, sum, h);
  return glu_ffn(be, dense, h, Glu::Silu);
}

}  // namespace zinc::blocks
