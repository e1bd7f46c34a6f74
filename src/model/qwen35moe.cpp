// Qwen3.5 / Qwen3.6 hybrids (GGUF `qwen35moe`, and the dense `qwen35`): every
// full_attention_interval-th layer is gated full attention, the others Gated
// DeltaNet; the FFN is a routed MoE with a gated shared expert (or a dense SwiGLU).
// Norm weights are stored +1 by the converter, so plain RMSNorm applies.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf.h"
#include "model/blocks.h"
#include "model/model.h"
#include "model/registry.h"
#include "model/weights.h"

namespace zinc {
namespace {

struct Layer {
  Tensor attn_norm, post_attention_norm;
  bool full_attention = false;
  blocks::AttentionWeights attn;
  blocks::GatedDeltaNetWeights gdn;
  blocks::MoeWeights moe;
  blocks::FfnWeights ffn;  // dense variant
};

class Qwen35 final : public Model {
 public:
  Qwen35(const gguf::GgufFile& f, Backend& be) : be_(be), arch_(f.architecture()) {
    const std::string a = arch_ + ".";
    n_layer_ = f.get_int(a + "block_count") - f.get_int_or(a + "nextn_predict_layers", 0);
    n_embd_ = f.get_int(a + "embedding_length");
    n_ctx_train_ = f.get_int(a + "context_length");
    eps_ = static_cast<float>(f.get_float(a + "attention.layer_norm_rms_epsilon"));
    const int64_t interval = f.get_int_or(a + "full_attention_interval", 4);

    attn_.n_head = f.get_int(a + "attention.head_count");
    attn_.n_head_kv = f.get_int(a + "attention.head_count_kv");
    attn_.head_dim = f.get_int(a + "attention.key_length");
    attn_.rope.n_rot = static_cast<int>(f.get_int(a + "rope.dimension_count"));
    attn_.rope.theta = static_cast<float>(f.get_float(a + "rope.freq_base"));
    attn_.rope.neox = true;  // M-RoPE sections reduce to plain NEOX RoPE for text
    attn_.norm_eps = eps_;
    attn_.output_gate = true;

    gdn_.n_k_heads = f.get_int(a + "ssm.group_count");
    gdn_.n_v_heads = f.get_int(a + "ssm.time_step_rank");
    gdn_.dk = f.get_int(a + "ssm.state_size");
    gdn_.dv = f.get_int(a + "ssm.inner_size") / gdn_.n_v_heads;
    gdn_.conv_kernel = f.get_int(a + "ssm.conv_kernel");
    gdn_.norm_eps = eps_;

    moe_mode_ = f.has(a + "expert_count");
    WeightLoader w(f, be);
    tok_embd_ = w.get("token_embd.weight", {n_embd_, -1});
    n_vocab_ = tok_embd_.ne[1];
    (void)n_vocab_;
    output_norm_ = w.get("output_norm.weight", {n_embd_});
    output_ = w.has("output.weight") ? w.get("output.weight", {n_embd_, n_vocab_}) : tok_embd_;

    const int64_t D = attn_.head_dim, Hq = attn_.n_head, Hkv = attn_.n_head_kv;
    const int64_t H = gdn_.n_v_heads, Hk = gdn_.n_k_heads;
    const int64_t channels = 2 * Hk * gdn_.dk + H * gdn_.dv;
    for (int i = 0; i < n_layer_; ++i) {
      Layer L;
      auto name = [&](const char* s) { return WeightLoader::blk(i, s); };
      L.attn_norm = w.get(name("attn_norm.weight"), {n_embd_});
      L.post_attention_norm = w.get(name("post_attention_norm.weight"), {n_embd_});
      L.full_attention = (i + 1) % interval == 0;
      if (L.full_attention) {
        L.attn.q = w.get(name("attn_q.weight"), {n_embd_, 2 * Hq * D});
        L.attn.k = w.get(name("attn_k.weight"), {n_embd_, Hkv * D});
        L.attn.v = w.get(name("attn_v.weight"), {n_embd_, Hkv * D});
        L.attn.o = w.get(name("attn_output.weight"), {Hq * D, n_embd_});
        L.attn.q_norm = w.get(name("attn_q_norm.weight"), {D});
        L.attn.k_norm = w.get(name("attn_k_norm.weight"), {D});
      } else {
        L.gdn.qkv = w.get(name("attn_qkv.weight"), {n_embd_, channels});
        L.gdn.gate = w.get(name("attn_gate.weight"), {n_embd_, H * gdn_.dv});
        L.gdn.conv = w.get(name("ssm_conv1d.weight"), {gdn_.conv_kernel, channels});
        L.gdn.dt_bias = w.get(name("ssm_dt.bias"), {H});
        L.gdn.a_neg = w.get(name("ssm_a"), {H});
        L.gdn.beta = w.get(name("ssm_beta.weight"), {n_embd_, H});
        L.gdn.alpha = w.get(name("ssm_alpha.weight"), {n_embd_, H});
        L.gdn.norm = w.get(name("ssm_norm.weight"), {gdn_.dv});
        L.gdn.out = w.get(name("ssm_out.weight"), {H * gdn_.dv, n_embd_});
      }
      if (moe_mode_) load_moe(f, w, i, L);
      else {
        const int64_t ff = f.get_int(a + "feed_forward_length");
        L.ffn = {w.get(name("ffn_gate.weight"), {n_embd_, ff}), w.get(name("ffn_up.weight"), {n_embd_, ff}),
                 w.get(name("ffn_down.weight"), {ff, n_embd_})};
      }
      layers_.push_back(std::move(L));
    }
  }

