// Host entry points of the CUDA kernels (one per op, each in its own .cu file),
// called by cuda_backend.cpp. Every launcher enqueues on `s` and returns; shapes
// are checked by the backend before it calls here. Temporary device memory comes
// from the caller (the backend's scratch arena) so addresses are deterministic.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "backend/backend.h"

namespace zinc::cuda {

// y {out, n} = x {in, n} · wᵀ, w {in, out} of any block type. matvec is for n <= 5
// (weight-bandwidth bound), but matmul_few takes the weights it can (below);
// matmul_tiled for larger n (tensor cores): from 6 tokens (6 sequences decoding) the
// tensor-core kernels beat the matvec (PERFORMANCE.md, sessions 17 and 22). The MoE
// and shared-expert decode kernels take up to 8 tokens.
inline constexpr int64_t kMatvecMaxTokens = 5;
inline constexpr int64_t kExpertDecodeMaxTokens = 8;
void matvec(const Tensor& w, const Tensor& x, const Tensor& y, cudaStream_t s);
// y[i] = x · w[i]ᵀ for n <= kMatvecMaxTokens, in one launch per weight type (F32 weights join any).
void matvec_many(std::span<const Tensor> w, const Tensor& x, std::span<const Tensor> y, cudaStream_t s);
// sum = a + b, h = rms_norm(sum) · norm_w and y[i] = h · w[i]ᵀ in one launch, where
// matvec_norm_takes(w, a): one token of at most 4096 elements (a multiple of 8), weights
// that matvec_many would take in one launch. sum aliases neither a nor b.
bool matvec_norm_takes(std::span<const Tensor> w, const Tensor& a);
void add_rms_norm_matvec_many(const Tensor& a, const Tensor& b, const Tensor& norm_w, float eps, const Tensor& sum,
                              const Tensor& h, std::span<const Tensor> w, std::span<const Tensor> y, cudaStream_t s);
void matmul_tiled(const Tensor& w, const Tensor& x, const Tensor& y, cudaStream_t s);
// y[i] = x · w[i]ᵀ for kFewMinTokens to kFewMaxTokens tokens (one sequence or several
// decoding) on the tensor cores, each weight byte read once (matmul_few.cu): Q8_0,
// Q4_K, Q5_K and Q6_K rows of whole 256-element chunks (up to 4096 elements; at one
// token longer rows in matmul_few_splits(in, 1) parts, whose partial sums go to parts[i],
// {out, n, splits}, for the caller to add), on Hopper; at one token in groups of
// kFewOneTokenMinRows rows or more (smaller groups are faster on the matvec), and an LM
// head of Q6_K rows of 2048 (kLmHeadMinRows) not at all (the matvec's int8 form). xb: x
// in the pipelined tiles' f16 pairs (to_f16_pairs) for 2 tokens or more; one token reads
// x, and up to kFewMaxF32Weights F32 weights of the same x (f32, f32_y) ride along in
// the first launch. matmul_batched sends it what it takes; on an H200 it made 2 to 8
// sequences 7 to 34% faster than the several-token matvec and the pipelined tiles
// (PERFORMANCE.md, session 34). Past 8 tokens it multiplies each staged tile by two mma
// n-tiles (session 35).
inline constexpr int64_t kFewMaxTokens = 16;
inline constexpr int64_t kFewMinTokens = 1;
inline constexpr int64_t kFewOneTokenMinRows = 2048;
inline constexpr int64_t kLmHeadMinRows = 32768;
inline constexpr int kFewMaxF32Weights = 4;
bool matmul_few_takes(const Tensor& w, int64_t n);
int matmul_few_splits(int64_t in, int64_t n);
void matmul_few(std::span<const Tensor> w, std::span<const Tensor> f32, const float* x, const __half* xb, int64_t in,
                int64_t n, std::span<const Tensor> y, std::span<float* const> parts, std::span<const Tensor> f32_y,
                cudaStream_t s);
// y[i] = x · w[i]ᵀ for more tokens: from kDenseGemmMinTokens tokens, the weights DenseGemm
// takes go through it (dense_gemm.h); below, quantized weights of one type (pipe::for_type)
// in one pipelined launch; F32 ones in one f32 launch; others through matmul_tiled.
// `scratch` holds matmul_batched_scratch_bytes(w, x) (x in f16, DenseGemm's f16
// weight, F32 weights' partial sums).
class DenseGemm;
size_t matmul_batched_scratch_bytes(std::span<const Tensor> w, const Tensor& x);
void matmul_batched(std::span<const Tensor> w, const Tensor& x, std::span<const Tensor> y, void* scratch,
                    const DenseGemm& dense, cudaStream_t s);
// Whether matmul_batched, not matvec_many, takes these weights for n tokens: above
// kMatvecMaxTokens, and from kFewMinTokens when matmul_few takes one of them (at one
// token: kFewOneTokenMinRows of their rows; the rest then still go through
// matvec_many).
bool matmul_batched_takes(std::span<const Tensor> w, int64_t n);
// out {d, n} = rows ids[i] of table {d, vocab}, dequantized.
void embed(const Tensor& table, const Tensor& ids, const Tensor& out, cudaStream_t s);

// Row norms over rows of length d: y = x * rsqrt(mean(x²) + eps) * w (rms) or
// x * rsqrt(sum(x²) + eps) (l2); w may be null; with z, y *= silu(z).
enum class NormKind { Rms, L2 };
void row_norm(NormKind kind, const float* x, const float* w, const float* z, float eps, float* y, int64_t d,
              int64_t rows, cudaStream_t s);
// sum = a + b' (sum may alias a or b), y = rms_norm(sum) * w; b' is b, plus b_bias {d} on
// each row where given, then rms_norm(b') * b_w where b_w is given.
void add_rms_norm(const float* a, const float* b, const float* b_bias, const float* b_w, const float* w, float eps,
                  float* sum, float* y, int64_t d, int64_t rows, cudaStream_t s);
// RopeParams' fields, with freq_factors ({n_rot/2} divisors, or null) as a device pointer.
struct RopeArgs {
  int n_rot;
  float theta, freq_scale;
  bool neox;
  const float* freq_factors;
};
void rope(float* x, const int32_t* pos, int64_t head_dim, int64_t heads, int64_t n, const RopeArgs& p, cudaStream_t s);
// y = a + b; b of b_len < count elements is repeated (a bias added to each row).
void add(const float* a, const float* b, float* y, int64_t count, int64_t b_len, cudaStream_t s);
void swiglu(const float* gate, const float* up, float* y, int64_t count, cudaStream_t s);
void geglu(const float* gate, const float* up, float* y, int64_t count, cudaStream_t s);
void scale(const float* x, float f, float* y, int64_t count, cudaStream_t s);
// g per element, or per row of length d when per_row.
void mul_sigmoid(const float* x, const float* g, float* y, int64_t count, int64_t d, bool per_row, cudaStream_t s);
void slice_cols(const float* x, float* y, int64_t width, int64_t offset, int64_t len, int64_t rows, cudaStream_t s);
// dst or src: the device view of pinned host memory (cudaHostGetDevicePointer); a
// few kilobytes at most.
void small_copy(void* dst, const void* src, size_t bytes, cudaStream_t s);
// argmax needs argmax_partials() floats of `partials` (each row split over many blocks).
size_t argmax_partials(int64_t V, int64_t rows);
void argmax(const float* logits, int64_t V, int64_t rows, int32_t* ids, float* partials, cudaStream_t s);
// out and ids {n, m} (Backend::token_logprobs); ids must lie in [0, V).
void token_logprobs(const float* logits, int64_t V, int64_t n, const int32_t* ids, int m, float* out,
                    cudaStream_t s);
// sample_rows needs sample_rows_partials() uint64 of `partials`; params: one RowSampling per row.
size_t sample_rows_partials(int64_t V, int64_t rows);
void sample_rows(float* logits, int64_t V, int64_t rows, const RowSampling* params, int32_t* ids,
                 uint64_t* partials, cudaStream_t s);

// Gated DeltaNet pieces (semantics in backend.h).
void gdn_gates(const float* a, const float* b, const float* dt_bias, const float* a_neg, float* g, float* beta,
               int64_t H, int64_t count, cudaStream_t s);
void causal_conv_silu(const float* x, const float* w, float* state, float* y, int64_t C, int64_t n, int64_t K,
                      cudaStream_t s);
// Fused decode form of Backend::gdn_prepare for n <= kGdnPrepareMaxTokens (one
// launch: conv + SiLU, split, per-head L2 norm of q and k, gates).
inline constexpr int64_t kGdnPrepareMaxTokens = 8;
struct GdnPrepareShape {
  int64_t n_tokens, n_heads, n_k_heads, dk, dv, conv_kernel;
};
void gdn_prepare(const GdnPrepareShape& shape, const float* qkv, const float* conv_w, float* conv_state,
                 const float* a, const float* b, const float* dt_bias, const float* a_neg, float l2_eps, float* q,
                 float* k, float* v, float* g, float* beta, cudaStream_t s);
struct DeltaRuleShape {
  int64_t n_tokens, n_heads, n_k_heads, dk, dv;
};
void gated_delta_rule(const DeltaRuleShape& shape, const float* q, const float* k, const float* v, const float* g,
                      const float* beta, float* state, float* y, cudaStream_t s);
// Backend::gated_delta_net_core for n <= kGdnCoreMaxTokens tokens of one sequence, or
// one token for each of n_seqs <= kGdnCoreMaxSeqs sequences (states[i], conv_states[i]:
// token i's), in one launch (gdn_core.cu); gdn_core_supported() says which shapes it
// takes (others run the composition).
inline constexpr int64_t kGdnCoreMaxTokens = 8;
inline constexpr int kGdnCoreMaxSeqs = 32;  // the pointers ride in the kernel's parameters
struct GdnCoreShape {
  int64_t n_tokens, n_heads, n_k_heads, dk, dv, conv_kernel;
};
bool gdn_core_supported(const GdnCoreShape& shape);
void gdn_core(const GdnCoreShape& shape, const float* qkv, const float* conv_w, float* const* conv_states,
              const float* a, const float* b, const float* dt_bias, const float* a_neg, float l2_eps,
              float* const* states, int n_seqs, const float* z, const float* norm_w, float norm_eps, float* y,
              cudaStream_t s);
// The chunked form for prefill (kDeltaRuleChunkedMinTokens tokens and up, dk and dv
// of 64 or 128); `scratch` holds delta_rule_chunked_scratch_floats() floats.
inline constexpr int64_t kDeltaRuleChunkedMinTokens = 16;
bool delta_rule_chunked_supported(const DeltaRuleShape& shape);
size_t delta_rule_chunked_scratch_floats(const DeltaRuleShape& shape);
void gated_delta_rule_chunked(const DeltaRuleShape& shape, const float* q, const float* k, const float* v,
                              const float* g, const float* beta, float* state, float* y, float* scratch,
                              cudaStream_t s);

// Attention over F16 caches {D, Hkv, n_ctx} (the bits of IEEE halves); position p is
// in row p % n_ctx (backend.h: a sliding window's ring wraps).
void kv_store(const float* k, const float* v, uint16_t* k_cache, uint16_t* v_cache, const int32_t* pos, int64_t row,
              int64_t n, int64_t n_ctx, cudaStream_t s);
struct AttentionShape {
  int64_t head_dim, n_head, n_head_kv, n_tokens, n_ctx;
};
// Backend::attention_prepare: qp {2D, Hq, n} with gate, else {D, Hq, n}; biases and
// norms may be null; head_dim up to 512.
// The caches: one sequence's (n_seqs 1) or token t's sequence's (n_seqs = n tokens,
// at most kAttentionMaxSeqs), here and in attention().
inline constexpr int kAttentionMaxSeqs = 16;
struct QkvBias {
  const float* q;  // {qp's rows} or null
  const float* k;  // {D * Hkv} or null
  const float* v;  // {D * Hkv} or null
};
void attention_prepare(const AttentionShape& shape, const float* qp, const float* k, const float* v,
                       const QkvBias& bias, const float* q_norm, const float* k_norm, float eps, const int32_t* pos,
                       const RopeArgs& rope, float* q, float* gate, uint16_t* const* k_caches,
                       uint16_t* const* v_caches, int n_seqs, cudaStream_t s);
// The split-KV form (decode, any token count): head_dim 32, 64, 128 or 256.
// Needs attention_partials_floats() floats of `partials`; gate {D, Hq, n} or null
// (y *= sigmoid(gate)); window > 0: each query sees only its last `window` positions;
// sinks {Hq} or null (Backend::attention).
bool attention_split_supported(const AttentionShape& shape);
size_t attention_partials_floats(const AttentionShape& shape);
void attention(const AttentionShape& shape, const float* q, const uint16_t* const* k_caches,
               const uint16_t* const* v_caches, int n_seqs, const int32_t* pos, float scale, int window,
               const float* gate, const float* sinks, float* partials, float* y, cudaStream_t s);
// Prefill form (tiles of queries sharing K/V tiles, tensor cores in f16) for
// kAttentionPrefillMinTokens queries and up and head_dim 64, 128 or 256; gate, window and sinks as above.
// On an H200 at the flagship's shape (F32 caches then) it beat the split-KV kernel
// from 32 queries at depth 8192 (from 128 at depth 0, where both take a few µs), by
// 16x at 512 queries.
inline constexpr int64_t kAttentionPrefillMinTokens = 32;
bool attention_prefill_supported(const AttentionShape& shape);
void attention_prefill(const AttentionShape& shape, const float* q, const uint16_t* k_cache, const uint16_t* v_cache,
                       const int32_t* pos, float scale, int window, const float* gate, const float* sinks, float* y,
                       cudaStream_t s);

// The routed experts' activation (backend.h's ExpertWeights) with the biases as device
// pointers (null: none, as an empty tensor's data is); expert_glu.cuh applies it.
struct ExpertGlu {
  const float* gate_bias;  // {ff, E}
  const float* up_bias;    // {ff, E}
  float alpha, clamp;      // clamp 0: SwiGLU
};
inline ExpertGlu expert_glu_of(const ExpertWeights& ex) {
  return {ex.gate_bias.as<const float>(), ex.up_bias.as<const float>(), ex.alpha, ex.clamp};
}

// MoE. moe_route: ids/weights {k, n} from logits {E, n}. moe_ffn needs
// moe_ffn_scratch_floats() floats of `act`.
void moe_route(const float* logits, int64_t E, int64_t n, int k, bool renormalize, int32_t* ids, float* weights,
               cudaStream_t s);
size_t moe_ffn_scratch_floats(int64_t ff, int64_t n, int64_t k);
void moe_ffn(const Tensor& x, const ExpertWeights& experts, const Tensor& ids, const Tensor& weights, const Tensor& y,
             float* act, cudaStream_t s);
inline constexpr int kMaxRouted = 32;  // experts chosen per token (one lane each in routing)
// Each chosen expert's down output on its own, for an add that sums them
// (shared_expert_add, or moe_ffn_routed's own sum): sums {d, k, n} unweighted, weights {k, n}.
struct ExpertParts {
  float* sums;
  float* weights;
  // At one token routed from logits, kMaxRouted words, ~0 between layers: gate_up's
  // block (0, k - 1) publishes each pick here, down_part's blocks read theirs instead
  // of routing, the add that sums the parts sets them back (moe.cu's top says why it is safe).
  unsigned long long* route = nullptr;
};
inline constexpr unsigned long long kNoPick = ~0ull;  // an unpublished ExpertParts::route word
// moe_route + moe_ffn for n <= kExpertDecodeMaxTokens. One token: two launches, the
// expert kernels route from the logits {E, n} themselves. From kRouteOnceMinTokens a
// moe_route launch writes `ids` and `weights` ({k, n} each) first: every expert block
// routing its own token cost 8-12% at 4 and 8 sequences (PERFORMANCE.md, session 34).
// Same scratch as moe_ffn. With `parts`, y is left alone and the experts' outputs go
// there instead (for shared_expert_add to sum), unless `sum_parts`: then one more launch
// sums them into y (without a shared expert; the experts' parts beat one down block
// summing all k, PERFORMANCE.md session 63).
inline constexpr int64_t kRouteOnceMinTokens = 2;
void moe_ffn_routed(const Tensor& x, const Tensor& logits, int k, bool renormalize, const ExpertWeights& experts,
                    const Tensor& y, float* act, const ExpertParts* parts, bool sum_parts, int32_t* ids,
                    float* weights, cudaStream_t s);
// moe_ffn for n > kExpertDecodeMaxTokens (moe_grouped.cu): pairs grouped by expert on the
// GPU, one tensor-core launch for gate + up + SwiGLU and one for down over all
// experts, a combine in token order. Needs moe_grouped_scratch_bytes() of `scratch`.
// While the experts average at most a token (several sequences decoding, short
// prompts), on Hopper, gate + up and down are moe_few.cu's kernels.
// shared_out ({d, n}, or null): a shared expert's output, which the combine adds, times
// sigmoid(shared_logit[t]) unless shared_logit is null (moe_block: two launches fewer
// than a gate and an add after the combine).
size_t moe_grouped_scratch_bytes(int64_t d, int64_t ff, int64_t n, int64_t k, int64_t E);
void moe_ffn_grouped(const Tensor& x, const ExpertWeights& experts, const Tensor& ids, const Tensor& weights,
                     const Tensor& y, void* scratch, const float* shared_out, const float* shared_logit,
                     cudaStream_t s);
// y {d, n} += sigmoid(gate_logit) · down(silu(g) · u) for n <= kExpertDecodeMaxTokens;
// gate_logit {n} may be null (no gate). `inputs_settled`: g, u and gate_logit were
// written before the previous kernel (moe_ffn_routed's pair), so all but the add into
// y runs while that kernel finishes.
// With `parts` (k experts), y is not read: y = the parts' weighted sum, in expert
// order, + the shared expert's output.
void shared_expert_add(const Tensor& g, const Tensor& u, const Tensor& down, const float* gate_logit, const Tensor& y,
                       bool inputs_settled, const ExpertParts* parts, int k, cudaStream_t s);

}  // namespace zinc::cuda
