// The backend interface: memory plus the ops every architecture's forward pass is
// written against. The CPU backend is the executable specification; other backends
// implement the same ops (and may fuse them) so a model is written once.
//
// Shapes are written in GGML order, innermost first: x {d, n} is n rows of d floats.
// Activations are F32 unless a comment says otherwise. Ops may run asynchronously;
// read() and sync() are the only points where the host waits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <string>

#include "backend/row_sampling.h"
#include "backend/tensor.h"

namespace zinc {

namespace gguf { struct TensorInfo; }

struct RopeParams {
  int n_rot = 0;        // rotated dims per head (the rest pass through)
  float theta = 10000;  // frequency base: dim pair j turns at pos · theta^(-2j/n_rot)
  bool neox = true;     // NEOX pairs dim j with j + n_rot/2; otherwise 2j with 2j+1
  float freq_scale = 1; // linear position scaling (1 = none)
  const Tensor* freq_factors = nullptr;  // {n_rot/2} divisors of each frequency, or none
};

// The routed experts of a MoE layer. Expert e maps x {d} to
//   down_e · glu(gate_e·x + gate_bias_e, up_e·x + up_bias_e) + down_bias_e
// with glu(g, u) = silu(g)·u (SwiGLU), or with clamp > 0 GPT-OSS's clamped form:
//   g' = min(g, clamp), u' = max(-clamp, min(u, clamp)), glu = g'·sigmoid(alpha·g')·(u' + 1).
// The biases are F32, or empty when the model has none.
struct ExpertWeights {
  Tensor gate, up, down;                 // {d, ff, E}, {d, ff, E}, {ff, d, E}
  Tensor gate_bias, up_bias, down_bias;  // {ff, E}, {ff, E}, {d, E}
  float alpha = 0, clamp = 0;            // clamp 0: SwiGLU
};
// The shapes above for inputs of d elements; each bias empty, or F32.
inline bool experts_fit(const ExpertWeights& ex, int64_t d) {
  const int64_t ff = ex.down.ne[0], E = ex.gate.ne[2];
  const auto bias_fits = [&](const Tensor& b, int64_t rows) {
    return b.empty() || (b.type == DType::F32 && b.ne[0] == rows && b.n_elements() == rows * E);
  };
  return ex.gate.ne[0] == d && ex.up.ne[0] == d && ex.gate.ne[1] == ff && ex.up.ne[1] == ff && ex.down.ne[1] == d &&
         ex.up.ne[2] == E && ex.down.ne[2] == E && bias_fits(ex.gate_bias, ff) && bias_fits(ex.up_bias, ff) &&
         bias_fits(ex.down_bias, d);
}

// The per-sequence tensors a fused op takes in pairs (conv and delta states, K and V
// caches): one pair for one sequence's n tokens, or one per token (n sequences of one
// token each).
inline bool one_or_per_token(std::span<const Tensor> a, std::span<const Tensor> b, int64_t n_tokens) {
  return !a.empty() && a.size() == b.size() && (a.size() == 1 || static_cast<int64_t>(a.size()) == n_tokens);
}

// A point in a forward pass's scratch (Backend::scratch_mark).
struct ScratchMark {
  size_t chunk = 0, used = 0, taken = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