  std::string_view arch() const override { return arch_; }
  int64_t n_vocab() const override { return n_vocab_; }
  int64_t n_ctx_train() const override { return n_ctx_train_; }

  SequenceState make_sequence(int64_t n_ctx, int64_t /*window_piece: no sliding windows*/) override {
    SequenceState s;
    s.n_ctx = n_ctx;
    const int64_t channels = 2 * gdn_.n_k_heads * gdn_.dk + gdn_.n_v_heads * gdn_.dv;
    for (const Layer& L : layers_) {
      LayerState ls;
      if (L.full_attention) {
        ls.k_cache = be_.alloc_persistent(DType::F16, {attn_.head_dim, attn_.n_head_kv, n_ctx});
        ls.v_cache = be_.alloc_persistent(DType::F16, {attn_.head_dim, attn_.n_head_kv, n_ctx});
      } else {
        ls.conv = be_.alloc_persistent(DType::F32, {channels, gdn_.conv_kernel - 1});
        ls.delta = be_.alloc_persistent(DType::F32, {gdn_.dv, gdn_.dk, gdn_.n_v_heads});
      }
      s.layers.push_back(ls);
    }
    return s;
  }

  Tensor forward_batch(std::span<const SequenceChunk> chunks) override {
    const blocks::Batch batch = blocks::begin_forward(be_, chunks);
    Tensor x = be_.scratch(DType::F32, {n_embd_, batch.n_tokens});
    be_.embed(tok_embd_, batch.ids, x);
    trace(x, "embed");
    blocks::MoeOptions moe_opt{static_cast<int>(n_expert_used_), true};
    // Each residual add is fused with the norm after it (the next layer's, or the output norm).
    // A layer reads h and writes the next layer's into h_next; the rest of its scratch is
    // given back when it ends.
    Tensor h = blocks::rms_norm(be_, x, layers_[0].attn_norm, eps_);
    Tensor h_next = be_.scratch(DType::F32, {n_embd_, batch.n_tokens});
    for (int il = 0; il < n_layer_; ++il) {
      const ScratchMark layer_start = be_.scratch_mark();
      Layer& L = layers_[il];
      Tensor mix = L.full_attention ? blocks::attention(be_, L.attn, attn_, batch, il, h)
                                    : blocks::gated_delta_net(be_, L.gdn, gdn_, batch, il, h);
      trace(mix, L.full_attention ? "attn_out" : "gdn_out", il);
      // x + mix goes to x_mid (the MoE router's launch forms it with its norm), the layer's
      // output back to x.
      const Tensor x_mid = be_.scratch(DType::F32, {n_embd_, batch.n_tokens});
      const Tensor ffn = blocks::swiglu_or_moe_after_add(be_, moe_mode_ ? &L.moe : nullptr, moe_opt, L.ffn, x, mix,
                                                         L.post_attention_norm, eps_, x_mid);
      trace(ffn, "ffn_out", il);
      be_.add_rms_norm(x_mid, ffn, nullptr, nullptr, il + 1 < n_layer_ ? layers_[il + 1].attn_norm : output_norm_,
                       eps_, x, h_next);
      trace(x, "layer_out", il);
      be_.scratch_rewind(layer_start);
      std::swap(h, h_next);
    }
    Tensor last = blocks::finish_forward(be_, batch, h);
    if (last.empty()) return last;
    return blocks::linear(be_, output_, last);
  }

 private:
  void load_moe(const gguf::GgufFile& f, const WeightLoader& w, int i, Layer& L) {
    const std::string a = arch_ + ".";
    const int64_t E = f.get_int(a + "expert_count"), ff = f.get_int(a + "expert_feed_forward_length");
    n_expert_used_ = f.get_int(a + "expert_used_count");
    auto name = [&](const char* s) { return WeightLoader::blk(i, s); };
    L.moe.router = w.get(name("ffn_gate_inp.weight"), {n_embd_, E});
    L.moe.experts.gate = w.get(name("ffn_gate_exps.weight"), {n_embd_, ff, E});
    L.moe.experts.up = w.get(name("ffn_up_exps.weight"), {n_embd_, ff, E});
    L.moe.experts.down = w.get(name("ffn_down_exps.weight"), {ff, n_embd_, E});
    if (w.has(name("ffn_gate_shexp.weight"))) {
      const int64_t sff = f.get_int(a + "expert_shared_feed_forward_length");
      L.moe.shared = {w.get(name("ffn_gate_shexp.weight"), {n_embd_, sff}),
                      w.get(name("ffn_up_shexp.weight"), {n_embd_, sff}),
                      w.get(name("ffn_down_shexp.weight"), {sff, n_embd_})};
      // Stored {d} or {d, 1}; either is one gate value per token.
      L.moe.shared_gate = w.get(name("ffn_gate_inp_shexp.weight"), {n_embd_, 1});
    }
  }

  Backend& be_;
  std::string arch_;
  int64_t n_layer_ = 0, n_embd_ = 0, n_vocab_ = 0, n_ctx_train_ = 0, n_expert_used_ = 0;
  float eps_ = 1e-6f;
  bool moe_mode_ = false;
  blocks::AttentionOptions attn_;
  blocks::GatedDeltaNetOptions gdn_;
  Tensor tok_embd_, output_norm_, output_;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> load_qwen35(const gguf::GgufFile& file, Backend& backend) {
  return std::make_unique<Qwen35>(file, backend);
}

}  // namespace zinc
