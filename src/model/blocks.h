// Building blocks shared by the architectures: each is a short sequence of backend
// ops over a struct of weights and a struct of options. Architectures compose them
// in their forward pass; no block knows which architecture called it.
#pragma once

#include <cstdint>
#include <span>

#include "backend/backend.h"
#include "runtime/sequence.h"

namespace zinc::blocks {

// Starts a forward pass over tokens at positions [seq.n_past, seq.n_past + n): checks
// the counts against the context, resets scratch, and uploads the token ids and
// positions (I32 {n} each).
struct ForwardInputs {
  Tensor ids, pos;
};
ForwardInputs begin_forward(Backend& be, const SequenceState& seq, std::span<const int32_t> tokens, int64_t n_out);

// y {out, n} = w · x, in fresh scratch.
Tensor linear(Backend& be, const Tensor& w, const Tensor& x);
Tensor rms_norm(Backend& be, const Tensor& x, const Tensor& w, float eps);
Tensor add(Backend& be, const Tensor& a, const Tensor& b);

struct AttentionWeights {
  Tensor q, k, v, o;        // q {d, Hq·D (·2 when gated)}, k/v {d, Hkv·D}, o {Hq·D, d}
  Tensor q_norm, k_norm;    // {D} per-head RMSNorm, or empty
};
struct AttentionOptions {
  int64_t n_head = 0, n_head_kv = 0, head_dim = 0;
  RopeParams rope;
  float norm_eps = 1e-6f;
  bool output_gate = false;  // q projection holds [query D | gate D] per head; o *= sigmoid(gate)
  float scale = 0;           // 0: 1/sqrt(head_dim)
};
// Causal self-attention over the sequence's KV cache; x {d, n} at positions pos (I32 {n}).
Tensor attention(Backend& be, const AttentionWeights& w, const AttentionOptions& opt, LayerState& state,
                 const Tensor& x, const Tensor& pos);

struct GatedDeltaNetWeights {
  Tensor qkv, gate;         // {d, 2·Hk·dk + H·dv}, {d, H·dv} (z)
  Tensor conv;              // {K, 2·Hk·dk + H·dv}
  Tensor alpha, beta;       // {d, H}
  Tensor dt_bias, a_neg;    // {H}; a_neg = -exp(A_log)
  Tensor norm;              // {dv}, shared by all heads
  Tensor out;               // {H·dv, d}
};
struct GatedDeltaNetOptions {
  int64_t n_k_heads = 0, n_v_heads = 0, dk = 0, dv = 0, conv_kernel = 4;
  float norm_eps = 1e-6f;
};
// Gated DeltaNet mixer (Qwen3-Next / Qwen3.5): projections, causal conv, gated delta
// rule with the sequence's state, gated RMSNorm, output projection.
Tensor gated_delta_net(Backend& be, const GatedDeltaNetWeights& w, const GatedDeltaNetOptions& opt,
                       LayerState& state, const Tensor& x);

struct FfnWeights {
  Tensor gate, up, down;    // {d, ff}, {d, ff}, {ff, d}
};
Tensor swiglu_ffn(Backend& be, const FfnWeights& w, const Tensor& x);

struct MoeWeights {
  Tensor router;                  // {d, E}
  Tensor gate_exps, up_exps;      // {d, ff, E}
  Tensor down_exps;               // {ff, d, E}
  FfnWeights shared;              // empty when the model has no shared expert
  Tensor shared_gate;             // {d, 1}: sigmoid gate of the shared expert, or empty
};
struct MoeOptions {
  int n_used = 0;
  bool renormalize = true;
};
Tensor moe(Backend& be, const MoeWeights& w, const MoeOptions& opt, const Tensor& x);

}  // namespace zinc::blocks