  // ---- memory ----------------------------------------------------------------
  // A weight from a mapped GGUF, kept in its own block format. The CPU backend
  // refers to the map; a device backend copies it once.
  virtual Tensor upload_weight(const gguf::TensorInfo& info) = 0;
  // Memory that lives until the backend dies (caches, recurrent state), zeroed.
  virtual Tensor alloc_persistent(DType t, std::initializer_list<int64_t> dims) = 0;
  // Memory for one forward pass; everything from scratch() is released by scratch_reset().
  virtual Tensor scratch(DType t, std::initializer_list<int64_t> dims) = 0;
  virtual void scratch_reset() = 0;
  // scratch_rewind(mark) gives back what scratch() returned after the mark, for the
  // pass's later scratch() calls. A model gives back each layer's intermediates when
  // the layer ends (what outlives it was taken before the mark), so a long prompt's
  // pass holds one layer's, not every layer's. Ops already issued may still read that
  // memory: the backend orders later ops' writes after those reads (the CPU runs ops in
  // turn; a CUDA kernel writes nothing before its wait for the kernels ahead of it).
  virtual ScratchMark scratch_mark() const = 0;
  virtual void scratch_rewind(const ScratchMark& mark) = 0;
  // Scratch memory held now (after a pass: what that pass needed at its peak, or more).
  virtual size_t scratch_bytes() const = 0;
  virtual void write(const Tensor& dst, const void* host, size_t bytes, size_t offset = 0) = 0;
  virtual void read(const Tensor& src, void* host, size_t bytes, size_t offset = 0) = 0;
  // Host memory that write and read move fastest (page-locked for a GPU), for large
  // buffers kept and reused (the prefix cache's snapshots). A write from it may still
  // be in flight when write returns: the buffer must not change before the next read
  // or sync.
  virtual void* host_alloc(size_t bytes) { return ::operator new(bytes); }
  virtual void host_free(void* p) { ::operator delete(p); }
  // A read into host_alloc memory that need not wait: the copy runs behind the work
  // submitted so far and its bytes are there once sync() or read() returns. A write
  // from that memory submitted later sees them (it is ordered after the copy, whatever
  // its size), but the host must not read them before a sync.
  virtual void read_to_host_alloc(const Tensor& src, void* host, size_t bytes, size_t offset) {
    read(src, host, bytes, offset);
  }
  // A read that does not wait: the copy starts behind the work submitted so far and
  // the bytes are in `host` once wait_read(ticket) returns, so the host can submit
  // the next step before it knows this one's result. Backends that compute on the
  // host copy at once.
  virtual uint64_t read_async(const Tensor& src, void* host, size_t bytes) {
    read(src, host, bytes);
    return 0;
  }
  virtual void wait_read(uint64_t /*ticket*/) {}
  virtual void zero(const Tensor& t) = 0;
  virtual void copy(const Tensor& src, const Tensor& dst) = 0;  // same byte size
  virtual void sync() = 0;

  // ---- ops -----------------------------------------------------------------------
  // out {d, n} = rows ids[i] of table {d, vocab} (any type), as F32.
  virtual void embed(const Tensor& table, const Tensor& ids /*I32 {n}*/, const Tensor& out) = 0;
  // y {out, n} = x {in, n} times w {in, out}ᵀ, w of any type.
  virtual void matmul(const Tensor& w, const Tensor& x, const Tensor& y) = 0;
  // Per row of length d = x.ne[0]: y = x / sqrt(mean(x²) + eps) * w (w {d}, or none when null).
  virtual void rms_norm(const Tensor& x, const Tensor* w, float eps, const Tensor& y) = 0;
  // Per row: y = x / sqrt(sum(x²) + eps).
  virtual void l2_norm(const Tensor& x, float eps, const Tensor& y) = 0;
  // Per row: y = rms_norm(x, w, eps) * silu(z); x, z, y {d, rows}, w {d}.
  virtual void rms_norm_gated(const Tensor& x, const Tensor& w, const Tensor& z, float eps, const Tensor& y) = 0;
  // In place on x {head_dim, heads, n}: rotary embedding of the first n_rot dims of
  // each head at position pos[i] (I32 {n}); see RopeParams.
  virtual void rope(const Tensor& x, const Tensor& pos, const RopeParams& p) = 0;

