// Building blocks shared by the architectures: each is a short sequence of backend
// ops over a struct of weights and a struct of options. Architectures compose them
// in their forward pass; no block knows which architecture called it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "model/model.h"
#include "runtime/sequence.h"

namespace zinc::blocks {

// A forward pass over several sequences' tokens, concatenated: sequence i owns
// token rows [offset, offset + count). Built by begin_forward, which checks the
// counts against each context, resets scratch and uploads the token ids and
// positions (I32 {n} each).
struct BatchSequence {
  SequenceState* seq;
  int64_t offset, count, n_out;
};
struct Batch {
  Tensor ids, pos;
  int64_t n_tokens = 0, n_out = 0;
  std::vector<BatchSequence> seqs;
};
Batch begin_forward(Backend& be, std::span<const SequenceChunk> chunks);
// The rows of x {d, n_tokens} whose logits are wanted, in chunk order ({d, n_out});
// advances every sequence's n_past. Call once, after the last layer.
Tensor finish_forward(Backend& be, const Batch& batch, const Tensor& x);

// y {out, n} = w · x, in fresh scratch.
Tensor linear(Backend& be, const Tensor& w, const Tensor& x);
Tensor rms_norm(Backend& be, const Tensor& x, const Tensor& w, float eps);
// y[i] {w[i].ne[1], n} = w[i] · x for each weight, in one backend call (one launch on a GPU).
std::vector<Tensor> linear_many(Backend& be, const std::vector<Tensor>& w, const Tensor& x);
// An optional weight as the backend takes it: null where the file has none.
inline const Tensor* given(const Tensor& t) { return t.empty() ? nullptr : &t; }
// The residual add fused with the norm that follows it: x += b in place (x +=
// rms_norm(b, *b_norm) with b_norm: Gemma's post-norms; b + *b_bias with b_bias: gpt-oss's
// output projection bias), returns rms_norm(x, w) in fresh scratch.
Tensor add_rms_norm(Backend& be, const Tensor& x, const Tensor& b, const Tensor& w, float eps,
                    const Tensor* b_norm = nullptr, const Tensor* b_bias = nullptr);

// The rows of a layer's KV cache for a context of n_ctx positions: all of them, or
// with a sliding window (window > 0) a ring of the window's rows and a piece's
// (Model::kWindowPiece; backend.h's kv_store), so that attention() can take a chunk
// in pieces that overwrite no row one of their queries reads.
int64_t kv_cache_rows(int window, int64_t n_ctx, int64_t window_piece);
// A sequence of n_ctx positions with an F16 KV cache {head_dim, n_head_kv,
// kv_cache_rows(windows[i], n_ctx, window_piece)} per layer i (the attention-only
// architectures; window 0: the whole context).
SequenceState kv_cache_sequence(Backend& be, std::span<const int> windows, int64_t head_dim, int64_t n_head_kv,
                                int64_t n_ctx, int64_t window_piece);

struct AttentionWeights {
  Tensor q, k, v, o;        // q {d, Hq·D (·2 when gated)}, k/v {d, Hkv·D}, o {Hq·D, d}
  Tensor q_norm, k_norm;    // {D} per-head RMSNorm, or empty
  Tensor q_bias, k_bias, v_bias;  // added after each projection, or empty (GPT-OSS)
  Tensor o_bias;  // the caller's to add (gpt-oss: in the residual norm after the block, add_rms_norm's b_bias)
  Tensor sinks;             // {Hq}: attention sinks (backend.h), or empty
};
struct AttentionOptions {
  int64_t n_head = 0, n_head_kv = 0, head_dim = 0;
  RopeParams rope;
  float norm_eps = 1e-6f;
  bool output_gate = false;  // q projection holds [query D | gate D] per head; o *= sigmoid(gate)
  float scale = 0;           // 0: 1/sqrt(head_dim)
  int window = 0;            // > 0: sliding-window attention over the last `window` positions
};
// Causal self-attention, each sequence over its own KV cache (layer `layer` of its
// state); x {d, n_tokens}.
Tensor attention(Backend& be, const AttentionWeights& w, const AttentionOptions& opt, const Batch& batch, int layer,
                 const Tensor& x);

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
// rule with each sequence's own state (layer `layer`), gated RMSNorm, output projection.
Tensor gated_delta_net(Backend& be, const GatedDeltaNetWeights& w, const GatedDeltaNetOptions& opt,
                       const Batch& batch, int layer, const Tensor& x);

struct FfnWeights {
  Tensor gate, up, down;    // {d, ff}, {d, ff}, {ff, d}
};
// down(act(gate x) · up x): SiLU (SwiGLU: Llama, Qwen) or GELU (GeGLU: Gemma).
enum class Glu { Silu, Gelu };
Tensor glu_ffn(Backend& be, const FfnWeights& w, const Tensor& x, Glu act);

struct MoeWeights {
  Tensor router;                  // {d, E}
  Tensor router_bias;             // {E}, or empty
  ExpertWeights experts;          // the routed experts (backend.h)
  FfnWeights shared;              // empty when the model has no shared expert
  Tensor shared_gate;             // {d, 1}: sigmoid gate of the shared expert, or empty
};
struct MoeOptions {
  int n_used = 0;
  bool renormalize = true;
};
Tensor moe(Backend& be, const MoeWeights& w, const MoeOptions& opt, const Tensor& x);
// A pre-norm layer's FFN half on h = rms_norm(sum = a + b, norm, eps): moe(*moe, opt, h),
// its norm formed in the router's launch (add_rms_norm_matmul_many), or without moe the
// SwiGLU glu_ffn(dense, h). sum must not alias a or b.
Tensor swiglu_or_moe_after_add(Backend& be, const MoeWeights* moe, const MoeOptions& opt, const FfnWeights& dense,
                               const Tensor& a, const Tensor& b, const Tensor& norm, float eps, const Tensor& sum);

}  // namespace zinc::blocks