  // Element-wise, same shapes; or b one row {a.ne[0]} added to every row of a (a bias).
  virtual void add(const Tensor& a, const Tensor& b, const Tensor& y) = 0;
  // y = silu(gate) * up.
  virtual void swiglu(const Tensor& gate, const Tensor& up, const Tensor& y) = 0;
  // y = gelu(gate) * up, GELU in its tanh form (Gemma's gelu_pytorch_tanh):
  // gelu(x) = x/2 · (1 + tanh(sqrt(2/π) · (x + 0.044715 x³))).
  virtual void geglu(const Tensor& gate, const Tensor& up, const Tensor& y) = 0;
  // y = x * s.
  virtual void scale(const Tensor& x, float s, const Tensor& y) = 0;
  // y = x * sigmoid(g); g has x's shape, or {1, rows} (one gate per row).
  virtual void mul_sigmoid(const Tensor& x, const Tensor& g, const Tensor& y) = 0;
  // y {len, rows} = columns [offset, offset + len) of x {w, rows}.
  virtual void slice_cols(const Tensor& x, int64_t offset, int64_t len, const Tensor& y) = 0;

  // Gated DeltaNet gates, per token and value head (a, b {H, n}; dt_bias, a_log_neg {H}):
  //   g = softplus(a + dt_bias) * a_neg   (a log-decay, <= 0)
  //   beta = sigmoid(b)
  virtual void gdn_gates(const Tensor& a, const Tensor& b, const Tensor& dt_bias, const Tensor& a_neg,
                         const Tensor& g, const Tensor& beta) = 0;
  // Depthwise causal conv with kernel K over x {C, n}, then SiLU. state {C, K-1}
  // holds the previous K-1 inputs (oldest first) and is updated; w {K, C}.
  virtual void causal_conv_silu(const Tensor& x, const Tensor& w, const Tensor& state, const Tensor& y) = 0;
  // Gated delta rule over n tokens. q, k {dk, Hk, n} (already L2-normalised),
  // v {dv, H, n}, g, beta {H, n}; value head h reads key head h % Hk. state
  // {dv, dk, H} F32 (S[h][i][j], i over dk) is carried in and out. y {dv, H, n}.
  // Per token: S = exp(g)·S; S += k ⊗ beta·(v − Sᵀk); y = Sᵀq / sqrt(dk).
  virtual void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                const Tensor& beta, const Tensor& state, const Tensor& y) = 0;

  // A KV cache {D, Hkv, C} (F16) holds position p at row p % C: the whole context when
  // C is at least the sequence's length, else a ring of a sliding window's last rows.
  // Writes k, v {D, Hkv, n} into the caches at the rows of positions pos[i] (I32 {n}),
  // rounded to nearest. Positions live on the device so a captured step can be
  // replayed at a new position.
  virtual void kv_store(const Tensor& k, const Tensor& v, const Tensor& k_cache, const Tensor& v_cache,
                        const Tensor& pos) = 0;
  // Causal GQA attention over the F16 caches, in f32: query i {D, Hq} attends to
  // positions first..pos[i] (which the caches already hold); y {D, Hq, n}.
  // first is 0, or with a sliding window (window > 0: Gemma 3's local layers)
  // max(0, pos[i] - window + 1), the window's last positions; every position one call
  // reads (from the smallest first to the largest pos[i]) must still be in the cache,
  // so a call spans at most C positions (kv_store's rows). Query head h reads KV
  // head h / (Hq / Hkv). One sequence's caches for all n queries, or one sequence per
  // query (query i with k_caches[i] and v_caches[i], as n calls). With sinks (F32
  // {Hq}: GPT-OSS), head h's softmax has one more logit, sinks[h], with no value: it
  // takes its share of the weight and gives nothing.
  virtual void attention(const Tensor& q, std::span<const Tensor> k_caches, std::span<const Tensor> v_caches,
                         const Tensor& pos, float scale, int window, const Tensor* sinks, const Tensor& y) = 0;

  // Router: p = softmax(logits {E, n}); the k largest per token into ids (I32 {k, n})
  // and weights ({k, n}), renormalised to sum 1 when `renormalize`.
  virtual void moe_route(const Tensor& logits, int k, bool renormalize, const Tensor& ids,
                         const Tensor& weights) = 0;
  // y {d, n} = sum over the k chosen experts of weight · expert_e(x) (ExpertWeights).
  virtual void moe_ffn(const Tensor& x, const ExpertWeights& experts, const Tensor& ids, const Tensor& weights,
                       const Tensor& y) = 0;

  // ids (I32 {n}) = argmax per row of logits {V, n}.
  virtual void argmax(const Tensor& logits, const Tensor& ids) = 0;
  // out (F32 {n, m}) = log-softmax of logits {V, n}'s row t at ids[j][t] (I32 {n, m}),
  // for m ids a row: logits[id] - log_z, log_z = max + log(sum of exp(logit - max)),
  // the max in float and the sum in double (row_log_z in row_sampling.h). Scoring a
  // prompt reads these instead of n rows of V floats.
  virtual void token_logprobs(const Tensor& logits, const Tensor& ids, const Tensor& out) = 0;
  // ids (I32 {n}) = one token per row of logits {V, n}, drawn by the sampler chain
  // without DRY as penalise_row and draw_from_row (sample/sampler.h) draw it: the
  // penalties (applied to the logits in place; ids[t] on entry is the last token of
  // row t's window when its parameters say so), top-k, top-p, min-p, softmax(logit /
  // T) and the draw, with row t's parameters in params (I32 {kRowSamplingWords, >= n},
  // RowSampling each). A row that row_draw_declined() declines gets id -1 (top-k off,
  // row_sampling.h): its logits stay penalised for the host to finish the draw.
  virtual void sample_rows(const Tensor& logits, const Tensor& params, const Tensor& ids) = 0;

  // ---- fused ops: each is exactly the composition its comment names (the CPU
  // backend runs that); a device backend saves launches and memory round trips.
  // y[i] = matmul(w[i], x, y[i]) for every i: several projections of one input.
  virtual void matmul_many(std::span<const Tensor> w, const Tensor& x, std::span<const Tensor> y) = 0;
  // sum = add(a, b) (sum may alias a or b), then y = rms_norm(sum, w, eps). With b_bias
  // {d}, b is add(b, b_bias) first (gpt-oss's output projection bias); with b_norm, then
  // rms_norm(b, b_norm, eps): a sub-block's output normed before the residual add
  // (Gemma's post-norms).
  virtual void add_rms_norm(const Tensor& a, const Tensor& b, const Tensor* b_bias, const Tensor* b_norm,
                            const Tensor& w, float eps, const Tensor& sum, const Tensor& y) = 0;
  // add_rms_norm(a, b, -, -, norm_w, eps, sum, h), then matmul_many(w, h, y): a block's
  // norm and the projections that read it (the MoE router's launch). sum aliases
  // neither a nor b.
  virtual void add_rms_norm_matmul_many(const Tensor& a, const Tensor& b, const Tensor& norm_w, float eps,
                                        const Tensor& sum, const Tensor& h, std::span<const Tensor> w,
                                        std::span<const Tensor> y) = 0;
  // The Gated DeltaNet input stage: c = causal_conv_silu(qkv {2·Hk·dk + H·dv, n},
  // conv_w, conv_state); q, k {dk, Hk, n} = c's first two Hk·dk columns, each head
  // l2_norm'ed with l2_eps; v {dv, H, n} = the rest; g, beta = gdn_gates(a, b, ...).
  virtual void gdn_prepare(const Tensor& qkv, const Tensor& conv_w, const Tensor& conv_state, const Tensor& a,
                           const Tensor& b, const Tensor& dt_bias, const Tensor& a_neg, float l2_eps, const Tensor& q,
                           const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta) = 0;
  // The attention input stage of one sequence. First the projections' biases where
  // given (bias: qp += bias.q over qp's rows, k += bias.k, v += bias.v, each broadcast
  // over the tokens). With gate: qp {2D, Hq, n} holds each
  // head's query then its gate; q = slice_cols(qp, 0, D), gate = slice_cols(qp, D, D),
  // both {D, Hq, n}. Without (gate null): qp {D, Hq, n} is the query (q may alias it).
  // Then q = rms_norm(q, q_norm, eps) and k' = rms_norm(k, k_norm, eps) (each skipped
  // when its weight is null), rope(q, pos, rope), rope(k', pos, rope), and
  // kv_store(k', v, k_cache, v_cache, pos). k and v {D, Hkv, n} are only read. The
  // caches as attention's: one sequence's, or one sequence per token.
  struct QkvBias {
    const Tensor* q = nullptr;  // {qp.ne[0] * Hq} or null
    const Tensor* k = nullptr;  // {D * Hkv} or null
    const Tensor* v = nullptr;  // {D * Hkv} or null
  };
  virtual void attention_prepare(const Tensor& qp, const Tensor& k, const Tensor& v, const QkvBias& bias,
                                 const Tensor* q_norm, const Tensor* k_norm, float eps, const Tensor& pos,
                                 const RopeParams& rope, const Tensor& q, const Tensor* gate,
                                 std::span<const Tensor> k_caches, std::span<const Tensor> v_caches) = 0;
  // y = attention(q, k_caches, v_caches, pos, scale, window), then y = mul_sigmoid(y,
  // gate) with gate {D, Hq, n}: the output gate of gated attention.
  virtual void attention_gated(const Tensor& q, std::span<const Tensor> k_caches, std::span<const Tensor> v_caches,
                               const Tensor& pos, float scale, int window, const Tensor& gate, const Tensor& y) = 0;
  // The Gated DeltaNet core, between the input and the output projections:
  // gdn_prepare(qkv, conv_w, conv_state, a, b, dt_bias, a_neg, l2_eps) into q, k, v, g,
  // beta; gated_delta_rule(q, k, v, g, beta, state, y); rms_norm_gated(y, norm_w, z,
  // norm_eps, y). y, z {dv, H, n}; state {dv, dk, H}; Hk = (qkv.ne[0] - H·dv) / (2·dk).
  // One sequence's n tokens (one conv state and state), or one token for each of n
  // sequences (token t with conv_states[t] and states[t], as n calls would do it).
  virtual void gated_delta_net_core(const Tensor& qkv, const Tensor& conv_w, std::span<const Tensor> conv_states,
                                    const Tensor& a, const Tensor& b, const Tensor& dt_bias, const Tensor& a_neg,
                                    float l2_eps, std::span<const Tensor> states, const Tensor& z,
                                    const Tensor& norm_w, float norm_eps, const Tensor& y) = 0;
  // A gated shared expert added into y {d, n}: y += sigmoid(gate_logit) · down(swiglu(g, u))
  // with g, u {ff, n}, down {ff, d}, gate_logit {1, n} (or null: no gate).
  virtual void shared_expert_add(const Tensor& g, const Tensor& u, const Tensor& down, const Tensor* gate_logit,
                                 const Tensor& y) = 0;
  // A whole MoE block from the router's logits {E, n}: moe_route(logits, k, renormalize)
  // into ids and weights, y = moe_ffn(x, experts, ids, weights), then, when
  // `shared` is given, shared_expert_add(shared->g, shared->u, shared->down,
  // shared->gate_logit, y).
  struct SharedExpert {
    Tensor g, u, down;                   // {ff, n}, {ff, n}, {ff, d}
    const Tensor* gate_logit = nullptr;  // {1, n}, or none
  };
  virtual void moe_block(const Tensor& x, const Tensor& logits, int k, bool renormalize, const ExpertWeights& experts,
                         const SharedExpert* shared, const Tensor& y) = 0;
};

std::unique_ptr<Backend> make_cpu_backend(int n_threads = 0);  // 0: all cores

}  // namespace zinc
